"""Measured placement: the decision logic with injected (fake) timings, the cache and the decisions file.

No test here depends on this machine's speed: timings come from a fake ``measure``; the one real
micro-benchmark test checks only that the benchmark graph builds and runs.
"""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from slim_mp.graph_pass import placement
from slim_mp.graph_pass.placement import (OpSignature, OpTiming, PlacementOptions, Timed, stopwatch, target,
                                          timed_steps, timing_cache)
from slim_mp.graph_pass.placement.target import MeasuringTarget
from slim_mp.graph_pass.placement.estimate import fit_cast_model
from slim_mp.graph_pass.placement.micro_benchmark import micro_benchmark
from slim_mp.graph_pass.placement.search import choose_demoted
from slim_mp.graph_pass.placement.signatures import cast_signature, op_signature
from slim_mp.graph_pass.rewrite import rewrite

tf1 = tf.compat.v1


class FakeMeasure:
    """Timings by op type (and for casts), recording every signature it is asked for."""

    def __init__(self, by_type, cast_ms=0.001):
        self.by_type = by_type
        self.cast_ms = cast_ms
        self.asked = []

    def __call__(self, signatures, precision):
        self.asked.extend(signatures)
        result = {}
        for signature in signatures:
            if signature.op_type == "Cast":
                result[signature] = OpTiming(0.0, self.cast_ms)
            else:
                result[signature] = self.by_type[signature.op_type]
        return result


def _refuse(signatures, precision):
    raise AssertionError(f"measured {signatures} although the timings should come from the cache or the file")


def _refuse_steps(candidates, reference):
    raise AssertionError(f"timed {candidates} although no step should be timed")


def _conv_chain(num_convs=1, channels=4):
    """A graph: fixed-shape input -> ``num_convs`` conv+relu layers -> mean loss; returns (graph, loss)."""
    graph = tf.Graph()
    with graph.as_default():
        net = tf1.placeholder(tf.float32, [2, 8, 8, channels], name="images")
        for index in range(num_convs):
            weights = tf1.get_variable(f"w{index}", [3, 3, channels, channels])
            net = tf.nn.relu(tf.nn.conv2d(net, weights, strides=1, padding="SAME", name=f"conv{index}"))
        loss = tf.reduce_mean(tf.square(net))
    return graph, loss


def _rewrite(loss, tmp_path, measure, **options):
    """The measured rewrite with fake op timings; whole steps are not timed unless ``measure_steps`` is given."""
    options.setdefault("time_steps", "measure_steps" in options)
    with loss.graph.as_default():
        return rewrite(loss, "bfloat16", device_type="CPU", placement="measured",
                       placement_options=PlacementOptions(cache_dir=str(tmp_path / "cache"), measure=measure,
                                                          **options))


class FakeSteps:
    """Whole-step timings from a function of the candidate (milliseconds, or a ``Timed`` with its noise),
    recording every batch it is asked for: the search's, then the whole-step check's."""

    def __init__(self, ms_of):
        self.ms_of = ms_of
        self.asked = []

    def __call__(self, candidates, reference):
        self.asked.append(list(candidates))
        values = [self.ms_of(candidate) for candidate in candidates]
        return [value if isinstance(value, Timed) else Timed(value) for value in values]


def _conv_bias_chain():
    """input -> conv -> bias add -> exp (deny) -> loss: the bias add is the tail after the last allow op."""
    graph = tf.Graph()
    with graph.as_default():
        images = tf1.placeholder(tf.float32, [2, 8, 8, 4], name="images")
        weights = tf1.get_variable("w", [3, 3, 4, 4])
        net = tf.nn.conv2d(images, weights, strides=1, padding="SAME", name="conv")
        net = tf.nn.bias_add(net, tf1.get_variable("b", [4]), name="bias")
        loss = tf.reduce_mean(tf.exp(net))
    return graph, loss


def _op_dtype(graph, name):
    return graph.get_operation_by_name(name).outputs[0].dtype


def test_op_slower_in_low_precision_stays_float32_with_the_measured_times(tmp_path):
    graph, loss = _conv_chain()
    report = _rewrite(loss, tmp_path, FakeMeasure({"Conv2D": OpTiming(float32_ms=1.0, low_ms=2.5)}))
    assert report.ops_converted == 0
    (reason,) = [r for r, names in report.float32_ops.items() if "conv0" in names]
    assert reason == ("slower in bfloat16 on this device: 2.500 ms vs 1.000 ms in float32 "
                      "(forward + backward of this op alone)")
    assert not any(op.name.endswith("_bf16") for op in graph.get_operations())
    assert report.placement.float32_ops == {"conv0": reason}


