"""The whole procedure (``measured``): the measured default converts what pays, and its docstring holds the decision."""

import ast
import inspect
import re
import textwrap

import tensorflow as tf

from slim_mp.graph_pass.placement import OpTiming, measured

from .fakes import FakeMeasure, conv_chain, measured_rewrite, op_dtype


def test_op_faster_in_low_precision_is_converted(tmp_path):
    graph, loss = conv_chain()
    report = measured_rewrite(loss, tmp_path, FakeMeasure({"Conv2D": OpTiming(float32_ms=4.0, low_ms=1.0)}))
    assert op_dtype(graph, "conv0_bf16") == tf.bfloat16
    assert report.placement.float32_ops == {}
    assert report.placement.low_ops == ["conv0"]


# A step of the module docstring's list: "3. Gradient kernels (``_gradient_kernels``): ...".
STEP = re.compile(r"^(\d)\. ([A-Z][\w ]+) \(``(\w+)``\)", re.MULTILINE)


def _called(function) -> list:
    """The names of the plain functions ``function`` calls, in source order."""
    calls = [node for node in ast.walk(ast.parse(textwrap.dedent(inspect.getsource(function))))
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)]
    return [call.func.id for call in sorted(calls, key=lambda call: (call.lineno, call.col_offset))]


def test_the_module_opens_with_every_step_of_the_decision_and_the_code_takes_them_in_that_order():
    steps = STEP.findall(measured.__doc__)
    assert [number for number, _, _ in steps] == [str(n) for n in range(1, 8)]
    assert [title for _, title, _ in steps] == ["Pinned", "Timings", "Gradient kernels", "Candidates",
                                                "Whole steps", "The check", "The plan"]
    functions = [function for _, _, function in steps]
    assert all(inspect.isfunction(getattr(measured, name, None)) for name in functions), functions
    assert functions[0] in _called(measured.measured_placement)
    assert [name for name in _called(measured._decided) if name in functions] == functions[1:]
    source = inspect.getsource(measured)
    assert sorted(functions, key=lambda name: source.index(f"def {name}(")) == functions, "defined in step order"


def test_every_function_of_the_module_the_decision_calls_is_named_in_the_step_list():
    own = {name for name, value in vars(measured).items()
           if inspect.isfunction(value) and value.__module__ == measured.__name__}
    unnamed = [name for name in _called(measured._decided) if name in own and f"``{name}``" not in measured.__doc__]
    assert unnamed == []


def test_the_all_float32_step_is_built_ahead_only_where_the_low_precision_is_native(monkeypatch):
    import dataclasses

    from slim_mp.devices import DeviceInfo
    from slim_mp.graph_pass.placement import MeasuringTarget

    from .fakes import CONFIG

    native = DeviceInfo("CPU", "test CPU", frozenset({"avx512_bf16"}))
    emulating = DeviceInfo("CPU", "test CPU", frozenset({"avx2"}))
    bfloat16, float16 = CONFIG, dataclasses.replace(CONFIG, precision=tf.float16)
    assert bfloat16.precision == tf.bfloat16
    monkeypatch.setattr(measured, "detect_device", lambda: native)
    assert measured._check_likely(bfloat16, MeasuringTarget())
    assert not measured._check_likely(float16, MeasuringTarget()), "float16 is emulated on every CPU"
    assert not measured._check_likely(bfloat16, MeasuringTarget(device="/device:GPU:0")), (
        "another kind of device than this one's: not known to be native")
    monkeypatch.setattr(measured, "detect_device", lambda: emulating)
    assert not measured._check_likely(bfloat16, MeasuringTarget())
