"""Profile the training step that ``train_image_classifier.py`` would run, in float32 and in mixed precision.

The step is built by the training script's own graph builder from a ``TrainConfig`` (same model,
data, input pipeline, optimizer, loss scaling and placement), run in a session configured as
training configures it, and profiled with ``step_profile``. Both steps are built first and then
run taking turns, step by step, so that load from other processes falls on both alike. Nothing
is written to the user's ``--train_dir``: each configuration gets a scratch one under the output
folder (where a measured placement keeps its ``placement.json``).
"""

import contextlib
import dataclasses
import os
from typing import Callable, Iterator, Optional, Tuple

import tensorflow as tf

from slim_mp.distribute import ClusterLayout
from slim_mp.measure.profiling.step_profile import StepProfile, profile_interleaved
from slim_mp.training import (TrainConfig, build_train_graph, check_train_config, out_of_memory_named,
                              train_step_settings)

tf1 = tf.compat.v1


@dataclasses.dataclass(frozen=True)
class ProfileSteps:
    """How many steps each configuration runs: warm-up, untraced (wall time), traced (op times)."""

    warmup: int = 3
    timed: int = 5
    traced: int = 3


def with_precision(config: TrainConfig, precision: str, scratch_dir: str) -> TrainConfig:
    """``config`` computing in ``precision``, with a scratch ``train_dir`` and no step limit checks."""
    options = dataclasses.replace(config.precision_options, precision=precision)
    return dataclasses.replace(config, precision_options=options, train_dir=os.path.join(scratch_dir, precision))


@contextlib.contextmanager
def opened_train_step(config: TrainConfig) -> Iterator[Tuple[tf1.Session, tf.Tensor, str]]:
    """Build ``config``'s training graph (one process, no cluster).

    Returns its initialised session, the step's fetch and its label.
    """
    layout = ClusterLayout()
    os.makedirs(config.train_dir, exist_ok=True)
    built = build_train_graph(config, layout)
    label = config.precision_options.precision
    with built.graph.as_default():
        session_config = layout.session_config()
        with tf1.Session(graph=built.graph, config=session_config) as session:
            session.run(built.session_ops.global_init)
            session.run(built.session_ops.local_init)
            if built.input_feed is not None:
                built.input_feed.initialize(session)
            yield session, built.progress["loss"], label


def profile_both(config: TrainConfig, scratch_dir: str, steps: ProfileSteps = ProfileSteps(),
                 progress: Optional[Callable[[str], None]] = None) -> Tuple[StepProfile, StepProfile]:
    """The float32 profile and the mixed-precision one of ``config`` (whose precision must be low).

    Raises:
        ValueError: ``config`` asks for float32 (there is nothing to compare), or an option training
            refuses (the same check, naming the flag).
    """
    check_train_config(config)
    precision = config.precision_options.precision
    if precision == "float32":
        raise ValueError("--precision=float32 has nothing to compare against; pass --precision=bfloat16 or float16.")
    with contextlib.ExitStack() as stack:
        stack.enter_context(out_of_memory_named(train_step_settings(config)))
        opened = [stack.enter_context(opened_train_step(with_precision(config, name, scratch_dir)))
                  for name in ("float32", precision)]
        if progress:
            progress(f"float32 and {precision} taking turns: {steps.traced} traced steps each after "
                     f"{steps.warmup + steps.timed} untraced")
        reference, mixed = profile_interleaved(opened, traced_steps=steps.traced, timed_steps=steps.timed,
                                               warmup_steps=steps.warmup)
    return reference, mixed