def test_op_faster_in_low_precision_is_converted(tmp_path):
    graph, loss = _conv_chain()
    report = _rewrite(loss, tmp_path, FakeMeasure({"Conv2D": OpTiming(float32_ms=4.0, low_ms=1.0)}))
    assert _op_dtype(graph, "conv0_bf16") == tf.bfloat16
    assert report.placement.float32_ops == {}
    assert report.placement.low_ops == ["conv0"]


def test_op_only_slightly_faster_in_low_precision_stays_float32(tmp_path):
    # 10% faster is within the 20% margin charged for untimed costs (batch norm, reorders ...).
    report = _rewrite(_conv_chain()[1], tmp_path, FakeMeasure({"Conv2D": OpTiming(float32_ms=1.0, low_ms=0.9)}))
    assert list(report.placement.float32_ops) == ["conv0"]
    assert report.placement.float32_ops["conv0"].startswith("slower in bfloat16 on this device: 1.080 ms vs 1.000")


def test_signature_carries_real_shapes_and_attributes(tmp_path):
    graph, loss = _conv_chain(channels=5)
    measure = FakeMeasure({"Conv2D": OpTiming(4.0, 1.0)})
    _rewrite(loss, tmp_path, measure)
    (conv,) = [s for s in measure.asked if s.op_type == "Conv2D"]
    assert conv.input_shapes == ((2, 8, 8, 5), (3, 3, 5, 5))
    attrs = dict(conv.attrs)
    assert attrs["padding"] == "SAME" and attrs["data_format"] == "NHWC" and attrs["strides"] == (1, 1, 1, 1)


def test_expensive_casts_keep_a_region_float32_although_each_op_is_faster_alone(tmp_path):
    # Each conv saves 0.2 ms in low precision, but the casts around the region cost far more.
    graph, loss = _conv_chain(num_convs=3)
    report = _rewrite(loss, tmp_path, FakeMeasure({"Conv2D": OpTiming(1.0, 0.8)}, cast_ms=5.0))
    assert report.ops_converted == 0
    reasons = report.placement.float32_ops
    assert set(reasons) == {"conv0", "conv1", "conv2"}
    assert all("for its low region of 3 allow ops, casts included" in r for r in reasons.values())


def test_no_cast_ping_pong_for_one_slightly_slower_op_inside_a_low_region():
    # conv1 alone is slower in low precision, but demoting it costs a cast pair on each side (2 ms each).
    graph, _ = _conv_chain(num_convs=3)
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


# Conv timings whose estimates disagree: +20% margin says float32 (1.08 vs 1.0), no margin says low.
_CLOSE_CALL = {"Conv2D": OpTiming(float32_ms=1.0, low_ms=0.9)}


def test_timed_whole_steps_overrule_the_estimate(tmp_path):
    # The estimate prefers float32 for all three convs; the timed steps say low precision is faster.
    graph, loss = _conv_chain(num_convs=3)
    steps = FakeSteps(lambda candidate: 5.0 + len(candidate.float32_ops))
    report = _rewrite(loss, tmp_path, FakeMeasure(_CLOSE_CALL), measure_steps=steps)
    assert report.placement.float32_ops == {}
    assert report.placement.low_ops == ["conv0", "conv1", "conv2"]
    assert _op_dtype(graph, "conv1_bf16") == tf.bfloat16
    timed, checked = steps.asked
    assert {frozenset(c.float32_ops) for c in timed} >= {frozenset(), frozenset({"conv0", "conv1", "conv2"})}
    chosen = [c for c in report.to_dict()["placement"]["candidates"] if c["chosen"]]
    assert [(c["float32_ops"], c["step_ms"]) for c in chosen] == [(0, 5.0)]
    # The choice, re-timed beside all float32 (and static, the same placement here), wins: 5 vs 8 ms.
    assert [frozenset(c.float32_ops) for c in checked] == [frozenset(), frozenset({"conv0", "conv1", "conv2"})]
    assert report.placement.check.verdict == "accepted"


