"""Whole training steps of candidates (``whole_steps``): what a step computes, the timing, the cache.

Nothing here depends on this machine's speed: the tests check what the steps compute and contain.
"""

import json
import os
import time

import numpy as np
import tensorflow as tf

from slim_mp.graph_pass.placement import Candidate, MeasuringTarget, NoiseRule, whole_steps
from slim_mp.timing import Timed
from slim_mp import timing
from slim_mp.graph_pass.placement import candidate_step
from slim_mp.graph_pass.placement.timing_graphs import load_variables
from slim_mp.graph_pass.placement.candidate_step import StepPool, build_candidate_step
from slim_mp.graph_pass.placement.whole_steps import StepBatch

from .fakes import (CLOSE_CALL, CONFIG, FakeMeasure, FakeSteps, allow_names, conv_chain, copy_of,
                    measured_rewrite, refuse, refuse_steps, small_net)

tf1 = tf.compat.v1


def test_float32_copy_computes_the_same_loss_as_the_original():
    graph, loss, feeds = small_net(dropout=False)
    copy = copy_of(graph, loss)
    with tf1.Session(graph=graph) as session:
        session.run(tf1.global_variables_initializer())
        expected = session.run(loss, feeds)
        values = {s.tensor_name: session.run(graph.get_tensor_by_name(s.tensor_name), feeds) for s in copy.substitutes}
    step = build_candidate_step(copy, CONFIG, Candidate(allow_names(copy)))
    try:
        load_variables(step.session, {read: values[name] for name, read in step.substitutes.items()})
        computed = step.session.run(step.target)[0]
    finally:
        step.session.close()
    np.testing.assert_allclose(computed, expected, rtol=1e-6)


def test_low_candidate_computes_weight_gradients_in_low_precision_and_updates_every_weight():
    # The gradients must reach the trainable substitutes through the low-precision ops (a painted
    # Identity between the variable and its cast once cut them off and the step timed no backward pass).
    graph, loss, _ = small_net()
    copy = copy_of(graph, loss)
    low = build_candidate_step(copy, CONFIG, Candidate(frozenset()))
    low_graph = low.session.graph
    low.session.close()
    filter_gradients = [op for op in low_graph.get_operations() if op.type == "Conv2DBackpropFilter"]
    assert [op.get_attr("T") for op in filter_gradients] == [tf.bfloat16]
    updates = [op for op in low_graph.get_operations() if op.type == "ResourceApplyMomentum"]
    assert len(updates) == sum(s.trainable for s in copy.substitutes)


def test_float32_candidate_has_no_low_precision_op():
    graph, loss, _ = small_net()
    copy = copy_of(graph, loss)
    step = build_candidate_step(copy, CONFIG, Candidate(allow_names(copy)))
    step.session.close()
    assert not [op for op in step.session.graph.get_operations() if op.name.endswith("_bf16")]


def test_time_candidate_steps_returns_one_time_per_candidate():
    graph, loss, _ = small_net()
    copy = copy_of(graph, loss)
    pool = StepPool(copy, CONFIG, MeasuringTarget())
    candidates = [Candidate(frozenset()), Candidate(allow_names(copy)), Candidate(frozenset(), tail_low=True)]
    try:
        times = whole_steps.time_candidate_steps(pool, candidates, NoiseRule(), whole_steps.StepRounds(3))
        assert len(times) == 3 and all(t is not None and t.ms > 0 and t.noise >= 0 for t in times)
        assert times[0].noise == 0.0, "the reference step has no noise against itself"
        static_step = pool.step(candidates[0])
        assert static_step.run is not None, "warmed up, through the callable the timing runs"
        whole_steps.time_candidate_steps(pool, candidates[:1], NoiseRule(), whole_steps.StepRounds(3))
        assert pool.step(Candidate(frozenset(), found_as=("another label",))) is static_step, "built once"
        pool.keep_only(candidates[:1])
        assert pool.step(candidates[1]) is not None and not static_step.session._closed
    finally:
        pool.close()
    assert static_step.session._closed


def test_an_inference_target_times_the_forward_step_only():
    from slim_mp.graph_pass.placement import MeasuringTarget

    graph, loss, _ = small_net(dropout=False)
    copy = copy_of(graph, loss)
    for training, expect_updates in ((True, True), (False, False)):
        step = build_candidate_step(copy, CONFIG, Candidate(frozenset()), MeasuringTarget(training=training))
        types = {op.type for op in step.session.graph.get_operations()}
        step.session.close()
        assert ("ResourceApplyMomentum" in types) is expect_updates
        assert any(t.endswith("Grad") or "Backprop" in t for t in types) is expect_updates


