"""The whole-step check (``step_check``): the chosen placement against all float32 and static, as
whole steps; one golden test per verdict's sentence.
"""

import json

import pytest

from slim_mp.graph_pass.placement import Candidate, NoiseRule, OpTiming
from slim_mp.timing import Timed
from slim_mp.graph_pass.placement.candidate import all_float32_candidate, static_candidate
from slim_mp.graph_pass.placement.step_check import CheckVerdict, check_batch, judge

from .fakes import (CLOSE_CALL, FakeMeasure, refuse, refuse_steps, conv_chain, measured_rewrite, FakeSteps,
                    conv_bias_scale_chain, conv_then_while_loop, fast_convs_slow_steps)


def test_the_whole_step_check_rejects_a_placement_slower_than_float32(tmp_path):
    path = str(tmp_path / "run" / "placement.json")
    report = fast_convs_slow_steps(tmp_path, lambda c: 10.0 if len(c.float32_ops) == 3 else 12.0,
                                   decisions_file=path)
    plan = report.placement
    assert set(plan.float32_ops) == {"conv0", "conv1", "conv2"} and plan.low_ops == [] and report.ops_converted == 0
    assert plan.check.verdict == "float32"
    assert (plan.check.chosen_ms, plan.check.float32_ms, plan.check.static_ms) == (12.0, 10.0, 12.0)
    assert plan.float32_ops["conv1"] == ("kept float32 by the whole-step check: the chosen bfloat16 placement "
                                         "with 3 timed ops low 12.000 ms vs float32 10.000 ms: 20% slower")
    assert "whole-step check: float32 (" in report.summary()
    stored = json.load(open(path))
    assert stored["check"]["verdict"] == "float32" and stored["check"]["float32_ms"] == 10.0
    graph, loss = conv_chain(3)
    again = measured_rewrite(loss, tmp_path / "elsewhere", refuse, measure_steps=refuse_steps, decisions_file=path,
                             write_decisions=False)
    assert again.placement.check == plan.check and again.ops_converted == 0


def test_the_whole_step_check_falls_back_to_static_only_when_it_beats_float32(tmp_path):
    # The search keeps the tail low (its shortlist says 8 ms, noise 10%: too close to reuse); re-timed it is
    # 10.5 ms, static 9 ms, float32 10 ms.
    def ms_of(candidate):
        if candidate.float32_ops:
            return 10.0
        return (Timed(8.0, 0.1) if len(steps.asked) == 1 else 10.5) if candidate.tail_low else 9.0
    steps = FakeSteps(ms_of)
    graph, loss = conv_bias_scale_chain()
    report = measured_rewrite(loss, tmp_path, FakeMeasure({"Conv2D": OpTiming(4.0, 1.0)}, cast_ms=0.5),
                              measure_steps=steps)
    plan = report.placement
    assert len(steps.asked) == 3 and plan.check.verdict == "static", plan.check
    assert steps.asked[2] == [static_candidate(), all_float32_candidate({"conv"})], "static timed after the loss"
    assert plan.tail_low is False and plan.low_ops == ["conv"] and plan.float32_ops == {}
    assert "the static bfloat16 placement 9.000 ms vs float32 10.000 ms: a 11% win" in plan.check.reason


def test_a_region_that_cannot_be_copied_is_reported_as_not_checked(tmp_path):
    with pytest.warns(UserWarning, match="cannot time whole steps"):
        report = measured_rewrite(conv_then_while_loop(), tmp_path, FakeMeasure({"Conv2D": OpTiming(4.0, 1.0)}),
                                  measure_steps=refuse_steps)
    check = report.placement.check
    assert report.placement.low_ops == ["conv0", "conv1"] and check.verdict == "not checked"
    assert check.reason.startswith("the region cannot be copied (") and "inside control flow" in check.reason


_CHOSEN = Candidate(frozenset({"fc"}), found_as=("per op (+0%)",), reasons={"fc": "slower alone"})
_ALL_FLOAT32 = all_float32_candidate(("conv", "fc"))


def _judged(chosen_ms, float32_ms, static_ms, noise=0.0):
    asked = []

    def time_static():
        asked.append("static")
        return [Timed(static_ms), Timed(float32_ms)]

    batch = check_batch(_CHOSEN, _ALL_FLOAT32)
    kept, check = judge(batch, [Timed(chosen_ms, noise), Timed(float32_ms)], "bfloat16", NoiseRule(),
                        time_static)
    assert (asked == []) is (check.verdict == CheckVerdict.ACCEPTED), "static is timed only after the chosen lost"
    return kept, check