def test_ops_kept_float32_by_timed_steps_give_both_step_times(tmp_path):
    graph, loss = _conv_chain(num_convs=3)
    steps = FakeSteps(lambda candidate: 9.0 - len(candidate.float32_ops))
    report = _rewrite(loss, tmp_path, FakeMeasure(_CLOSE_CALL), measure_steps=steps)
    reasons = report.placement.float32_ops
    assert set(reasons) == {"conv0", "conv1", "conv2"} and report.ops_converted == 0
    # The fastest step with conv1 in bfloat16 (none demoted: 9 ms) against the chosen one (6 ms).
    assert reasons["conv1"] == ("slower in bfloat16 on this device: bfloat16 9.000 ms vs float32 6.000 ms: 50% "
                                "slower (whole training steps timed side by side; this op alone 0.900 vs 1.000 ms)")
    assert report.placement.check is None, "all float32 lowers nothing: there is nothing to check"


@pytest.mark.parametrize("low_ms, expected_float32", [(9.95, 3), (9.8, 0)])
def test_low_precision_must_beat_the_float32_step_by_one_percent(tmp_path, low_ms, expected_float32):
    steps = FakeSteps(lambda candidate: 10.0 if len(candidate.float32_ops) == 3 else low_ms)
    report = _rewrite(_conv_chain(3)[1], tmp_path, FakeMeasure(_CLOSE_CALL), measure_steps=steps)
    reasons = report.placement.float32_ops
    assert len(reasons) == expected_float32
    if expected_float32:
        assert reasons["conv1"].startswith("not worth bfloat16 on this device: bfloat16 9.950 ms vs float32 "
                                           "10.000 ms: a 0.5% win is inside the 1.0% noise floor")


def test_timed_steps_are_cached(tmp_path):
    steps = FakeSteps(lambda candidate: 9.0 - len(candidate.float32_ops))
    first = _rewrite(_conv_chain(3)[1], tmp_path, FakeMeasure(_CLOSE_CALL), measure_steps=steps)
    again = _rewrite(_conv_chain(3)[1], tmp_path, _refuse, measure_steps=_refuse_steps)
    assert len(steps.asked) == 1
    assert again.placement.float32_ops == first.placement.float32_ops


def test_candidates_within_one_percent_are_not_timed(tmp_path):
    # 1.0 vs 0.999 ms: every placement estimates the same to 0.1%, below what a timing can tell apart.
    # The casts tip the estimate to all float32, which lowers nothing: no whole-step check either.
    report = _rewrite(_conv_chain(3)[1], tmp_path, FakeMeasure({"Conv2D": OpTiming(1.0, 1.0 / 1.2 - 0.001)}),
                      measure_steps=_refuse_steps)
    assert all(c.step_ms is None for c in report.placement.candidates)
    assert report.placement.check is None and report.ops_converted == 0


@pytest.mark.parametrize("noise, expected_float32", [(0.07, 3), (0.03, 0)])
def test_a_win_inside_the_measured_noise_keeps_float32_and_says_so(tmp_path, noise, expected_float32):
    # Low precision is 5.3% faster (9.5 vs 10 ms): inside a measured noise of 7%, beyond one of 3%.
    steps = FakeSteps(lambda candidate: Timed(10.0) if len(candidate.float32_ops) == 3 else Timed(9.5, noise))
    report = _rewrite(_conv_chain(3)[1], tmp_path, FakeMeasure(_CLOSE_CALL), measure_steps=steps)
    reasons = report.placement.float32_ops
    assert len(reasons) == expected_float32
    if expected_float32:
        assert reasons["conv1"].startswith("not worth bfloat16 on this device: bfloat16 9.500 ms vs float32 "
                                           "10.000 ms: a 5.3% win is inside this machine's measured noise of 7.0%")
        assert report.placement.check is None
    else:
        assert report.placement.check.verdict == "accepted"
        assert "a 5.3% win, beyond this machine's measured noise of 3.0%" in report.placement.check.reason


def _fast_convs_slow_steps(tmp_path, ms_of, **options):
    """Convs 4x faster alone (the search lowers them), whole steps timed by ``ms_of``: the rewrite's report."""
    return _rewrite(_conv_chain(3)[1], tmp_path, FakeMeasure({"Conv2D": OpTiming(4.0, 1.0)}),
                    measure_steps=FakeSteps(ms_of), **options)


