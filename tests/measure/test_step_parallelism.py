"""Parallelism, critical path, idle core time and alone time of a traced step, on step stats written by hand.

Each step here is a ``RunMetadata`` built from its protos (node stats with start and end times,
a partition graph with the edges): the expected figures are worked out by hand from the times
in the comments, never by the code under test.
"""

import pytest
import tensorflow as tf

from slim_mp.measure.profiling.profile_report import ProfileReport
from slim_mp.measure.profiling.step_parallelism import (
    StepParallelism, critical_path, median_parallelism, step_parallelism, traced_ops)
from slim_mp.measure.profiling.step_profile import StepProfile

tf1 = tf.compat.v1
pytestmark = pytest.mark.executed_ops
STEP_START = 1_000_000  # step stats times are absolute microseconds


def _metadata(ops):
    """``ops``: (name, kernel, start, end, inputs) with times relative to the step's start."""
    metadata = tf1.RunMetadata()
    device = metadata.step_stats.dev_stats.add(device="/job:localhost/replica:0/task:0/device:CPU:0")
    graph = metadata.partition_graphs.add()
    for name, kernel, start, end, inputs in ops:
        stats = device.node_stats.add(node_name=name, all_start_micros=STEP_START + start)
        stats.op_start_rel_micros, stats.op_end_rel_micros, stats.all_end_rel_micros = 0, end - start, end - start
        graph.node.add(name=name, op=kernel, input=list(inputs))
    return metadata


def _figures(ops, cores=2) -> StepParallelism:
    return step_parallelism(traced_ops(_metadata(ops)), cores)


def test_a_chain_has_parallelism_one_and_its_critical_path_is_the_sum():
    figures = _figures([("a", "Conv2D", 0, 10, ()), ("b", "Relu", 10, 30, ("a",)), ("c", "Cast", 30, 60, ("b:0",))])
    assert figures.op_ms == pytest.approx(0.060)
    assert figures.span_ms == pytest.approx(0.060)
    assert figures.parallelism == pytest.approx(1.0)
    assert figures.critical_path_ms == pytest.approx(0.060)
    assert figures.critical_path_ops == 3
    assert figures.available_parallelism == pytest.approx(1.0)
    assert figures.idle_core_ms == pytest.approx(0.060)  # one of two cores idle all along
    assert figures.no_op_ms == 0
    assert dict(figures.alone_by_type) == pytest.approx({"Conv2D": 0.010, "Relu": 0.020, "Cast": 0.030})
    assert (figures.critical_casts, figures.critical_cast_ms) == (1, pytest.approx(0.030))


def test_two_equal_independent_branches_run_twice_as_parallel_between_fork_and_join():
    # fork 0-10, two branches of 50 at once 10-60, join 60-70
    figures = _figures([("fork", "Conv2D", 0, 10, ()), ("left", "Relu", 10, 60, ("fork",)),
                        ("right", "Relu", 10, 60, ("fork",)), ("join", "AddV2", 60, 70, ("left", "right"))])
    assert figures.op_ms == pytest.approx(0.120)
    assert figures.parallelism == pytest.approx(120 / 70)
    assert figures.critical_path_ms == pytest.approx(0.070)
    assert figures.critical_path_ops == 3
    assert figures.idle_core_ms == pytest.approx(0.020)  # one core idle during fork and join
    assert figures.alone_ms == pytest.approx(0.020)
    assert "Relu" not in figures.alone_by_type


def test_the_critical_path_follows_dependencies_not_the_clock():
    # a and b are a chain of 20; "late" depends on nothing but the scheduler started it at 20
    figures = _figures([("a", "MatMul", 0, 10, ()), ("b", "MatMul", 10, 20, ("a",)), ("late", "Cast", 20, 25, ())])
    assert figures.span_ms == pytest.approx(0.025)
    assert figures.critical_path_ms == pytest.approx(0.020)
    assert figures.critical_casts == 0
    assert figures.available_parallelism == pytest.approx(25 / 20)


def test_a_long_independent_op_is_the_critical_path_over_a_chain_of_short_ones():
    length, path = critical_path(traced_ops(_metadata([
        ("a", "Relu", 0, 10, ()), ("b", "Relu", 10, 20, ("a",)), ("long", "Conv2D", 0, 100, ())])))
    assert (length, path) == (100, ["long"])


def test_control_edges_count_and_the_path_is_listed_in_run_order():
    runs = traced_ops(_metadata([
        ("first", "Cast", 0, 40, ()), ("other", "Relu", 0, 25, ()), ("then", "Relu", 40, 50, ("^first", "other"))]))
    assert critical_path(runs) == (50, ["first", "then"])
    assert critical_path(runs, control_edges=False) == (40, ["first"])
    assert step_parallelism(runs, 2).data_critical_path_ms == pytest.approx(0.040)