def test_each_verdict_keeps_its_placement_and_its_ops_reasons():
    kept, check = _judged(8.0, 10.0, 9.0)
    assert (kept, check.verdict) == (_CHOSEN, CheckVerdict.ACCEPTED) and kept.reasons == {"fc": "slower alone"}
    kept, check = _judged(10.5, 10.0, 9.0)
    assert (kept, check.verdict, kept.found_as) == (static_candidate(), "static", ("static", "whole-step check"))
    kept, check = _judged(10.5, 10.0, 9.99)
    assert (kept, check.verdict) == (_ALL_FLOAT32, CheckVerdict.FLOAT32)
    assert kept.reasons["fc"] == "slower alone", "an op the chosen placement kept float32 keeps its reason"
    assert kept.reasons["conv"].startswith("kept float32 by the whole-step check: the chosen bfloat16 placement "
                                           "with 1 timed ops low 10.500 ms")


def test_a_chosen_step_that_did_not_run_leaves_the_choice_unchecked():
    batch = check_batch(_CHOSEN, _ALL_FLOAT32)
    kept, check = judge(batch, [None, Timed(10.0)], "bfloat16", NoiseRule(), refuse_static)
    assert kept == _CHOSEN and check.verdict == CheckVerdict.NOT_CHECKED
    assert check.reason == "the chosen or the all-float32 step did not run; the search's choice stands unchecked"


def refuse_static():
    raise AssertionError("the static step should not be timed")


def test_a_chosen_placement_that_wins_is_checked_beside_float32_alone(tmp_path):
    # The tail-low twin wins the search and the check, by 25% against a measured noise of 10%: inside
    # four bounds, so the check times it again, beside float32 only.
    steps = FakeSteps(lambda c: Timed(10.0) if c.float32_ops else Timed(8.0 if c.tail_low else 9.0, 0.1))
    report = measured_rewrite(conv_bias_scale_chain()[1], tmp_path,
                              FakeMeasure({"Conv2D": OpTiming(4.0, 1.0)}, cast_ms=0.5), measure_steps=steps)
    plan = report.placement
    assert plan.check.verdict == "accepted" and plan.tail_low is True and len(steps.asked) == 2
    assert steps.asked[1] == [Candidate(frozenset(), tail_low=True), all_float32_candidate({"conv"})]
    assert (plan.check.chosen_ms, plan.check.float32_ms, plan.check.static_ms) == (8.0, 10.0, None)


def test_a_win_far_beyond_the_noise_in_the_search_is_not_timed_again(tmp_path):
    # Estimates too close to call, so the search times all float32 too: 5 vs 8 ms with a 2% noise, a 60%
    # win beyond four bounds (8%); the check reuses the search's rounds.
    def steps_with(noise):
        return FakeSteps(lambda c: Timed(5.0 + len(c.float32_ops), 0.0 if c.float32_ops else noise))
    steps = steps_with(0.02)
    report = measured_rewrite(conv_chain(3)[1], tmp_path, FakeMeasure(CLOSE_CALL), measure_steps=steps)
    check = report.placement.check
    assert len(steps.asked) == 1 and check.verdict == "accepted" and report.placement.float32_ops == {}
    assert (check.chosen_ms, check.float32_ms, check.static_ms) == (5.0, 8.0, 5.0)
    assert check.reason.endswith("a 60% win, beyond this machine's measured noise of 2.0%, in the search's rounds, "
                                 "by more than 4x that bound")
    # Within four bounds (a 20% noise: 80%) the same win is timed again.
    again = steps_with(0.2)
    measured_rewrite(conv_chain(3)[1], tmp_path / "again", FakeMeasure(CLOSE_CALL), measure_steps=again)
    assert len(again.asked) == 2


def test_verdicts_are_written_as_the_plain_strings_they_always_were():
    assert [verdict.value for verdict in CheckVerdict] == ["accepted", "static", "float32", "not checked"]
    _, check = _judged(8.0, 10.0, 9.0)
    assert json.dumps(check.as_json()).startswith('{"verdict": "accepted", "reason": "the chosen bfloat16')
    assert check.summary().startswith("whole-step check: accepted (the chosen bfloat16 placement")
