"""An inference graph of unknown batch (``served_batches``): timed at the serving batch sizes, an op kept low
only where it pays at every one; where nothing can be timed, float32 on a CPU that emulates the precision and
the static painting where it is native; the report says which. Timings are fakes, so every CPU decides alike.
"""

import json

import pytest
import tensorflow as tf

from slim_mp.config_fields import ArgumentError
from slim_mp.devices import DeviceInfo
from slim_mp.graph_pass.placement import MeasuringTarget, OpTiming, PlacementMeasuring, measured
from slim_mp.graph_pass.placement.served_batches import batch_words
from slim_mp.timing import Timed

from .fakes import FakeMeasure, measured_rewrite, op_dtype, refuse, refuse_steps

tf1 = tf.compat.v1
INFERENCE = MeasuringTarget(training=False)
# bfloat16 native (oneDNN on an AVX512-BF16 CPU) and emulated (an AVX2-only CPU): the device the test stands for.
NATIVE = DeviceInfo("CPU", "test CPU", frozenset({"avx512_bf16"}))
EMULATING = DeviceInfo("CPU", "test CPU", frozenset({"avx2"}))


def served_convs(shape=(None, 8, 8, 4), num_convs=2):
    """An export's inference graph: input ``shape`` (batch unknown) -> convs + relu -> logits; (graph, logits)."""
    graph = tf.Graph()
    with graph.as_default():
        net = tf1.placeholder(tf.float32, list(shape), name="input")
        for index in range(num_convs):
            weights = tf1.get_variable(f"w{index}", [3, 3, 4, 4])
            net = tf.nn.relu(tf.nn.conv2d(net, weights, strides=1, padding="SAME", name=f"conv{index}"))
        logits = tf.reduce_mean(net, axis=[1, 2], name="logits")
    return graph, logits


def conv_batches(measure):
    """The batches of the Conv2D signatures ``measure`` was asked for."""
    return sorted({s.input_shapes[0][0] for s in measure.asked if s.op_type == "Conv2D"})


def test_an_unknown_batch_is_timed_at_each_serving_batch_size_and_the_report_names_them(tmp_path):
    graph, logits = served_convs()
    measure = FakeMeasure({"Conv2D": OpTiming(float32_ms=4.0, low_ms=1.0)})
    report = measured_rewrite(logits, tmp_path, measure, target=INFERENCE)
    assert conv_batches(measure) == [1, 32], "the signatures hold the serving batches, so do the cache keys"
    assert all(s.input_shapes[0][1:] == (8, 8, 4) for s in measure.asked if s.op_type == "Conv2D")
    plan = report.placement
    assert plan.timed and plan.timed_batches == (1, 32) and plan.low_ops == ["conv0", "conv1"]
    assert op_dtype(graph, "conv0_bf16") == tf.bfloat16
    line = next(line for line in report.summary().splitlines() if "placement:" in line)
    assert "timed: forward steps at batch 1 and 32), 0 timed ops kept float32" in line
    assert "2 measured faster at every batch; estimated at batch 32 " in line
    cache = [json.load(open(path)) for path in (tmp_path / "cache").iterdir()]
    keys = [key for content in cache for key in content["timings"] if key.startswith('["Conv2D"')]
    assert sorted(json.loads(key)[1][0][0] for key in keys) == [1, 32], "the two convs share a signature per batch"


def test_the_serving_batch_sizes_are_the_options_and_a_known_batch_keeps_its_own_shapes(tmp_path):
    measure = FakeMeasure({"Conv2D": OpTiming(4.0, 1.0)})
    report = measured_rewrite(served_convs()[1], tmp_path, measure, target=INFERENCE, serving_batch_sizes=(8, 2))
    assert conv_batches(measure) == [2, 8] and report.placement.timed_batches == (2, 8)
    known = FakeMeasure({"Conv2D": OpTiming(4.0, 1.0)})
    report = measured_rewrite(served_convs((3, 8, 8, 4))[1], tmp_path, known, target=INFERENCE)
    assert conv_batches(known) == [3] and report.placement.timed_batches == ()
    assert "timed: forward steps at the graph's shapes)" in report.summary()


