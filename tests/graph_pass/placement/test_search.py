"""The search (``search``): which candidates it finds, why each keeps its ops float32, which one wins.

Golden tests, one per sentence a user reads in the report: the per-op reason (alone, and with the
margin), the region reason, and the whole steps' reason. Timings are fakes: nothing depends on this
machine's speed.
"""

import pytest
import tensorflow as tf

from slim_mp.graph_pass.placement import OpTiming
from slim_mp.timing import Timed
from slim_mp.graph_pass.placement.search import choose_demoted, find_candidates, per_op_reason, per_op_slower
from slim_mp.graph_pass.rewrite import rewrite

from .fakes import (FakeMeasure, refuse, refuse_steps, conv_chain, measured_rewrite, FakeSteps, conv_bias_scale_chain,
                    op_dtype, CLOSE_CALL)


def test_op_slower_in_low_precision_stays_float32_with_the_measured_times(tmp_path):
    graph, loss = conv_chain()
    report = measured_rewrite(loss, tmp_path, FakeMeasure({"Conv2D": OpTiming(float32_ms=1.0, low_ms=2.5)}))
    assert report.ops_converted == 0
    (reason,) = [r for r, names in report.float32_ops.items() if "conv0" in names]
    assert reason == ("slower in bfloat16 on this device: 2.500 ms vs 1.000 ms in float32 "
                      "(forward + backward of this op alone)")
    assert not any(op.name.endswith("_bf16") for op in graph.get_operations())
    assert report.placement.float32_ops == {"conv0": reason}


def test_op_only_slightly_faster_in_low_precision_stays_float32(tmp_path):
    # 10% faster is within the 20% margin charged for untimed costs (batch norm, reorders ...).
    report = measured_rewrite(conv_chain()[1], tmp_path, FakeMeasure({"Conv2D": OpTiming(float32_ms=1.0, low_ms=0.9)}))
    assert list(report.placement.float32_ops) == ["conv0"]
    assert report.placement.float32_ops["conv0"].startswith("slower in bfloat16 on this device: 1.080 ms vs 1.000")


def test_expensive_casts_keep_a_region_float32_although_each_op_is_faster_alone(tmp_path):
    # Each conv saves 0.2 ms in low precision, but the casts around the region cost far more.
    graph, loss = conv_chain(num_convs=3)
    report = measured_rewrite(loss, tmp_path, FakeMeasure({"Conv2D": OpTiming(1.0, 0.8)}, cast_ms=5.0))
    assert report.ops_converted == 0
    reasons = report.placement.float32_ops
    assert set(reasons) == {"conv0", "conv1", "conv2"}
    assert all("for its low region of 3 timed ops, casts included" in r for r in reasons.values())


def test_no_cast_ping_pong_for_one_slightly_slower_op_inside_a_low_region():
    # conv1 alone is slower in low precision, but demoting it costs a cast pair on each side (2 ms each).
    graph, _ = conv_chain(num_convs=3)
    names = ["conv0", "conv1", "conv2"]
    ops = [graph.get_operation_by_name(name) for name in names]
    timings = dict(zip(ops, [OpTiming(4.0, 1.0), OpTiming(1.0, 1.2), OpTiming(4.0, 1.0)]))

    def estimate(demoted):
        compute = sum(t.float32_ms if op in demoted else t.low_ms for op, t in timings.items())
        borders = sum((a in demoted) != (b in demoted) for a, b in zip(ops, ops[1:]))
        return compute + 2.0 * borders

    assert choose_demoted(estimate, timings, [set(ops)], margin=0.2) == set()
    # Without the casts' cost the per-op answer wins: conv1 alone goes float32.
    assert choose_demoted(lambda d: estimate(d) - 2.0 * sum(
        (a in d) != (b in d) for a, b in zip(ops, ops[1:])), timings, [set(ops)], margin=0.2) == {ops[1]}


def test_timed_whole_steps_overrule_the_estimate(tmp_path):
    # The estimate prefers float32 for all three convs; the timed steps say low precision is faster.
    # The low steps' 60% win is beyond their 20% noise but not four times it: the check times again.
    graph, loss = conv_chain(num_convs=3)
    steps = FakeSteps(lambda candidate: Timed(5.0 + len(candidate.float32_ops), 0.0 if candidate.float32_ops else 0.2))
    report = measured_rewrite(loss, tmp_path, FakeMeasure(CLOSE_CALL), measure_steps=steps)
    assert report.placement.float32_ops == {}
    assert report.placement.low_ops == ["conv0", "conv1", "conv2"]
    assert op_dtype(graph, "conv1_bf16") == tf.bfloat16
    timed, checked = steps.asked
    assert {frozenset(c.float32_ops) for c in timed} >= {frozenset(), frozenset({"conv0", "conv1", "conv2"})}
    chosen = [c for c in report.to_dict()["placement"]["candidates"] if c["chosen"]]
    assert [(c["float32_ops"], c["step_ms"]) for c in chosen] == [(0, 5.0)]
    # The choice, re-timed beside all float32 (static is the same placement here), wins: 5 vs 8 ms.
    assert [frozenset(c.float32_ops) for c in checked] == [frozenset(), frozenset({"conv0", "conv1", "conv2"})]
    assert report.placement.check.verdict == "accepted"


