"""The noise rule (``NoiseRule``): a difference counts only beyond both the floor and the measured noise."""

import pytest

from slim_mp.graph_pass.placement import PlacementOptions
from slim_mp.graph_pass.placement.noise import NoiseRule, NoiseVerdict


def test_the_noise_rule_takes_the_larger_of_the_floor_and_the_measured_noise():
    options = NoiseRule(floor=0.01)
    assert options.is_noise(9.95, 10.0) and not options.is_noise(9.8, 10.0)
    assert options.is_noise(9.5, 10.0, measured_noise=0.07) and not options.is_noise(9.5, 10.0, measured_noise=0.03)
    assert options.win_verdict("bfloat16", 0.52, 0.55, 0.07) == NoiseVerdict(
        False, "bfloat16 0.520 ms vs float32 0.550 ms: a 5.8% win is inside this machine's measured noise of 7.0%")
    assert options.win_verdict("bfloat16", 0.52, 0.55, 0.005) == NoiseVerdict(
        True, "bfloat16 0.520 ms vs float32 0.550 ms: a 5.8% win, beyond the 1.0% noise floor (measured noise 0.5%)")


def test_the_bound_is_the_larger_of_floor_and_measured_noise_and_the_edge_is_noise():
    rule = NoiseRule(floor=0.01)
    assert rule.bound(0.0) == 0.01 and rule.bound(0.04) == 0.04
    assert rule.is_noise(10.0, 10.1), "exactly the floor is still noise"
    assert not rule.is_noise(10.0, 10.2)


def test_a_slower_low_time_never_wins_and_says_how_much_slower():
    verdict = NoiseRule(floor=0.01).win_verdict("bfloat16", 12.0, 10.0)
    assert verdict == NoiseVerdict(False, "bfloat16 12.000 ms vs float32 10.000 ms: 20% slower")


def test_a_win_inside_the_floor_names_the_floor():
    verdict = NoiseRule(floor=0.01).win_verdict("bfloat16", 9.95, 10.0, measured_noise=0.002)
    assert not verdict.wins
    assert verdict.sentence.endswith("a 0.5% win is inside the 1.0% noise floor (measured noise 0.2%)")


def test_a_verdict_is_settled_only_beyond_the_factor_times_the_bound_either_way():
    options = NoiseRule(floor=0.01, settle_factor=2.0)
    # Rounds of a variant 1.7x faster than its reference, with ~1% spread: settled after three.
    assert options.settled([5.9, 6.0, 5.95], [10.0, 10.1, 10.05])
    assert options.settled([17.0, 17.1, 17.05], [10.0, 10.1, 10.05]), "a clear loss settles too"
    # Ratios 1.0, 0.98, 1.02, 0.98, 1.02: a measured noise of 2%; the fastest's 2.04% win is beyond the
    # bound (2%) but not twice it (4%).
    low, base = [10.0, 9.8, 10.2, 9.8, 10.2], [10.0] * 5
    assert not options.is_noise(min(low), min(base), measured_noise=0.02)
    assert not options.settled(low, base)
    floor_2 = NoiseRule(floor=0.02)
    assert not floor_2.apart(9.7, 10.0, 0.0, 2.0) and floor_2.apart(9.5, 10.0, 0.0, 2.0)


def test_a_clear_verdict_needs_every_round_of_one_to_beat_every_round_of_the_other():
    # Bound max(1%, 5%) = 5%, times 4 = 20%: the slowest low round must beat the fastest float32 one by more.
    rule = NoiseRule(floor=0.01, clear_factor=4.0)
    assert rule.is_clear([6.0, 6.2], [10.0, 9.9], prior_noise=0.05)
    assert rule.is_clear([10.0, 9.9], [6.0, 6.2], prior_noise=0.05), "a clear loss too"
    assert not rule.is_clear([6.0, 8.5], [10.0, 9.9], prior_noise=0.05), "one round too close"
    assert not rule.is_clear([6.0, 6.2], [10.0, 9.9], prior_noise=0.15), "a noisier machine"
    assert not rule.is_clear([], [10.0], prior_noise=0.0)


def test_the_pooled_noise_is_the_median_of_the_pairs_and_unknown_without_one():
    from slim_mp.graph_pass.placement.noise import pooled_noise

    assert pooled_noise([0.01, 0.30, 0.02]) == 0.02, "one pair a burst hit does not set it"
    assert pooled_noise([]) is None


def test_the_rule_is_held_by_the_placement_options_and_checked_when_built():
    assert PlacementOptions().tuning.noise == NoiseRule() and NoiseRule().floor == 0.01
    with pytest.raises(ValueError, match=r"NoiseRule\(floor=1.5\) must be a fraction in \[0, 1\)"):
        NoiseRule(floor=1.5)
    with pytest.raises(ValueError, match=r"NoiseRule\(clear_factor=0.5\) must be at least 1"):
        NoiseRule(clear_factor=0.5)
