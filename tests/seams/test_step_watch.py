"""The one watched step every loop runs (``StepWatch``), called directly as a plain ``Session`` loop would.

The model (``tiny_model``) at a loss scale of 1e30 skips every step (the scaled float16 gradients
overflow), so the global step stays 0 and every run takes step 1; the guard fires at the third skip.
"""

import re

import pytest
import tensorflow as tf

import slim_mp
import tiny_model
from slim_mp.seams import step_watch

tf1 = tf.compat.v1


def _initialized_session() -> tf1.Session:
    session = tf1.Session()
    session.run([tf1.global_variables_initializer(), tf1.local_variables_initializer()])
    return session


def test_a_skip_warning_and_the_divergence_sentence_name_the_same_step(logged):
    with tf.Graph().as_default() as graph:
        train_op, global_step = tiny_model.build(learning_rate=0.01, loss_scale=1e30, skips=3)
        watch = step_watch(graph, global_step)
        with _initialized_session() as session:
            for _ in range(2):
                values = watch.step(session, {"loss": train_op})
                assert int(values["step"]) == 0 and int(values["skipped"]) == len(
                    [line for line in logged if "was skipped" in line])
            with pytest.raises(slim_mp.TrainingDivergedError) as raised:
                watch.step(session, {"loss": train_op})
    warned = [re.match(r"step (\d+) was skipped", line) for line in logged]
    assert [int(match.group(1)) for match in warned if match] == [1, 1] and raised.value.step == 1


def test_values_the_run_fetched_are_not_read_again_and_the_line_shows_them(logged):
    with tf.Graph().as_default() as graph:
        train_op, global_step = tiny_model.build(learning_rate=0.01, loss_scale=128.0, debug_nonfinite=False)
        learning_rate = tf.constant(0.01)
        watch = step_watch(graph, global_step, batch_size=tiny_model.BATCH)
        with _initialized_session() as session:
            values = watch.step(session, {"loss": train_op}, read_after={"learning_rate": learning_rate})
    assert set(values) == {"loss", "step", "loss_scale", "skipped", "learning_rate"}
    assert re.fullmatch(r"step=1 loss=\S+ loss_scale=128 skipped=0 lr=0\.01 images/s=\d+", watch.progress_line())


def test_a_graph_has_one_watch_whatever_loop_asks_for_it():
    with tf.Graph().as_default() as graph:
        _, global_step = tiny_model.build(learning_rate=0.01, loss_scale=128.0, debug_nonfinite=False)
        assert step_watch(graph, global_step) is step_watch(graph, global_step)
    with tf.Graph().as_default() as other:
        _, other_step = tiny_model.build(learning_rate=0.01, loss_scale=128.0, debug_nonfinite=False)
        assert step_watch(other, other_step) is not step_watch(graph, global_step)