def test_the_whole_step_check_rejects_a_placement_slower_than_float32(tmp_path):
    path = str(tmp_path / "run" / "placement.json")
    report = _fast_convs_slow_steps(tmp_path, lambda c: 10.0 if len(c.float32_ops) == 3 else 12.0,
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
    graph, loss = _conv_chain(3)
    again = _rewrite(loss, tmp_path / "elsewhere", _refuse, measure_steps=_refuse_steps, decisions_file=path,
                     write_decisions=False)
    assert again.placement.check == plan.check and again.ops_converted == 0


def test_the_whole_step_check_falls_back_to_static_only_when_it_beats_float32(tmp_path):
    # The search keeps the tail low (its shortlist says 8 ms); re-timed it is 10.5 ms, static 9 ms, float32 10 ms.
    def ms_of(candidate):
        if candidate.float32_ops:
            return 10.0
        return (8.0 if len(steps.asked) == 1 else 10.5) if candidate.tail_low else 9.0
    steps = FakeSteps(ms_of)
    graph, loss = _conv_bias_chain()
    report = _rewrite(loss, tmp_path, FakeMeasure({"Conv2D": OpTiming(4.0, 1.0)}, cast_ms=0.5), measure_steps=steps)
    plan = report.placement
    assert len(steps.asked) == 2 and plan.check.verdict == "static", plan.check
    assert plan.tail_low is False and plan.low_ops == ["conv"] and plan.float32_ops == {}
    assert "the static bfloat16 placement 9.000 ms vs float32 10.000 ms: a 11% win" in plan.check.reason


def _conv_then_while_loop():
    """Two convs, then a TF1 while loop: a region the whole-step copies cannot stand for. Returns the loss."""
    graph = tf.Graph()
    with graph.as_default():
        images = tf1.placeholder(tf.float32, [2, 8, 8, 4])
        weights = tf1.get_variable("w", [3, 3, 4, 4])
        net = tf.nn.conv2d(images, weights, strides=1, padding="SAME", name="conv0")
        net = tf.nn.conv2d(net, weights, strides=1, padding="SAME", name="conv1")
        _, net = tf.while_loop(lambda i, x: i < 2, lambda i, x: (i + 1, x * 0.5), [0, net])
        return tf.reduce_mean(net)


def test_a_region_that_cannot_be_copied_is_reported_as_not_checked(tmp_path):
    with pytest.warns(UserWarning, match="cannot time whole steps"):
        report = _rewrite(_conv_then_while_loop(), tmp_path, FakeMeasure({"Conv2D": OpTiming(4.0, 1.0)}),
                          measure_steps=_refuse_steps)
    check = report.placement.check
    assert report.placement.low_ops == ["conv0", "conv1"] and check.verdict == "not checked"
    assert check.reason.startswith("the region cannot be copied (") and "inside control flow" in check.reason


def test_the_tail_kept_low_when_its_step_is_faster(tmp_path):
    graph, loss = _conv_bias_chain()
    fast_conv = FakeMeasure({"Conv2D": OpTiming(4.0, 1.0)}, cast_ms=0.5)
    with graph.as_default():
        static = rewrite(loss, "bfloat16", device_type="CPU", placement="static", dry_run=True)
    assert "bias" in {name for names in static.float32_ops.values() for name in names}, \
        "precondition: the static pass runs the bias add after the conv in float32 (fewer casts)"
    steps = FakeSteps(lambda candidate: 1.0 if candidate.tail_low else 2.0)
    path = str(tmp_path / "run" / "placement.json")
    report = _rewrite(loss, tmp_path, fast_conv, measure_steps=steps, decisions_file=path)
    assert report.placement.tail_low is True
    assert _op_dtype(graph, "bias_bf16") == tf.bfloat16
    assert any(c.tail_low for c in steps.asked[0]) and any(not c.tail_low for c in steps.asked[0])
    # A resumed run (or a worker) keeps the tail low from the decisions file alone.
    again, again_loss = _conv_bias_chain()
    _rewrite(again_loss, tmp_path / "elsewhere", _refuse, measure_steps=_refuse_steps, decisions_file=path,
             write_decisions=False)
    assert _op_dtype(again, "bias_bf16") == tf.bfloat16


def test_a_region_that_cannot_be_copied_falls_back_to_the_estimate_with_a_warning(tmp_path):
    with pytest.warns(UserWarning, match="cannot time whole steps"):
        report = _rewrite(_conv_then_while_loop(), tmp_path, FakeMeasure(_CLOSE_CALL), measure_steps=_refuse_steps)
    assert set(report.placement.float32_ops) == {"conv0", "conv1"}, "the +20% estimate decides"


def test_cache_hit_measures_nothing(tmp_path):
    measure = FakeMeasure({"Conv2D": OpTiming(1.0, 3.0)})
    _rewrite(_conv_chain()[1], tmp_path, measure)
    assert measure.asked
    cached = os.listdir(tmp_path / "cache")
    assert len(cached) == 1 and cached[0].endswith(".json")
    report = _rewrite(_conv_chain()[1], tmp_path, _refuse)
    assert set(report.placement.float32_ops) == {"conv0"}
    assert report.placement.cached_signatures == 3 and report.placement.measured_signatures == 0


def test_cache_is_keyed_by_device_and_tensorflow_version(tmp_path, monkeypatch):
    _rewrite(_conv_chain()[1], tmp_path, FakeMeasure({"Conv2D": OpTiming(1.0, 3.0)}))
    other = target.detect_device().__class__("CPU", "another CPU model")
    monkeypatch.setattr(target, "detect_device", lambda: other)
    measure = FakeMeasure({"Conv2D": OpTiming(1.0, 3.0)})
    _rewrite(_conv_chain()[1], tmp_path, measure)
    assert measure.asked, "another device must not reuse this device's timings"
    (stored,) = [json.load(open(tmp_path / "cache" / n)) for n in os.listdir(tmp_path / "cache")
                 if "another CPU model" in open(tmp_path / "cache" / n).read()]
    assert stored["tensorflow"] == tf.__version__


def test_decisions_file_is_written_then_reused_without_measuring(tmp_path):
    path = str(tmp_path / "run" / "placement.json")
    first = _rewrite(_conv_chain(2)[1], tmp_path, FakeMeasure({"Conv2D": OpTiming(1.0, 3.0)}), decisions_file=path)
    stored = json.load(open(path))
    assert set(stored["float32_ops"]) == {"conv0", "conv1"} and stored["precision"] == "bfloat16"
    # A resumed run (or a worker) with an empty cache reads the file and builds the same graph.
    (tmp_path / "cache").rename(tmp_path / "old_cache")
    graph, loss = _conv_chain(2)
    again = _rewrite(loss, tmp_path, _refuse, decisions_file=path, write_decisions=False)
    assert again.placement.float32_ops == first.placement.float32_ops
    assert again.placement.source == f"reused from {path}"
    assert again.ops_converted == 0


def test_worker_without_the_chiefs_file_warns_and_measures_itself(tmp_path):
    path = str(tmp_path / "missing" / "placement.json")
    measure = FakeMeasure({"Conv2D": OpTiming(1.0, 3.0)})
    with pytest.warns(UserWarning, match="did not appear within 0s; measuring here"):
        report = _rewrite(_conv_chain()[1], tmp_path, measure, decisions_file=path, write_decisions=False)
    assert measure.asked and report.placement.source == "measured"
    assert not os.path.exists(path), "only the writer (the chief) writes the decisions file"


def test_decisions_file_of_another_precision_is_an_error(tmp_path):
    path = tmp_path / "placement.json"
    path.write_text(json.dumps({"precision": "float16", "float32_ops": {}, "low_ops": []}))
    with pytest.raises(ValueError, match="placement.json holds placement decisions for 'float16'"):
        _rewrite(_conv_chain()[1], tmp_path, _refuse, decisions_file=str(path))


@pytest.mark.parametrize("content", ["{not json", json.dumps({"precision": "bfloat16", "float32_ops": [],
                                                                 "low_ops": []})])
def test_damaged_decisions_file_is_one_error_naming_it(tmp_path, content):
    path = tmp_path / "placement.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=r"placement.json: .*it is not a placement decisions file; pass a new "
                                         r"--train_dir \(or delete the file\)"):
        _rewrite(_conv_chain()[1], tmp_path, _refuse, decisions_file=str(path))