def faster_low_from_batch(batch):
    """A measure: convolutions slower in bfloat16 below ``batch`` examples, 4x faster from it on."""
    def measure(signatures, precision):
        return {s: (OpTiming(0.0, 0.001) if s.op_type == "Cast" else
                    OpTiming(4.0, 1.0) if s.input_shapes[0][0] >= batch else OpTiming(1.0, 2.0))
                for s in signatures if s.op_type in ("Cast", "Conv2D")}
    return measure


def test_an_op_that_pays_at_batch_32_but_loses_at_batch_1_stays_float32(tmp_path):
    graph, logits = served_convs()
    report = measured_rewrite(logits, tmp_path, faster_low_from_batch(32), target=INFERENCE)
    assert report.placement.low_ops == [] and report.ops_converted == 0
    assert sorted(report.placement.float32_ops) == ["conv0", "conv1"]
    assert all(reason.startswith("at batch 1: slower in bfloat16") for reason in report.placement.float32_ops.values())
    # Served at batch 32 alone, the same timings lower them: the batch 1 timing is what kept them float32.
    graph, logits = served_convs()
    alone = measured_rewrite(logits, tmp_path, faster_low_from_batch(32), target=INFERENCE, serving_batch_sizes=(32,))
    assert alone.placement.low_ops == ["conv0", "conv1"] and op_dtype(graph, "conv0_bf16") == tf.bfloat16


class CloseCallByBatch:
    """Convolutions a close call alone (the estimate's margin decides, so whole steps are timed); the whole step
    with low ops is slower than all float32 at batch 1 and faster at 32. The op timings are asked first at
    each batch, so they tell the whole steps which batch they are timing."""

    def __init__(self):
        self.batch = None

    def measure(self, signatures, precision):
        self.batch = next((s.input_shapes[0][0] for s in signatures if s.op_type == "Conv2D"), self.batch)
        return FakeMeasure({"Conv2D": OpTiming(1.0, 0.9)})(signatures, precision)

    def steps(self, candidates, reference):
        low_wins = self.batch == 32
        return [Timed(1.0 if bool(c.float32_ops) != low_wins else 2.0) for c in candidates]


def test_a_whole_step_that_loses_at_one_batch_keeps_its_ops_float32(tmp_path):
    timings = CloseCallByBatch()
    report = measured_rewrite(served_convs()[1], tmp_path, timings.measure, target=INFERENCE,
                              measure_steps=timings.steps)
    assert report.placement.low_ops == [] and sorted(report.placement.float32_ops) == ["conv0", "conv1"]
    assert all(reason.startswith("at batch 1: slower in bfloat16 on this device: bfloat16 2.000 ms vs float32 1.000 ms")
               for reason in report.placement.float32_ops.values()), "the whole steps of batch 1 kept them"
    timings = CloseCallByBatch()
    alone = measured_rewrite(served_convs()[1], tmp_path / "alone", timings.measure, target=INFERENCE,
                             measure_steps=timings.steps, serving_batch_sizes=(32,))
    assert alone.placement.low_ops == ["conv0", "conv1"], "batch 32's whole steps alone keep them low"


@pytest.mark.parametrize("shape", [(None, None, None, 4), (None, 8, 8, 4)])
def test_emulated_and_nothing_timeable_keeps_every_op_float32_with_a_warning_naming_the_static_placement(
        tmp_path, monkeypatch, shape):
    # A training step of unknown batch, or an image size left unknown: no batch size gives it static shapes.
    monkeypatch.setattr(measured, "detect_device", lambda: EMULATING)
    graph, logits = served_convs(shape)
    target = INFERENCE if None in shape[1:] else MeasuringTarget(training=True)
    with pytest.warns(UserWarning, match="placement=static converts them anyway"):
        report = measured_rewrite(logits, tmp_path, refuse, target=target, measure_steps=refuse_steps)
    plan = report.placement
    assert report.ops_converted == 0 and op_dtype(graph, "conv0") == tf.float32
    assert not plan.timed and sorted(plan.float32_ops) == ["conv0", "conv1"]
    line = next(line for line in report.summary().splitlines() if "placement:" in line)
    assert line.startswith("  placement: every op kept float32, nothing timed: no op the static lists make low has "
                           "static shapes (e.g. conv0's input input:0 is ")
    assert "bfloat16 is emulated: the CPU has neither avx512_bf16 nor amx_bf16" in line
    assert "measured" not in line
    assert any("nothing was converted to bfloat16" in warning for warning in report.to_dict()["warnings"])


