"""Time to accuracy: float32 and mixed precision trained side by side, taking turns, evaluated every N steps.

Both precisions start from one float32 checkpoint and read the same batches (one seed). Each has
its own graph and session in this process; they take turns of ``--chunk_steps`` steps, so both run
on the same machine in the same state (a job starting beside them slows both alike), each going
first every other turn (``slim_mp.timing``'s ``RoundOrder.ALTERNATE``). A lane's clock
counts only its own train steps: the graph build (with the measured placement's timing, reported
apart), checkpoint saves and evaluations stop it. Every ``--eval_every_n_steps`` steps each lane
saves and is evaluated on the held-out split, giving top-1 against the lane's train seconds.
"""

import dataclasses
import glob
import itertools
import os
import time
from typing import Dict, List, Optional, Tuple

import tensorflow as tf

from slim_mp.config_fields import option
from slim_mp.datasets import DatasetSpec
from slim_mp.devices import detect_device
from slim_mp.timing import RoundOrder, run_ms
from slim_mp.measure.parity.run_configs import (MS_PER_SECOND, PrintLine, evaluate_run, lowered_allow_ops,
                                                run_train_config, write_initial_checkpoint)
from slim_mp.measure.parity.run_settings import (REFERENCE_PRECISION, RunSettings, check_positive, check_run_settings,
                                                run_step_settings)
from slim_mp.training import (TrainGraph, TrainingSession, build_train_graph, cluster_layout, out_of_memory_named,
                              prepare_output_dir, start_session)

tf1 = tf.compat.v1

CHECKPOINT_PREFIX = "model.ckpt"
PAUSE_POLL_SECONDS = 10


@dataclasses.dataclass(frozen=True)
class TimeToAccuracyConfig(RunSettings):
    """Both precisions side by side on one network: the shared run settings, the seed, the turns and evaluations."""

    seed: int = option(0, "Seed of the initial weights and of the batches, the same for both precisions.")
    chunk_steps: int = option(50, "Steps one precision runs before the other takes its turn.")
    eval_every_n_steps: int = option(
        200, "Evaluate both precisions on the held-out split every this many steps (a multiple of --chunk_steps)."
    )
    output_dir: str = option("runs/time_to_accuracy", "Where results and runs are written.")
    pause_file: Optional[str] = option(
        None, "On a shared machine: before each turn and each evaluation, wait while this file exists (another "
        "job's quiet period); the clocks do not run meanwhile."
    )

    @property
    def steps_before_first_evaluation(self) -> int:
        """The first evaluation comes after ``eval_every_n_steps``: batch norm's averages must be usable there."""
        return min(self.eval_every_n_steps, self.steps)


@dataclasses.dataclass(frozen=True)
class EvalPoint:
    """One evaluation of one lane: after ``step`` steps and ``train_seconds`` of its own training."""

    step: int
    train_seconds: float
    accuracy: float
    eval_loss: float


@dataclasses.dataclass(frozen=True)
class LaneRecord:
    """What one precision did: its graph build time, its evaluations, and the conv/matmul ops it ran low."""

    precision: str
    build_seconds: float
    points: Tuple[EvalPoint, ...]
    low_allow_ops: Optional[int]
    allow_ops: Optional[int]


@dataclasses.dataclass(frozen=True)
class TimeToAccuracyResult:
    """A finished side-by-side run: its options, the device (``DeviceInfo.describe``), the split, each lane."""

    config: TimeToAccuracyConfig
    device: str
    eval_split: str
    lanes: Dict[str, LaneRecord]


@dataclasses.dataclass
class _Lane:
    """One precision's training while it runs: graph, session, saver, and its own clock."""

    precision: str
    train_dir: str
    built: TrainGraph
    started: TrainingSession
    build_seconds: float
    train_seconds: float = 0.0
    step: int = 0
    points: List[EvalPoint] = dataclasses.field(default_factory=list)

    def run_steps(self, count: int) -> None:
        """Run ``count`` train steps on the lane's clock."""
        last = {}

        def steps() -> None:
            for _ in range(count):
                last.update(self.started.session.run(self.built.progress))

        self.train_seconds += run_ms(steps) / MS_PER_SECOND
        self.step = int(last["step"])

    def save(self) -> str:
        """Save the weights at the current step (off the clock); return the checkpoint."""
        with self.built.graph.as_default():  # outside its graph, a Saver would save eagerly
            return self.built.saver.save(self.started.session, os.path.join(self.train_dir, CHECKPOINT_PREFIX),
                                         global_step=self.step, write_meta_graph=False)

    def record(self) -> LaneRecord:
        """The lane as a plain record."""
        low, seen = ((None, None) if self.precision == REFERENCE_PRECISION
                     else lowered_allow_ops(self.built.rewrite_reports))
        return LaneRecord(self.precision, self.build_seconds, tuple(self.points), low, seen)