def test_damaged_timing_cache_warns_and_measures_again(tmp_path):
    _rewrite(_conv_chain()[1], tmp_path, FakeMeasure({"Conv2D": OpTiming(1.0, 3.0)}))
    (cached,) = os.listdir(tmp_path / "cache")
    (tmp_path / "cache" / cached).write_text('{"device": "x", "timings": {"k": "not a list"}}')
    measure = FakeMeasure({"Conv2D": OpTiming(1.0, 3.0)})
    with pytest.warns(UserWarning, match="ignoring the damaged timing cache .*timings_.*json"):
        report = _rewrite(_conv_chain()[1], tmp_path, measure)
    assert measure.asked and set(report.placement.float32_ops) == {"conv0"}
    assert json.load(open(tmp_path / "cache" / cached))["timings"], "the next store rewrites the file whole"


def test_a_timing_cache_of_the_old_schema_is_ignored_with_a_warning(tmp_path):
    _rewrite(_conv_chain()[1], tmp_path, FakeMeasure({"Conv2D": OpTiming(1.0, 3.0)}))
    (cached,) = os.listdir(tmp_path / "cache")
    stored = json.load(open(tmp_path / "cache" / cached))
    del stored["schema"]
    stored["timings"] = {key: value[:2] for key, value in stored["timings"].items()}  # pairs, no noise
    (tmp_path / "cache" / cached).write_text(json.dumps(stored))
    measure = FakeMeasure({"Conv2D": OpTiming(1.0, 3.0)})
    with pytest.warns(UserWarning, match=r"ignoring the timing cache .*timings_.*json: it has schema 1, this "
                                         r"slim_mp reads schema 2"):
        report = _rewrite(_conv_chain()[1], tmp_path, measure)
    assert measure.asked and set(report.placement.float32_ops) == {"conv0"}
    assert json.load(open(tmp_path / "cache" / cached))["schema"] == 2, "the next store rewrites the file whole"