def test_ops_kept_float32_by_timed_steps_give_both_step_times(tmp_path):
    graph, loss = conv_chain(num_convs=3)
    steps = FakeSteps(lambda candidate: 9.0 - len(candidate.float32_ops))
    report = measured_rewrite(loss, tmp_path, FakeMeasure(CLOSE_CALL), measure_steps=steps)
    reasons = report.placement.float32_ops
    assert set(reasons) == {"conv0", "conv1", "conv2"} and report.ops_converted == 0
    # The fastest step with conv1 in bfloat16 (none demoted: 9 ms) against the chosen one (6 ms).
    assert reasons["conv1"] == ("slower in bfloat16 on this device: bfloat16 9.000 ms vs float32 6.000 ms: 50% "
                                "slower (whole training steps timed side by side; this op alone 0.900 vs 1.000 ms)")
    assert report.placement.check is None, "all float32 lowers nothing: there is nothing to check"


def _three_close_convs(tmp_path, ms_of):
    """Three convs the estimates disagree on (``CLOSE_CALL``), whole steps timed by ``ms_of``: (report, reasons)."""
    report = measured_rewrite(conv_chain(3)[1], tmp_path, FakeMeasure(CLOSE_CALL), measure_steps=FakeSteps(ms_of))
    return report, report.placement.float32_ops


@pytest.mark.parametrize("low_ms, expected_float32", [(9.95, 3), (9.8, 0)])
def test_low_precision_must_beat_the_float32_step_by_one_percent(tmp_path, low_ms, expected_float32):
    _, reasons = _three_close_convs(tmp_path, lambda candidate: 10.0 if len(candidate.float32_ops) == 3 else low_ms)
    assert len(reasons) == expected_float32
    if expected_float32:
        assert reasons["conv1"].startswith("not worth bfloat16 on this device: bfloat16 9.950 ms vs float32 "
                                           "10.000 ms: a 0.5% win is inside the 1.0% noise floor")


def test_candidates_within_one_percent_are_not_timed(tmp_path):
    # 1.0 vs 0.999 ms: every placement estimates the same to 0.1%, below what a timing can tell apart.
    # The casts tip the estimate to all float32, which lowers nothing: no whole-step check either.
    report = measured_rewrite(conv_chain(3)[1], tmp_path, FakeMeasure({"Conv2D": OpTiming(1.0, 1.0 / 1.2 - 0.001)}),
                              measure_steps=refuse_steps)
    assert all(c.step_ms is None for c in report.placement.candidates)
    assert report.placement.check is None and report.ops_converted == 0


@pytest.mark.parametrize("noise, expected_float32", [(0.07, 3), (0.03, 0)])
def test_a_win_inside_the_measured_noise_keeps_float32_and_says_so(tmp_path, noise, expected_float32):
    # Low precision is 5.3% faster (9.5 vs 10 ms): inside a measured noise of 7%, beyond one of 3%.
    report, reasons = _three_close_convs(
        tmp_path, lambda candidate: Timed(10.0) if len(candidate.float32_ops) == 3 else Timed(9.5, noise))
    assert len(reasons) == expected_float32
    if expected_float32:
        assert reasons["conv1"].startswith("not worth bfloat16 on this device: bfloat16 9.500 ms vs float32 "
                                           "10.000 ms: a 5.3% win is inside this machine's measured noise of 7.0%")
        assert report.placement.check is None
    else:
        assert report.placement.check.verdict == "accepted"
        assert "a 5.3% win, beyond this machine's measured noise of 3.0%" in report.placement.check.reason


def test_the_tail_kept_low_when_its_step_is_faster(tmp_path):
    graph, loss = conv_bias_scale_chain()
    fast_conv = FakeMeasure({"Conv2D": OpTiming(4.0, 1.0)}, cast_ms=0.5)
    with graph.as_default():
        static = rewrite(loss, "bfloat16", device_type="CPU", placement="static", dry_run=True)
    assert "scale" in {name for names in static.float32_ops.values() for name in names}, \
        "precondition: the static pass runs the scale after the conv and its bias add in float32 (fewer casts)"
    steps = FakeSteps(lambda candidate: 1.0 if candidate.tail_low else 2.0)
    path = str(tmp_path / "run" / "placement.json")
    report = measured_rewrite(loss, tmp_path, fast_conv, measure_steps=steps, decisions_file=path)
    assert report.placement.tail_low is True
    assert op_dtype(graph, "scale_bf16") == tf.bfloat16
    assert any(c.tail_low for c in steps.asked[0]) and any(not c.tail_low for c in steps.asked[0])
    # A resumed run (or a worker) keeps the tail low from the decisions file alone.
    again, again_loss = conv_bias_scale_chain()
    measured_rewrite(again_loss, tmp_path / "elsewhere", refuse, measure_steps=refuse_steps, decisions_file=path,
                     write_decisions=False)
    assert op_dtype(again, "scale_bf16") == tf.bfloat16


