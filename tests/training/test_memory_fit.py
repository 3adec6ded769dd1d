"""Memory that runs out, found in an error's chain and told in one sentence; the limits read; the step's estimate."""

import pytest
import tensorflow as tf

from argument_errors import raises_naming
from slim_mp.config_fields import ArgumentText, command_line_message, command_line_text
from slim_mp.training import memory_fit
from slim_mp.training.memory_fit import (
    GIB, MemoryLimit, OutOfMemoryError, StepSettings, StepWillNotFitError, cgroup_limits, check_step_fits,
    estimate_peak_bytes, memory_exhaustion, out_of_memory_named, out_of_memory_sentence,
)

tf1 = tf.compat.v1
MIB = 2 ** 20
# TensorFlow's own wording of an allocation that failed (op_kernel.cc), as a step's error carries it.
OOM_MESSAGE = ("OOM when allocating tensor with shape[64,56,56,256] and type float on /job:localhost/replica:0/"
               "task:0/device:CPU:0 by allocator mklcpu\n\t [[{{node resnet_v1_50/conv1/Relu}}]]")
SETTINGS = StepSettings("resnet_v1_50", 64, "bfloat16", 224)


def chained(outer: BaseException, inner: BaseException) -> BaseException:
    """``outer`` raised while handling ``inner`` (as the placement's timing re-raises), caught."""
    try:
        try:
            raise inner
        except BaseException:
            raise outer
    except BaseException as caught:
        return caught


def explained(outer: BaseException, inner: BaseException) -> BaseException:
    """``outer`` raised ``from None`` while handling ``inner`` (an error already explained), caught."""
    try:
        try:
            raise inner
        except BaseException:
            raise outer from None
    except BaseException as caught:
        return caught


DISK_FULL = tf.errors.ResourceExhaustedError(None, None, "runs/train/model.ckpt-5_temp/part-00000-of-00001.data-"
                                                         "00000-of-00001.tempstate1; No space left on device")


@pytest.mark.parametrize("error, found", [
    (tf.errors.ResourceExhaustedError(None, None, OOM_MESSAGE), 0),
    (MemoryError(), 0),
    (RuntimeError("can't start new thread"), 0),
    (chained(RuntimeError("can't start new thread"), tf.errors.ResourceExhaustedError(None, None, OOM_MESSAGE)), 0),
    (chained(ValueError("timing failed"), MemoryError()), 1),
    (ValueError("--batch_size=0 must be a positive integer"), None),
    (RuntimeError("something else"), None),
    (DISK_FULL, None),
    (explained(ValueError("cannot write to --train_dir=runs/train (No space left on device)"), MemoryError()), None),
], ids=["resource exhausted", "memory error", "thread start", "thread start after oom", "under a value error",
        "bad input", "another runtime error", "a full disk", "an error raised from None"])
def test_memory_that_ran_out_is_found_in_the_chain(error, found):
    chain = [error, error.__context__]
    assert memory_exhaustion(error) is (None if found is None else chain[found])


def test_the_sentence_names_the_node_the_batch_the_precision_the_limit_and_the_benchmark_command():
    sentence = out_of_memory_sentence(tf.errors.ResourceExhaustedError(None, None, OOM_MESSAGE), SETTINGS,
                                      MemoryLimit(4 * GIB, "ulimit -v", GIB))
    assert command_line_text(ArgumentText(sentence)) == (
        "out of memory (ResourceExhaustedError allocating shape[64,56,56,256] in resnet_v1_50/conv1/Relu) with "
        "resnet_v1_50 at --batch_size=64 --train_image_size=224 in bfloat16; this process may use 4.0 GiB "
        "(ulimit -v); lower --batch_size (or --train_image_size), or find the largest batch that fits with: "
        "python scripts/benchmark.py --models=resnet_v1_50 --precisions=bfloat16 --image_size=224 "
        "--memory_budget_mb=<MiB for the step> --output_dir=runs/memory_fit"
    )


def test_memory_that_runs_out_in_a_named_step_is_one_error_naming_the_outermost_callers_settings(monkeypatch):
    """A parity run names its own image-size argument, not the one of the training it runs (the inner step)."""
    monkeypatch.setattr(memory_fit, "memory_limit", lambda: None)
    parity = StepSettings("lenet", 32, "bfloat16", 28, "image_size")
    with pytest.raises(OutOfMemoryError) as raised:
        with out_of_memory_named(parity), out_of_memory_named(StepSettings("lenet", 32, "float32", 28)):
            raise tf.errors.ResourceExhaustedError(None, None, OOM_MESSAGE)
    assert command_line_message(raised.value).startswith(
        "out of memory (ResourceExhaustedError allocating shape[64,56,56,256] in resnet_v1_50/conv1/Relu) with lenet "
        "at --batch_size=32 --image_size=28 in bfloat16; lower --batch_size (or --image_size), or find")
    assert str(raised.value).startswith(
        "out of memory (ResourceExhaustedError allocating shape[64,56,56,256] in resnet_v1_50/conv1/Relu) with lenet "
        "at batch_size=32 image_size=28 in bfloat16; lower batch_size (or image_size), or find")
    with pytest.raises(ValueError, match="not memory"):
        with out_of_memory_named(parity):
            raise ValueError("not memory")


