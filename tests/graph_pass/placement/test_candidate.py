"""Candidates (``candidate``): the two reference placements, the lowered set, and applying one to the painting."""

import tensorflow as tf

from slim_mp.graph_pass.op_classes import default_classes
from slim_mp.graph_pass.paint import PaintConfig
from slim_mp.graph_pass.placement import Candidate, apply_placement
from slim_mp.graph_pass.placement.candidate import UNDECIDED, all_float32_candidate, lowered_ops, static_candidate

TIMED = ("conv0", "conv1", "fc")


def test_the_references_paint_as_nothing_and_everything_float32_whatever_their_labels():
    assert static_candidate() == Candidate(frozenset()) and static_candidate().found_as == ("static",)
    assert all_float32_candidate(TIMED) == Candidate(frozenset(TIMED))
    assert all_float32_candidate(TIMED) != Candidate(frozenset(TIMED), tail_low=True), "the tail paints differently"


def test_lowered_ops_are_the_timed_ops_a_candidate_does_not_keep_float32():
    assert lowered_ops(Candidate(frozenset({"fc"})), TIMED) == {"conv0", "conv1"}
    assert lowered_ops(all_float32_candidate(TIMED), TIMED) == frozenset(), "all float32 lowers nothing"
    assert lowered_ops(static_candidate(), TIMED) == set(TIMED)


def test_applying_a_candidate_fixes_its_ops_float32_with_their_reasons_and_its_tail_choice():
    config = PaintConfig(tf.bfloat16, default_classes(tf.bfloat16), [], "CPU", fixed_float32={"other": "user's"})
    candidate = Candidate(frozenset({"conv0", "fc"}), tail_low=True, reasons={"conv0": "slower alone"})
    applied = apply_placement(config, candidate)
    assert applied.fixed_float32 == {"other": "user's", "conv0": "slower alone", "fc": UNDECIDED}
    assert applied.demote_tail is False
    assert apply_placement(config, static_candidate()).demote_tail is True
    assert config.fixed_float32 == {"other": "user's"}, "the caller's config is left alone"