class _TableEstimate:
    """An estimator by table (float32 set -> ms, ``default`` otherwise) with the timings and margin it charges."""

    def __init__(self, timings, margin, table, default):
        self.timings, self.margin, self.table, self.default = timings, margin, table, default
        self.training = True

    def allow_timings(self):
        return self.timings

    def __call__(self, candidate):
        return self.table.get(candidate.float32_ops, self.default)


def test_a_candidate_found_without_the_margin_gives_no_op_the_margins_reason():
    # x is slower in bfloat16 only once charged the 20% margin; without it, flipping the low region {x, y}
    # to float32 wins on the estimate (its casts): the "estimated best (+0%)" candidate alone keeps x and y.
    timings = {"x": OpTiming(1.0, 0.9), "y": OpTiming(1.0, 0.5), "z": OpTiming(1.0, 0.3)}
    unmargined = _TableEstimate(timings, 0.0, {frozenset(): 10.0, frozenset("xy"): 9.0}, 11.0)
    margined = _TableEstimate(timings, 0.2, {frozenset(): 11.0, frozenset("x"): 10.5, frozenset("xy"): 10.8}, 12.0)
    found = find_candidates([unmargined, margined], [frozenset("xy"), frozenset("z")], "bfloat16")
    (region_flip,) = [c for c in found if c.float32_ops == frozenset("xy")]
    assert region_flip.found_as == ("estimated best (+0%)",)
    assert region_flip.reasons["x"] == ("slower in bfloat16 on this device: 10.000 ms vs 9.000 ms in float32 for its "
                                        "low region of 2 timed ops, casts included (this op alone 0.900 vs 1.000 ms)")
    (per_op,) = [c for c in found if c.float32_ops == frozenset("x")]
    assert per_op.found_as == ("per op (+20%)", "estimated best (+20%)")
    assert per_op.reasons["x"] == ("slower in bfloat16 on this device: 1.080 ms vs 1.000 ms in float32 (forward + "
                                   "backward; measured 0.900 ms + 20% for untimed costs)")


def test_the_per_op_rule_is_the_ops_slower_low_once_charged_the_margin():
    timings = {"slow": OpTiming(1.0, 1.2), "close": OpTiming(1.0, 0.9), "fast": OpTiming(1.0, 0.5)}
    assert per_op_slower(timings, 0.0) == {"slow"}
    assert per_op_slower(timings, 0.2) == {"slow", "close"}
    assert per_op_reason(timings["slow"], 0.2, "bfloat16") == (
        "slower in bfloat16 on this device: 1.200 ms vs 1.000 ms in float32 (forward + backward of this op alone)")
    assert per_op_reason(timings["close"], 0.2, "bfloat16", training=False) == (
        "slower in bfloat16 on this device: 1.080 ms vs 1.000 ms in float32 (forward; measured 0.900 ms + 20% for "
        "untimed costs)")


def test_an_inference_placement_says_it_timed_forward_steps(tmp_path):
    from slim_mp.graph_pass.placement import MeasuringTarget

    report = measured_rewrite(conv_chain()[1], tmp_path, FakeMeasure({"Conv2D": OpTiming(1.0, 3.0)}),
                              target=MeasuringTarget(training=False))
    assert report.placement.timed_step == "forward"
    assert report.placement.float32_ops["conv0"].endswith("(forward of this op alone)")
    assert "timed: forward steps" in report.summary()


def test_the_shortlist_gives_only_the_best_estimate_its_tail_twin(tmp_path):
    from slim_mp.graph_pass.placement import PlacementTuning
    from slim_mp.graph_pass.placement.candidate import Candidate
    from slim_mp.graph_pass.placement.search import shortlist

    class PaintsTailApart:
        """An estimate under which every tail twin paints differently from its candidate."""

        def painted(self, candidate):
            return 0.0, frozenset({"tail"}) if candidate.tail_low else frozenset()

        def __call__(self, candidate):
            return 1.0

    estimates = [((), 10.0), (("a",), 11.0), (("b",), 12.0), (("c",), 12.5), (("d",), 30.0)]
    close = [Candidate(frozenset(names), estimated_ms=ms) for names, ms in estimates]
    listed = shortlist(close, PaintsTailApart(), PlacementTuning(verify_window=0.35, max_timed_candidates=4))
    assert [(sorted(c.float32_ops), c.tail_low) for c in listed] == [([], False), ([], True), (["a"], False),
                                                                     (["b"], False)]