def check_time_to_accuracy_config(config: TimeToAccuracyConfig) -> Tuple[DatasetSpec, str]:
    """Raise ValueError naming the flag at fault before any training starts; return the train set and eval split."""
    train_set, split_name = check_run_settings(config)
    for flag in ("chunk_steps", "eval_every_n_steps"):
        check_positive(flag, getattr(config, flag))
    if config.eval_every_n_steps % config.chunk_steps:
        raise ValueError(f"--eval_every_n_steps={config.eval_every_n_steps} is not a multiple of --chunk_steps="
                         f"{config.chunk_steps}; evaluations happen between turns: pass e.g. "
                         f"--eval_every_n_steps={4 * config.chunk_steps}.")
    if config.seed < 0:
        raise ValueError(f"--seed={config.seed} must be a non-negative integer; pass e.g. --seed 0.")
    prepare_output_dir(config.output_dir, "output_dir")
    if os.listdir(config.output_dir):
        raise ValueError(f"--output_dir={config.output_dir} is not empty (an earlier run?); pass a new --output_dir "
                         "or empty that folder.")
    return train_set, split_name


def _start_lane(config: TimeToAccuracyConfig, train_set: DatasetSpec, precision: str, initial: str) -> _Lane:
    """Build ``precision``'s graph (the placement measures here, off the clock); start its session from ``initial``."""
    train_dir = os.path.join(config.output_dir, precision)
    prepare_output_dir(train_dir, "output_dir")
    train_config = run_train_config(config, train_set, config.seed, precision, train_dir, config.steps, initial)
    built_at = {}
    build_ms = run_ms(lambda: built_at.update(graph=build_train_graph(train_config, cluster_layout(train_config))))
    built = built_at["graph"]
    with built.graph.as_default():

        def initialise(session: tf1.Session) -> None:
            session.run(built.session_ops.global_init)
            built.init_fn(session)

        started = start_session(built.session_ops, True, "", None, initialise)
    if built.input_feed is not None:
        built.input_feed.initialize(started.session)
    return _Lane(precision, train_dir, built, started, build_ms / MS_PER_SECOND)


def _evaluate(config: TimeToAccuracyConfig, lane: _Lane, split_name: str, print_line: PrintLine) -> None:
    """Save and evaluate ``lane`` at its step; only the final checkpoint is kept (earlier ones would fill the disk)."""
    checkpoint = lane.save()
    metrics = evaluate_run(config, checkpoint, os.path.join(lane.train_dir, f"eval_{lane.step}"), split_name,
                           lane.precision, print_line=lambda line: None)
    if lane.step < config.steps:
        for path in glob.glob(checkpoint + ".*"):
            os.remove(path)
    lane.points.append(EvalPoint(lane.step, lane.train_seconds, float(metrics["accuracy"]), float(metrics["loss"])))
    print_line(f"{lane.precision}: step {lane.step}, {lane.train_seconds:.1f} s of training, "
               f"top-1 {lane.points[-1].accuracy:.4f}")


def _wait_while_paused(config: TimeToAccuracyConfig) -> None:
    """Return once ``config.pause_file`` does not exist (at once when it is unset)."""
    while config.pause_file and os.path.exists(config.pause_file):
        time.sleep(PAUSE_POLL_SECONDS)


def run_time_to_accuracy(config: TimeToAccuracyConfig, print_line: PrintLine = print) -> TimeToAccuracyResult:
    """Check ``config``, then train both precisions in turns of ``chunk_steps``, evaluating each as it goes."""
    train_set, split_name = check_time_to_accuracy_config(config)
    initial = write_initial_checkpoint(config, train_set, config.seed, os.path.join(config.output_dir, "initial"))
    lanes = []
    with out_of_memory_named(run_step_settings(config)):
        try:
            for precision in config.precisions:
                lanes.append(_start_lane(config, train_set, precision, initial))
                print_line(f"{precision}: graph built in {lanes[-1].build_seconds:.1f} s")
            for turn in itertools.count():
                if lanes[0].step >= config.steps:
                    break
                for index in RoundOrder.ALTERNATE.arrange(range(len(lanes)), turn):  # each goes first every other turn
                    _wait_while_paused(config)
                    lanes[index].run_steps(min(config.chunk_steps, config.steps - lanes[index].step))
                if lanes[0].step % config.eval_every_n_steps == 0 or lanes[0].step == config.steps:
                    for lane in lanes:
                        _wait_while_paused(config)
                        _evaluate(config, lane, split_name, print_line)
        finally:
            for lane in lanes:
                lane.started.close()
    return TimeToAccuracyResult(config, detect_device().describe(), split_name,
                                {lane.precision: lane.record() for lane in lanes})
