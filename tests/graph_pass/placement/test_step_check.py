"""The whole-step check (``step_check``): the chosen placement against all float32 and static, as
whole steps; one golden test per verdict's sentence.
"""

import json

import pytest

from slim_mp.graph_pass.placement import OpTiming

from .fakes import (FakeMeasure, refuse, refuse_steps, conv_chain, measured_rewrite, FakeSteps, conv_bias_chain,
                    conv_then_while_loop, fast_convs_slow_steps)


def test_the_whole_step_check_rejects_a_placement_slower_than_float32(tmp_path):
    path = str(tmp_path / "run" / "placement.json")
    report = fast_convs_slow_steps(tmp_path, lambda c: 10.0 if len(c.float32_ops) == 3 else 12.0,
                                   decisions_file=path)
    plan = report.placement
    assert set(plan.float32_ops) == {"conv0", "conv1", "conv2"} and plan.low_ops == [] and report.ops_converted == 0
    assert plan.check.verdict == "float32"
    assert (plan.check.chosen_ms, plan.check.float32_ms, plan.check.static_ms) == (12.0, 10.0, 12.0)
    assert plan.float32_ops["conv1"] == ("kept float32 by the whole-step check: the chosen bfloat16 placement "
                                         "with 3 allow ops low 12.000 ms vs float32 10.000 ms: 20% slower")
    assert "whole-step check: float32 (" in report.summary()
    stored = json.load(open(path))
    assert stored["check"]["verdict"] == "float32" and stored["check"]["float32_ms"] == 10.0
    graph, loss = conv_chain(3)
    again = measured_rewrite(loss, tmp_path / "elsewhere", refuse, measure_steps=refuse_steps, decisions_file=path,
                             write_decisions=False)
    assert again.placement.check == plan.check and again.ops_converted == 0


def test_the_whole_step_check_falls_back_to_static_only_when_it_beats_float32(tmp_path):
    # The search keeps the tail low (its shortlist says 8 ms); re-timed it is 10.5 ms, static 9 ms, float32 10 ms.
    def ms_of(candidate):
        if candidate.float32_ops:
            return 10.0
        return (8.0 if len(steps.asked) == 1 else 10.5) if candidate.tail_low else 9.0
    steps = FakeSteps(ms_of)
    graph, loss = conv_bias_chain()
    report = measured_rewrite(loss, tmp_path, FakeMeasure({"Conv2D": OpTiming(4.0, 1.0)}, cast_ms=0.5),
                              measure_steps=steps)
    plan = report.placement
    assert len(steps.asked) == 2 and plan.check.verdict == "static", plan.check
    assert plan.tail_low is False and plan.low_ops == ["conv"] and plan.float32_ops == {}
    assert "the static bfloat16 placement 9.000 ms vs float32 10.000 ms: a 11% win" in plan.check.reason


def test_a_region_that_cannot_be_copied_is_reported_as_not_checked(tmp_path):
    with pytest.warns(UserWarning, match="cannot time whole steps"):
        report = measured_rewrite(conv_then_while_loop(), tmp_path, FakeMeasure({"Conv2D": OpTiming(4.0, 1.0)}),
                                  measure_steps=refuse_steps)
    check = report.placement.check
    assert report.placement.low_ops == ["conv0", "conv1"] and check.verdict == "not checked"
    assert check.reason.startswith("the region cannot be copied (") and "inside control flow" in check.reason