def test_native_and_nothing_timeable_paints_statically_and_says_nothing_was_timed(tmp_path, monkeypatch):
    monkeypatch.setattr(measured, "detect_device", lambda: NATIVE)
    graph, logits = served_convs((None, None, None, 4))
    report = measured_rewrite(logits, tmp_path, refuse, target=INFERENCE, measure_steps=refuse_steps)
    assert op_dtype(graph, "conv0_bf16") == tf.bfloat16 and report.placement.float32_ops == {}
    line = next(line for line in report.summary().splitlines() if "placement:" in line)
    assert line.startswith("  placement: static painting, nothing timed: no op the static lists make low has static")
    assert "measured" not in line


def test_emulated_and_nothing_timed_by_the_fixed_timings_keeps_float32_too(tmp_path, monkeypatch):
    # Signatures there are, but the timings know no convolution: nothing was timed, so nothing goes low.
    monkeypatch.setattr(measured, "detect_device", lambda: EMULATING)
    graph, logits = served_convs()
    with pytest.warns(UserWarning, match="nothing was converted"):
        report = measured_rewrite(logits, tmp_path, FakeMeasure({}), target=INFERENCE)
    assert report.ops_converted == 0 and not report.placement.timed
    assert "none of the 2 ops the static lists make low could be timed here" in report.placement.source


def test_a_plan_not_timed_is_pinned_and_reused_as_not_timed(tmp_path, monkeypatch):
    monkeypatch.setattr(measured, "detect_device", lambda: EMULATING)
    path = str(tmp_path / "placement.json")
    with pytest.warns(UserWarning):
        measured_rewrite(served_convs((None, None, None, 4))[1], tmp_path, refuse, target=INFERENCE,
                         decisions_file=path)
    with pytest.warns(UserWarning):
        again = measured_rewrite(served_convs((None, None, None, 4))[1], tmp_path, refuse, target=INFERENCE,
                                 decisions_file=path)
    assert not again.placement.timed and again.placement.source.startswith(f"reused from {path}: every op kept")
    served = measured_rewrite(served_convs()[1], tmp_path, FakeMeasure({"Conv2D": OpTiming(4.0, 1.0)}),
                              target=INFERENCE, decisions_file=str(tmp_path / "served.json"))
    reused = measured_rewrite(served_convs()[1], tmp_path, refuse, target=INFERENCE,
                              decisions_file=str(tmp_path / "served.json"))
    assert served.placement.timed_batches == reused.placement.timed_batches == (1, 32)


@pytest.mark.parametrize("sizes", [(), (0,), (1, -8)])
def test_serving_batch_sizes_must_be_positive(sizes):
    with pytest.raises(ArgumentError) as raised:
        PlacementMeasuring(serving_batch_sizes=sizes)
    assert raised.value.arguments == ("serving_batch_sizes",)
    assert str(raised.value).startswith(f"serving_batch_sizes={','.join(map(str, sizes)) or '(none)'}: ")


def test_serving_batch_sizes_are_kept_sorted_once_and_named_in_words():
    assert PlacementMeasuring(serving_batch_sizes=(32, 1, 32)).serving_batch_sizes == (1, 32)
    assert [batch_words(b) for b in [(1,), (1, 32), (1, 8, 32)]] == ["batch 1", "batch 1 and 32", "batch 1, 8 and 32"]