def test_a_frozen_weights_step_holds_its_weights_as_constants_stored_low_as_the_served_graph_does():
    graph, loss, _ = small_net(dropout=False)
    copy = copy_of(graph, loss)
    run = {}
    for frozen in (False, True):
        step = build_candidate_step(copy, CONFIG, Candidate(frozenset()),
                                    MeasuringTarget(training=False, frozen_weights=frozen), warmup=1)
        assert step.run is not None, "the step runs"
        step.session.close()
        weights = {step.substitutes[s.tensor_name].op.name for s in copy.substitutes if not s.is_input}
        nodes = tf1.graph_util.extract_sub_graph(step.session.graph.as_graph_def(), [step.target.op.name]).node
        run[frozen] = {
            "weight reads": [node.name for node in nodes if node.name in weights],
            "weight casts": [node.name for node in nodes if node.op == "Cast" and node.input[0] in weights],
            "bfloat16 constants": [node.name for node in nodes if node.op == "Const"
                                   and node.attr["dtype"].type == tf.bfloat16.as_datatype_enum]}
    assert len(run[False]["weight reads"]) == len(weights) and run[False]["weight casts"]
    assert not run[False]["bfloat16 constants"], "an evaluation step reads variables and casts them"
    assert not run[True]["weight reads"] and not run[True]["weight casts"]
    assert len(run[True]["bfloat16 constants"]) == len(run[False]["weight casts"]), "each low weight stored low"


def test_timed_steps_are_cached(tmp_path):
    steps = FakeSteps(lambda candidate: 9.0 - len(candidate.float32_ops))
    first = measured_rewrite(conv_chain(3)[1], tmp_path, FakeMeasure(CLOSE_CALL), measure_steps=steps)
    again = measured_rewrite(conv_chain(3)[1], tmp_path, refuse, measure_steps=refuse_steps)
    assert len(steps.asked) == 1
    assert again.placement.float32_ops == first.placement.float32_ops


def test_the_search_and_the_check_batches_are_cached_apart_under_their_old_keys(tmp_path):
    # Estimates too close to call: the search times its shortlist, then the check times the choice again.
    # The low steps' noise (20%) keeps the check from reusing the search's rounds.
    measured_rewrite(conv_chain(3)[1], tmp_path, FakeMeasure(CLOSE_CALL), measure_steps=FakeSteps(
        lambda candidate: Timed(5.0 + len(candidate.float32_ops), 0.0 if candidate.float32_ops else 0.2)))
    (name,) = os.listdir(tmp_path / "cache")
    stored = json.load(open(tmp_path / "cache" / name))["timings"]
    batches = {key.split("|")[0] for key, value in stored.items() if len(value) == 2}
    assert batches == {StepBatch.COMPARE.value, StepBatch.CHECK.value} == {"step", "check"}


def test_whole_step_rounds_go_on_for_all_until_every_verdict_against_the_reference_is_settled():
    still_open = whole_steps.until_settled(NoiseRule(floor=0.01, settle_factor=2.0, settle_step_runs=5), reference=1)
    assert still_open([[6.0] * 5, [10.0] * 5, [13.0] * 5]) == [], "a clear win and a clear loss"
    assert still_open([[6.0] * 4, [10.0] * 4, [13.0] * 4]) == [0, 1, 2], "not before settle_step_runs rounds"
    assert still_open([[6.0] * 5, [10.0] * 5, [9.9] * 5]) == [0, 1, 2], "1% apart: not settled"
    assert still_open([[6.0] * 5, [], [9.9] * 5]) == [0, 1, 2], "a reference that did not run settles nothing"


def test_with_the_machine_noise_a_verdict_clear_in_every_round_settles_from_the_second():
    rule = NoiseRule(floor=0.01, clear_factor=4.0, settle_step_runs=7)
    still_open = whole_steps.until_settled(rule, reference=1, machine_noise=0.05)
    assert still_open([[6.0, 6.1], [10.0, 10.2]]) == [], "every round 39% or more apart: beyond 4 x 5%"
    assert still_open([[6.0, 8.5], [10.0, 10.2]]) == [0, 1], "one round only 15% apart"
    assert whole_steps.until_settled(rule, reference=1)([[6.0, 6.1], [10.0, 10.2]]) == [0, 1], (
        "without a machine noise, no verdict before settle_step_runs rounds")


def test_a_step_whose_warm_up_fails_is_opened_without_its_callable():
    from slim_mp.graph_pass.placement.candidate_step import _opened, _StepGraph
    from slim_mp.graph_pass.placement.timing_graphs import variable_of, variables_initializer

    graph = tf.Graph()
    with graph.as_default():
        read = variable_of(tf.constant([-1.0]))
        target = tf.debugging.check_numerics(tf.math.log(read), "log of a negative")
        init = variables_initializer()
    step = _opened(_StepGraph(graph, target, {}, init), MeasuringTarget(), warmup=1)
    try:
        assert step.run is None
        np.testing.assert_array_equal(step.session.run(read), [-1.0]), "initialised all the same"
    finally:
        step.session.close()


