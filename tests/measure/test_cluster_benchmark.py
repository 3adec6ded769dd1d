"""The cluster benchmark's pieces: one parameter server keeps each configuration's variables apart, and the report
reads the speed-up kept and the bytes from the results."""

import numpy as np
import pytest
import tensorflow as tf

from slim_mp.config_fields import ArgumentError
from slim_mp.devices import DeviceInfo, precision_support
from loopback_servers import loopback_cluster
from slim_mp.measure.benchmark.benchmark_step import build_benchmark_step
from slim_mp.measure.benchmark.cluster_report import ClusterReport
from slim_mp.measure.benchmark.cluster_suite import check_cluster_options
from slim_mp.measure.benchmark.suite_results import ClusterResult, ClusterRun, Settings, Variant


def _first_weight(step) -> np.ndarray:
    with step.train_op.graph.as_default():
        return step.session.run(tf.compat.v1.trainable_variables()[0])


@pytest.mark.parametrize("containers, shared", [
    (("", ""), True), (("lenet_ps_float32", "lenet_ps_slim_mp_bf16"), False)])
def test_steps_on_one_parameter_server_share_variables_unless_in_containers_of_their_own(containers, shared):
    layout, target = loopback_cluster()
    steps = [build_benchmark_step("float32", "lenet", tf.float32, 2, None, num_classes=10, layout=layout,
                                  target=target, container=container) for container in containers]
    try:
        before = _first_weight(steps[1])
        for _ in range(2):
            steps[0].session.run(steps[0].train_op)
        assert (not np.array_equal(before, _first_weight(steps[1]))) is shared
    finally:
        for step in steps:
            step.session.close()


def test_cluster_options_name_the_arguments_as_a_library_caller_wrote_them():
    assert check_cluster_options("none", None) is None
    assert check_cluster_options("shaped", 2).link_gbits == 2.0
    with pytest.raises(ArgumentError, match="^cluster=shaped needs the link's bandwidth: pass link_gbits"):
        check_cluster_options("shaped", None)


def _result(label, layout, precision, seconds, speedup, wire=None):
    config = "float32" if precision == "float32" else "slim_mp"
    return ClusterResult("toy", label, Variant(config, precision), layout, True, seconds, 2 / seconds, speedup,
                         (seconds,), (("_FusedConv2D", 2),) if layout == "process" else (),
                         sent_bytes=None if wire is None else wire // 2,
                         received_bytes=None if wire is None else wire - wire // 2)


def test_the_report_divides_the_cluster_speed_up_by_the_one_process_one_and_the_bytes_alike():
    device = DeviceInfo("CPU", "test CPU", cpu_flags=frozenset({"avx512_bf16"}))
    mib = 2 ** 20
    run = ClusterRun(device, precision_support(device), Settings(2, None, 1, 0), ("bfloat16",), "loopback", None, (
        _result("float32", "process", "float32", 0.2, 1.0), _result("slim_mp_bf16", "process", "bfloat16", 0.1, 2.0),
        _result("ps_float32", "cluster", "float32", 0.3, 1.0, 180 * mib),
        _result("ps_slim_mp_bf16", "cluster", "bfloat16", 0.2, 1.5, 90 * mib)))
    lines = ClusterReport(run).to_markdown().splitlines()
    assert "| toy | bfloat16 | 2.00x | 1.50x | 0.75 | 180.0 | 90.0 | 0.50 |" in lines
    assert "| toy | slim_mp_bf16 | _FusedConv2D x2 | none | _FusedConv2D (0 vs 2) |" in lines
    # 45 MiB each way at 1 Gbit/s take 0.377 s against a 0.1 s step: none; at 10, 0.1 / 0.0377 = 2.6; at 100, 26.
    assert "| toy | ps_slim_mp_bf16 | 100.0 | 45.0 | 0 | 2 | 26 |" in lines