def test_fixed_timings_file_decides_without_measuring(tmp_path):
    path = tmp_path / "timings.json"
    path.write_text(json.dumps({"bfloat16": {"Conv2D": [1.0, 3.0], "*": [1.0, 0.5], "Cast": [0.0, 0.001]}}))
    report = _rewrite(_conv_chain()[1], tmp_path, None, timings_file=str(path), measure_steps=_refuse_steps)
    assert set(report.placement.float32_ops) == {"conv0"}
    assert report.placement.source == f"fixed timings from {path}"
    path.write_text(json.dumps({"float16": {"*": [1.0, 0.5]}}))
    with pytest.raises(ValueError, match=r"timings.json: needs 'bfloat16'"):
        _rewrite(_conv_chain()[1], tmp_path, None, timings_file=str(path))


def test_decisions_file_of_another_graph_is_an_error(tmp_path):
    path = str(tmp_path / "placement.json")
    _rewrite(_conv_chain(2)[1], tmp_path, FakeMeasure({"Conv2D": OpTiming(1.0, 3.0)}), decisions_file=path)
    with pytest.raises(ValueError, match=r"placement.json holds placement decisions for another graph \(1 of its "
                                         r"ops, e.g. 'conv1', are not in this one\)"):
        _rewrite(_conv_chain(1)[1], tmp_path, _refuse, decisions_file=path)


def test_static_placement_measures_nothing(tmp_path):
    graph, loss = _conv_chain()
    with graph.as_default():
        report = rewrite(loss, "bfloat16", device_type="CPU", placement="static",
                         placement_options=PlacementOptions(cache_dir=str(tmp_path), measure=_refuse))
    assert report.placement is None and report.ops_converted >= 1


def test_unknown_placement_is_rejected():
    with pytest.raises(ValueError, match="placement='fastest' is not a placement; use 'measured' or 'static'"):
        placement.resolve_placement("fastest")


def test_dynamic_shape_has_no_signature():
    graph = tf.Graph()
    with graph.as_default():
        images = tf1.placeholder(tf.float32, [None, 8, 8, 3])
        conv = tf.nn.conv2d(images, tf.ones([3, 3, 3, 4]), strides=1, padding="VALID")
    assert op_signature(conv.op) is None


@pytest.mark.executed_ops
def test_micro_benchmark_builds_forward_and_backprop_ops():
    graph = tf.Graph()
    with graph.as_default():
        conv = tf.nn.conv2d(tf.ones([2, 6, 6, 3]), tf.ones([3, 3, 3, 4]), strides=2, padding="SAME")
        matmul = tf.matmul(tf.ones([4, 5]), tf.ones([5, 3]), transpose_a=False)
    signatures = [op_signature(conv.op), op_signature(matmul.op), cast_signature(64)]
    timings = micro_benchmark(signatures, tf.bfloat16, warmup=1, runs=1)
    assert set(timings) == set(signatures)
    assert all(t.low_ms > 0 for t in timings.values())
    assert timings[signatures[2]].float32_ms == 0.0


def test_cast_model_fits_the_two_sizes():
    small, large = (cast_signature(n) for n in PlacementOptions().cast_sizes)
    model = fit_cast_model({small: OpTiming(0.0, 0.1), large: OpTiming(0.0, 1.1)}, PlacementOptions().cast_sizes)
    np.testing.assert_allclose(model.ms(PlacementOptions().cast_sizes[0]), 0.1, rtol=1e-9)
    np.testing.assert_allclose(model.ms(PlacementOptions().cast_sizes[1]), 1.1, rtol=1e-9)
    assert OpSignature("Cast", ((10,),)) == cast_signature(10)