def test_casts_off_the_critical_path_are_not_counted_on_it():
    # a 5 us cast beside a 50 us convolution, both feeding the product
    figures = _figures([("x", "Cast", 0, 5, ()), ("conv", "_MklNativeFusedConv2D", 0, 50, ()),
                        ("product", "_MklMatMul", 50, 60, ("x", "conv"))])
    assert figures.critical_casts == 0 and figures.critical_cast_ms == 0
    assert dict(figures.critical_by_type) == pytest.approx({"Conv2D": 0.050, "MatMul": 0.010})  # kernel families


def test_a_gap_with_no_op_running_idles_every_core():
    figures = _figures([("a", "Relu", 0, 10, ()), ("b", "Relu", 30, 40, ("a",))], cores=2)
    assert figures.no_op_ms == pytest.approx(0.020)
    assert figures.idle_core_ms == pytest.approx(0.010 + 2 * 0.020 + 0.010)
    assert figures.parallelism == pytest.approx(20 / 40)


def test_more_ops_than_cores_leave_no_core_idle():
    figures = _figures([(name, "Relu", 0, 10, ()) for name in "abc"], cores=2)
    assert figures.parallelism == pytest.approx(3.0)
    assert figures.idle_core_ms == 0


def test_a_loop_back_edge_is_dropped_and_each_run_of_the_body_counts():
    # merge -> body -> next_iteration -> merge: the body ran twice in the step (10 us each)
    figures = _figures([("merge", "Merge", 0, 1, ("next_iteration",)), ("body", "Relu", 1, 11, ("merge",)),
                        ("next_iteration", "NextIteration", 11, 12, ("body",)),
                        ("body", "Relu", 12, 22, ("merge",))])
    assert figures.op_ms == pytest.approx(0.022)
    assert figures.critical_path_ms == pytest.approx(0.022)


def test_ops_missing_from_the_executed_graph_are_left_out():
    metadata = _metadata([("a", "Relu", 0, 10, ())])
    metadata.step_stats.dev_stats[0].node_stats.add(node_name="_SOURCE", all_start_micros=STEP_START - 500)
    assert [op.name for op in traced_ops(metadata)] == ["a"]


def test_medians_over_traced_steps_take_each_figure_and_type_apart():
    steps = [_figures([("a", "Relu", 0, micros, ())], cores=1) for micros in (10, 30, 20)]
    steps[1] = _figures([("a", "Relu", 0, 30, ()), ("b", "Cast", 0, 40, ())], cores=1)
    median = median_parallelism(steps)
    assert median.span_ms == pytest.approx(0.020)  # 0.010, 0.040, 0.020
    assert median.op_ms == pytest.approx(0.020)  # 0.010, 0.070, 0.020
    # Relu on the path 0.010, 0 (the Cast is longer there), 0.020; the Cast 0, 0.040, 0
    assert dict(median.critical_by_type) == pytest.approx({"Relu": 0.010, "Cast": 0.0})
    with pytest.raises(ValueError, match="at least one"):
        median_parallelism([])


def test_the_report_sets_both_profiles_side_by_side():
    chain = _figures([("a", "Relu", 0, 10, ()), ("b", "Cast", 10, 20, ("a",))])
    branches = _figures([("a", "Relu", 0, 10, ()), ("b", "Cast", 0, 5, ())])
    report = ProfileReport("tiny", StepProfile("float32", 1.0, [], 0, [], chain),
                           StepProfile("bfloat16", 1.0, [], 0, [], branches), {})
    text = report.to_markdown()
    assert "## Parallelism and the critical path" in text
    assert "| parallelism (op time / span) | 1.00 | 1.50 |" in text
    assert "| casts on the critical path | 1 | 0 |" in text
    figures = report.to_dict()["mixed"]["parallelism"]
    assert figures["parallelism"] == pytest.approx(1.5) and figures["idle_core_ms"] == pytest.approx(0.005)


def test_the_median_parallelism_is_the_median_of_each_steps_ratio():
    # parallelism 1, 2 and 3; the medians of op time (60) over span (20) would say 3
    steps = [_figures([("a", "Relu", 0, 10, ())], cores=3),
             _figures([(name, "Relu", 0, 100, ()) for name in "ab"], cores=3),
             _figures([(name, "Relu", 0, 20, ()) for name in "abc"], cores=3)]
    median = median_parallelism(steps)
    assert (median.op_ms, median.span_ms) == (pytest.approx(0.060), pytest.approx(0.020))
    assert median.parallelism == pytest.approx(2.0)