def test_a_script_without_a_step_gets_the_sentence_without_batch_advice():
    assert out_of_memory_sentence(MemoryError(), None, None) == (
        "out of memory (MemoryError): free memory or raise the limit, then run again.")


def write(path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_cgroup_limits_of_both_layouts_with_their_usage_and_no_limit_left_out(tmp_path):
    """v2: the process's group and its parents (``memory.max``); v1: the memory controller's hierarchy."""
    root = tmp_path / "cgroup"
    (tmp_path / "self").write_text("0::/jobs/train\n4:memory:/batch\n3:cpu:/batch\n")
    write(root / "jobs" / "train" / "memory.max", "max\n")
    write(root / "jobs" / "train" / "memory.current", "100\n")
    write(root / "jobs" / "memory.max", f"{8 * GIB}\n")
    write(root / "jobs" / "memory.current", f"{GIB}\n")
    write(root / "memory" / "batch" / "memory.limit_in_bytes", f"{6 * GIB}\n")
    write(root / "memory" / "batch" / "memory.usage_in_bytes", f"{2 * GIB}\n")
    write(root / "memory" / "memory.limit_in_bytes", "9223372036854771712\n")  # v1's "no limit"
    write(root / "memory" / "memory.usage_in_bytes", "5\n")
    limits = cgroup_limits(str(tmp_path / "self"), str(root))
    assert limits == [MemoryLimit(8 * GIB, f"{root}/jobs/memory.max", GIB),
                      MemoryLimit(6 * GIB, f"{root}/memory/batch/memory.limit_in_bytes", 2 * GIB)]
    assert min(limits, key=lambda limit: limit.available).describe() == (
        f"4.0 GiB left of 6.0 GiB ({root}/memory/batch/memory.limit_in_bytes)")


def test_the_estimate_counts_the_tensors_alive_together():
    """placeholder 1 MiB -> relu 1 MiB -> mul 1 MiB -> sum: at least two of them live at once, at most all three."""
    with tf.Graph().as_default():
        pixels = tf1.placeholder(tf.float32, [256, 1024])
        step = tf.group(tf.reduce_sum(tf.nn.relu(pixels) * 2.0))
        estimate = estimate_peak_bytes(step)
    assert 2 * MIB <= estimate <= 3 * MIB + 64


def matmul_step() -> tf.Operation:
    """A float32 step of 24 MiB at its peak (``estimate_peak_bytes``): a 1024x1024 matmul and its gradient."""
    inputs = tf1.placeholder(tf.float32, [1024, 1024])
    weights = tf1.get_variable("weights", [1024, 1024])
    product = tf.matmul(inputs, weights)
    return tf.group(*tf.gradients(tf.reduce_sum(product * product), [weights]))


@pytest.mark.parametrize("precision, available_mib, outcome", [
    ("float32", 20, "cannot fit"),      # 24 MiB of tensors in 20
    ("float32", 40, "may not fit"),     # with the allocator's headroom: 48
    ("float32", 60, None),
    ("bfloat16", 9, "cannot fit"),      # at least 0.4 x 24
    ("bfloat16", 20, "may not fit"),    # about 2 x 0.5 x 24
    ("bfloat16", 30, None),
])
def test_a_step_that_cannot_fit_is_an_error_one_that_may_not_a_warning(monkeypatch, precision, available_mib, outcome):
    limit = MemoryLimit(4 * GIB, "ulimit -v", 4 * GIB - available_mib * MIB)
    monkeypatch.setattr(memory_fit, "memory_limit", lambda: limit)
    settings = StepSettings("toy", 1024, precision)
    if outcome == "cannot fit":
        with raises_naming(r"the train step of toy at --batch_size=1024 in \w+ cannot fit: its tensors need "
                           r"(at least )?0\.0 GiB .*--batch_size") as raised:
            check_step_fits(settings, matmul_step)
        assert isinstance(raised.value, StepWillNotFitError)
        return
    warning = check_step_fits(settings, matmul_step)
    assert (warning is None) if outcome is None else command_line_text(warning).startswith(
        f"the train step of toy at --batch_size=1024 in {precision} may not fit")


def test_without_a_limit_nothing_is_built(monkeypatch):
    monkeypatch.setattr(memory_fit, "memory_limit", lambda: None)
    assert check_step_fits(SETTINGS, lambda: pytest.fail("the step was built")) is None
