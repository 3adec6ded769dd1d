"""The whole procedure (``measured``): the measured default converts what pays, and its docstring holds the decision."""

import inspect
import re

import tensorflow as tf

from slim_mp.graph_pass.placement import OpTiming, measured

from .fakes import FakeMeasure, conv_chain, measured_rewrite, op_dtype


def test_op_faster_in_low_precision_is_converted(tmp_path):
    graph, loss = conv_chain()
    report = measured_rewrite(loss, tmp_path, FakeMeasure({"Conv2D": OpTiming(float32_ms=4.0, low_ms=1.0)}))
    assert op_dtype(graph, "conv0_bf16") == tf.bfloat16
    assert report.placement.float32_ops == {}
    assert report.placement.low_ops == ["conv0"]


def test_the_module_opens_with_the_decision_and_its_code_reads_in_that_order():
    steps = re.findall(r"^(\d)\. (\w+)", measured.__doc__, re.MULTILINE)
    assert [number for number, _ in steps] == ["1", "2", "3", "4", "5", "6"]
    assert [word for _, word in steps] == ["Pinned", "Timings", "Candidates", "Whole", "The", "The"]
    source = inspect.getsource(measured)
    order = ["def measured_placement", "def _op_timings", "def _candidates", "def _with_steps", "def _checked",
             "def _decided"]
    assert [source.index(name) for name in order] == sorted(source.index(name) for name in order)


def test_the_all_float32_step_is_built_ahead_only_where_the_low_precision_is_native(monkeypatch):
    import dataclasses

    from slim_mp.devices import DeviceInfo
    from slim_mp.graph_pass.placement import MeasuringTarget, PlacementOptions

    from .fakes import CONFIG

    native = DeviceInfo("CPU", "test CPU", frozenset({"avx512_bf16"}))
    emulating = DeviceInfo("CPU", "test CPU", frozenset({"avx2"}))
    bfloat16, float16 = CONFIG, dataclasses.replace(CONFIG, precision=tf.float16)
    assert bfloat16.precision == tf.bfloat16
    monkeypatch.setattr(measured, "detect_device", lambda: native)
    assert measured._check_likely(bfloat16, PlacementOptions())
    assert not measured._check_likely(float16, PlacementOptions()), "float16 is emulated on every CPU"
    assert not measured._check_likely(bfloat16, PlacementOptions(target=MeasuringTarget(device="/device:GPU:0"))), (
        "another kind of device than this one's: not known to be native")
    monkeypatch.setattr(measured, "detect_device", lambda: emulating)
    assert not measured._check_likely(bfloat16, PlacementOptions())