def test_a_step_built_ahead_is_not_built_again_and_is_done_before_any_round(monkeypatch):
    from slim_mp.graph_pass.placement import candidate_step

    built = []
    real_step_graph = candidate_step._step_graph
    monkeypatch.setattr(candidate_step, "_step_graph",
                        lambda *args: built.append(args[2]) or real_step_graph(*args))
    graph, loss, _ = small_net()
    copy = copy_of(graph, loss)
    pool = StepPool(copy, CONFIG, MeasuringTarget())
    float32 = Candidate(allow_names(copy))
    try:
        pool.build_ahead([float32])
        pool.wait_idle()
        assert built == [float32], "built in the background, and done once wait_idle returns"
        times = whole_steps.time_candidate_steps(pool, [Candidate(frozenset()), float32], NoiseRule(),
                                                 whole_steps.StepRounds(3))
        assert all(t is not None for t in times)
        assert built == [float32, Candidate(frozenset())], "the one built ahead was not built again"
    finally:
        pool.close()


def test_steps_are_kept_by_candidate_and_the_gradient_kernels_of_their_low_ops(monkeypatch):
    # The all-float32 step is built ahead, before the kernels are chosen: the decision's kernels ask for the same
    # step (it lowers none of their ops); a low step with kernels is another step than one without.
    from slim_mp.graph_pass.gradient_kernels import GradientKernels

    built = []
    real_step_graph = candidate_step._step_graph
    monkeypatch.setattr(candidate_step, "_step_graph",
                        lambda *args: built.append((args[2], args[5])) or real_step_graph(*args))
    graph, loss, _ = small_net()
    copy = copy_of(graph, loss)
    pool = StepPool(copy, CONFIG, MeasuringTarget())
    float32, low = Candidate(allow_names(copy)), Candidate(frozenset())
    kernels = GradientKernels.by_role({"conv/Conv2D": {"filter": "float32"}})
    assert "conv/Conv2D" in allow_names(copy)
    try:
        pool.build_ahead([float32])
        assert pool.step(float32, kernels) is pool.step(float32)
        with_kernels = pool.step(low, kernels)
        assert pool.step(low) is not with_kernels and pool.step(low, kernels) is with_kernels
        assert built == [(float32, GradientKernels()), (low, kernels), (low, GradientKernels())]
    finally:
        pool.close()


def test_a_step_built_ahead_opens_before_the_others_are_built(monkeypatch):
    # So that its opening (TensorFlow's work, in the background) overlaps their building (Python's).
    opened_when_built = []
    real_step_graph = candidate_step._step_graph
    graph, loss, _ = small_net()
    copy = copy_of(graph, loss)
    pool = StepPool(copy, CONFIG, MeasuringTarget())
    float32, low = Candidate(allow_names(copy)), Candidate(frozenset())
    monkeypatch.setattr(candidate_step, "_step_graph",
                        lambda *args: opened_when_built.append(float32 in [key[0] for key in pool._steps])
                        or real_step_graph(*args))
    try:
        pool.build_ahead([float32])
        pool.wait_idle()
        pool.start([low, float32])
        assert opened_when_built == [False, True], "the second build (low's) came after float32's opening started"
    finally:
        pool.close()


def test_no_round_is_timed_while_a_step_opened_ahead_of_its_batch_still_opens(monkeypatch):
    # The check's all-float32 step opens while the search runs; a batch timed meanwhile without it
    # must wait for that opening before its first round.
    events, openings = [], []
    real_opened, real_run_ms = candidate_step._opened, timing.run_ms

    def slow_opened(built, target, warmup):
        openings.append(built)
        time.sleep(1.5 if len(openings) == 1 else 0.0)  # the first opening (float32's) outlasts the second
        step = real_opened(built, target, warmup)
        events.append("opened")
        return step

    monkeypatch.setattr(candidate_step, "_opened", slow_opened)
    monkeypatch.setattr(timing, "run_ms", lambda run: events.append("round") or real_run_ms(run))
    graph, loss, _ = small_net()
    copy = copy_of(graph, loss)
    pool = StepPool(copy, CONFIG, MeasuringTarget())
    try:
        pool.start([Candidate(allow_names(copy))])
        times = whole_steps.time_candidate_steps(pool, [Candidate(frozenset())], NoiseRule(),
                                                 whole_steps.StepRounds(2))
        assert times[0] is not None
        assert events.count("opened") == 2 and events.index("round") > max(
            i for i, kind in enumerate(events) if kind == "opened"), events
    finally:
        pool.close()


def test_the_searchs_rounds_may_settle_from_the_third_the_checks_not_before_settle_step_runs():
    rule = NoiseRule(floor=0.01, settle_factor=2.0, settle_step_runs=7)
    apart = [[6.0] * 3, [10.0] * 3]
    assert whole_steps.until_settled(rule, reference=1)(apart) == [0, 1], "the check: not before round 7"
    assert whole_steps.until_settled(rule, reference=1, min_rounds=3)(apart) == [], "the search: from round 3"