def test_training_run_writes_its_decisions_and_a_resumed_run_reuses_them(tmp_path, monkeypatch):
    from slim_mp.training.learning_rate import LearningRateSettings
    from slim_mp.training.loop import train
    from slim_mp.training.optimizers import OptimizerSettings
    from slim_mp.training.precision_flags import PrecisionOptions
    from slim_mp.training.train_config import TrainConfig

    def fake_benchmark(signatures, precision, *args):
        # MatMuls slower in low precision, convolutions faster.
        return {s: OpTiming(0.0, 0.001) if s.op_type == "Cast" else
                OpTiming(1.0, 5.0) if s.op_type == "MatMul" else OpTiming(5.0, 1.0) for s in signatures}

    def fake_steps(copy, config, candidates, *args, **kwargs):
        # Whole steps agree with the op timings: fastest with both matmuls (and nothing else) float32.
        return [Timed(1.0 if c.float32_ops == {"LeNet/fc3/MatMul", "LeNet/fc4/MatMul"} else 2.0) for c in candidates]

    monkeypatch.setenv(placement.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(placement.TIMINGS_FILE_ENV)
    monkeypatch.setattr(timing_cache, "micro_benchmark", fake_benchmark)
    monkeypatch.setattr(timed_steps, "time_candidate_steps", fake_steps)
    train_dir = tmp_path / "train"

    def run(steps):
        precision = PrecisionOptions(precision="bfloat16", mp_placement="measured",
                                     mp_report=str(tmp_path / f"report{steps}.json"))
        config = TrainConfig(
            train_dir=str(train_dir), dataset_name="fashion_mnist", model_name="lenet", batch_size=8,
            max_number_of_steps=steps, num_preprocessing_threads=1, seed=0, precision_options=precision,
            optimizer_settings=OptimizerSettings(optimizer="sgd"),
            learning_rate_settings=LearningRateSettings(learning_rate_decay_type="fixed", learning_rate=0.01))
        train(config, print_line=lambda line: None)
        (report,) = json.loads((tmp_path / f"report{steps}.json").read_text())["reports"]
        return report

    first = run(1)
    decisions = json.loads((train_dir / placement.DECISIONS_FILE_NAME).read_text())
    assert set(decisions["float32_ops"]) == {"LeNet/fc3/MatMul", "LeNet/fc4/MatMul"}
    assert first["placement"]["low_ops"] == ["LeNet/conv1/Conv2D", "LeNet/conv2/Conv2D"]
    # Resume with an empty cache and no way to measure: the file alone decides, the graph is the same.
    monkeypatch.setenv(placement.CACHE_ENV, str(tmp_path / "empty_cache"))
    monkeypatch.setattr(timing_cache, "micro_benchmark", _refuse)
    second = run(2)
    assert second["placement"]["source"].startswith("reused from")
    assert second["float32_ops"] == first["float32_ops"]
    assert second["class_counts"] == first["class_counts"]


def test_mp_placement_flag_is_checked_and_passed_to_the_rewrite():
    from slim_mp.training.precision_flags import PrecisionOptions

    with pytest.raises(ValueError, match="--mp_placement=fastest: placement='fastest' is not a placement"):
        PrecisionOptions(precision="bfloat16", mp_placement="fastest")
    assert PrecisionOptions(precision="bfloat16", mp_placement="static").rewrite_options().placement == "static"


def test_float16_on_a_cpu_is_painted_statically_and_the_report_says_why(tmp_path):
    # float16 is emulated on CPUs: timing would keep everything float32 and hide float16's numerics.
    graph, loss = _conv_chain()
    with graph.as_default():
        with pytest.warns(UserWarning, match="float16 kernels on CPU are emulated"):
            report = rewrite(loss, "float16", device_type="CPU", placement="measured",
                             placement_options=PlacementOptions(cache_dir=str(tmp_path), measure=_refuse,
                                                                measure_steps=_refuse_steps))
    assert _op_dtype(graph, "conv0_fp16") == tf.float16
    assert report.placement.timed is False and report.placement.float32_ops == {}
    assert "static painting, not timed: float16 kernels on CPU are emulated" in report.summary()


def test_the_measuring_target_is_where_the_ops_are_placed_and_keys_the_cache():
    graph, loss = _conv_chain()
    unplaced = graph.get_operations()
    with graph.as_default(), tf.device("/job:worker/task:0/device:GPU:1"):
        on_gpu = tf.nn.conv2d(tf.ones([1, 4, 4, 2]), tf.ones([1, 1, 2, 2]), strides=1, padding="SAME")
    gpu = MeasuringTarget().placed([on_gpu.op])
    assert gpu.device == "/job:worker/task:0/device:GPU:1"
    assert (gpu.local_device(), gpu.device_type()) == ("/device:GPU:1", "GPU"), "timing runs in this process"
    assert MeasuringTarget(device="/device:CPU:0").placed([on_gpu.op]).device_type() == "CPU", "explicit wins"
    assert MeasuringTarget().placed(unplaced).local_device() == ""
    keys = {MeasuringTarget().describe(), gpu.describe(), MeasuringTarget(training=False).describe()}
    assert len(keys) == 3, "another device, or inference, never reuses a training step's timings"


def test_a_cluster_sessions_grappler_options_reach_the_timing_sessions_and_the_key():
    config = tf1.ConfigProto(device_filters=["/job:ps", "/job:worker/task:0"])
    config.graph_options.rewrite_options.remapping = config.graph_options.rewrite_options.OFF
    cluster = MeasuringTarget(session_config=config)
    timing = cluster.timing_config()
    assert timing.graph_options.rewrite_options.remapping == timing.graph_options.rewrite_options.OFF
    assert not timing.device_filters, "a local timing session has no cluster jobs to filter"
    assert cluster.describe() != MeasuringTarget().describe()
    with tf.Graph().as_default() as graph:
        total = tf.reduce_sum(tf.ones([3]))
    with cluster.session(graph) as session:
        assert session.run(total) == 3.0


@pytest.mark.executed_ops
def test_inference_timing_builds_no_backprop_ops(monkeypatch):
    graphs = []
    real_session = MeasuringTarget.session
    monkeypatch.setattr(MeasuringTarget, "session", lambda self, graph: graphs.append(graph) or real_session(self, graph))
    conv = op_signature(_conv_chain()[0].get_operation_by_name("conv0"))
    for training in (True, False):
        assert set(micro_benchmark([conv], tf.bfloat16, MeasuringTarget(training=training), warmup=1, runs=1)) == {conv}
    backprop = [{op.type for op in graph.get_operations()} & {"Conv2DBackpropInput", "Conv2DBackpropFilter"}
                for graph in graphs]
    assert backprop == [{"Conv2DBackpropInput", "Conv2DBackpropFilter"}, set()]


def test_the_noise_is_the_median_absolute_deviation_of_the_paired_ratios():
    # Ratios 1.0, 1.1, 1.2, 1.0, 3.0 (the last round hit by a burst): median 1.1, deviations 0.1, 0, 0.1,
    # 0.1, 1.9, their median 0.1; as a fraction of the median ratio 0.1 / 1.1.
    times, reference = [10.0, 11.0, 12.0, 10.0, 30.0], [10.0] * 5
    assert stopwatch.relative_noise(times, reference) == pytest.approx(0.1 / 1.1)
    assert stopwatch.relative_noise([5.0, 6.0, 7.0], [5.0, 5.0, 7.0]) == pytest.approx(0.0)  # ratios 1, 1.2, 1
    assert stopwatch.relative_noise([10.0, 12.0], [10.0, 10.0]) == 0.0, "two rounds cannot tell their spread"
    low, base = stopwatch.timed_against([times, reference], reference=1)
    assert (low.ms, base.ms, base.noise) == (10.0, 10.0, 0.0) and low.noise == pytest.approx(0.1 / 1.1)


def test_interleaved_rounds_alternate_which_variant_goes_first():
    order = []
    rounds = stopwatch.interleaved_ms([lambda: order.append("float32"), lambda: order.append("low"), None],
                                      warmup=1, runs=4)
    assert order[:2] == ["float32", "low"], "one warm-up each"
    assert order[2:] == ["float32", "low", "low", "float32", "float32", "low", "low", "float32"]
    assert [len(r) for r in rounds[:2]] == [4, 4] and rounds[2] is None


def test_the_noise_rule_takes_the_larger_of_the_floor_and_the_measured_noise():
    options = PlacementOptions(noise_fraction=0.01)
    assert options.is_noise(9.95, 10.0) and not options.is_noise(9.8, 10.0)
    assert options.is_noise(9.5, 10.0, measured_noise=0.07) and not options.is_noise(9.5, 10.0, measured_noise=0.03)
    assert options.win_verdict("bfloat16", 0.52, 0.55, 0.07) == (
        False, "bfloat16 0.520 ms vs float32 0.550 ms: a 5.8% win is inside this machine's measured noise of 7.0%")
    assert options.win_verdict("bfloat16", 0.52, 0.55, 0.005) == (
        True, "bfloat16 0.520 ms vs float32 0.550 ms: a 5.8% win, beyond the 1.0% noise floor (measured noise 0.5%)")
