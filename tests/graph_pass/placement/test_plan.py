"""The decision as the rest of slim_mp sees it (``plan``): an emulated precision is painted statically,
and the report says why; the plan's JSON marks the chosen candidate.
"""

import pytest
import tensorflow as tf

from slim_mp.graph_pass.placement import Candidate, PlacementPlan
from slim_mp.graph_pass.rewrite import rewrite

from .fakes import conv_chain, op_dtype, placement_options, refuse, refuse_steps


def test_float16_on_a_cpu_is_painted_statically_and_the_report_says_why(tmp_path):
    # float16 is emulated on CPUs: timing would keep everything float32 and hide float16's numerics.
    graph, loss = conv_chain()
    with graph.as_default():
        with pytest.warns(UserWarning, match="float16 kernels on CPU are emulated"):
            report = rewrite(loss, "float16", device_type="CPU", placement="measured",
                             placement_options=placement_options(cache_dir=str(tmp_path), measure=refuse,
                                                                measure_steps=refuse_steps))
    assert op_dtype(graph, "conv0_fp16") == tf.float16
    assert report.placement.timed is False and report.placement.float32_ops == {}
    assert "static painting, not timed: float16 kernels on CPU are emulated" in report.summary()


def test_the_plans_json_marks_the_chosen_candidate_and_rounds_its_times():
    chosen = Candidate(frozenset({"conv0"}), found_as=("per op (+0%)",), estimated_ms=1.23456)
    plan = PlacementPlan(float32_ops={"conv0": "slower alone"}, low_ops=["conv1"],
                         candidates=[chosen, Candidate(frozenset(), found_as=("static",), estimated_ms=2.0)])
    content = plan.as_json()
    assert [(c["found_as"], c["chosen"], c["estimated_ms"]) for c in content["candidates"]] == [
        ("per op (+0%)", True, 1.235), ("static", False, 2.0)]
    assert plan.chosen().reasons == {"conv0": "slower alone"} and content["source"] == "measured"
    assert content["check"] is None