def _residual_net():
    """conv0 -> relu -> conv1, added back to conv0's output -> relu -> conv2 -> mean square."""
    graph = tf.Graph()
    with graph.as_default():
        net = tf.compat.v1.placeholder(tf.float32, [2, 8, 8, 4], name="images")
        weights = [tf.compat.v1.get_variable(f"w{index}", [3, 3, 4, 4]) for index in range(3)]
        first = tf.nn.conv2d(net, weights[0], 1, "SAME", name="conv0")
        branch = tf.nn.conv2d(tf.nn.relu(first, name="relu0"), weights[1], 1, "SAME", name="conv1")
        joined = tf.nn.relu(tf.add(branch, first, name="residual_add"), name="residual_relu")
        loss = tf.reduce_mean(tf.square(tf.nn.conv2d(joined, weights[2], 1, "SAME", name="conv2")))
    return graph, loss


def test_an_element_wise_island_slower_low_runs_float32_between_low_convolutions_when_casts_are_cheap(tmp_path):
    timings = {"Conv2D": OpTiming(5.0, 1.0), "AddV2": OpTiming(1.0, 10.0), "Relu": OpTiming(1.0, 10.0)}
    report = measured_rewrite(_residual_net()[1], tmp_path, FakeMeasure(timings, cast_ms=0.001), time_followers=True)
    float32 = set(report.placement.float32_ops)
    assert {"conv0", "conv1", "conv2"}.isdisjoint(float32), "the convolutions stay low"
    assert {"residual_add", "residual_relu", "relu0"} <= float32
    assert "casts included" in report.placement.float32_ops["residual_add"], "its island's, not its own alone"


def test_an_element_wise_island_stays_low_when_its_casts_cost_more_than_it_saves(tmp_path):
    # Float32 saves 0.2 ms an op (0.44 with the 20% margin); each island needs two or three cast pairs of 0.5 ms.
    timings = {"Conv2D": OpTiming(5.0, 1.0), "AddV2": OpTiming(1.0, 1.2), "Relu": OpTiming(1.0, 1.2)}
    report = measured_rewrite(_residual_net()[1], tmp_path, FakeMeasure(timings, cast_ms=0.5), time_followers=True)
    assert not set(report.placement.float32_ops), report.placement.float32_ops
    assert {"residual_add", "residual_relu"} <= set(report.placement.low_ops), "timed, and kept low"


def test_by_default_only_the_allow_ops_are_timed(tmp_path):
    measure = FakeMeasure({"Conv2D": OpTiming(5.0, 1.0), "AddV2": OpTiming(1.0, 10.0), "Relu": OpTiming(1.0, 10.0)})
    report = measured_rewrite(_residual_net()[1], tmp_path, measure)
    assert {s.op_type for s in measure.asked} == {"Conv2D", "Cast"}
    assert not report.placement.float32_ops


def test_follower_islands_are_the_connected_low_ops_between_the_allow_ops():
    from slim_mp.graph_pass.placement.estimate import follower_islands, low_regions
    from slim_mp.graph_pass.region import select_region

    graph, loss = _residual_net()
    with graph.as_default():
        region = select_region(loss)
    low = {"conv0", "relu0", "conv1", "residual_add", "residual_relu", "conv2"}
    timed = low | {"Square"}
    assert low_regions(region, low, timed) == [frozenset(low)]
    assert follower_islands(region, {"relu0", "residual_add", "residual_relu"}, timed) == [
        frozenset({"relu0"}), frozenset({"residual_add", "residual_relu"})]


@pytest.mark.parametrize("training", [False, True])
def test_a_forward_search_times_the_static_placement_beside_its_choice_a_training_one_does_not(tmp_path, training):
    from slim_mp.graph_pass.placement import MeasuringTarget

    # Each conv 3x slower low alone, so the estimate keeps all three float32; whole steps say all low is faster.
    steps = FakeSteps(lambda candidate: 8.0 if candidate.float32_ops else 5.0)
    report = measured_rewrite(conv_chain(num_convs=3)[1], tmp_path, FakeMeasure({"Conv2D": OpTiming(1.0, 3.0)}),
                              measure_steps=steps, target=MeasuringTarget(training=training))
    static_timed = any(not candidate.float32_ops for batch in steps.asked for candidate in batch)
    assert static_timed is not training
    assert report.placement.low_ops == ([] if training else ["conv0", "conv1", "conv2"])
