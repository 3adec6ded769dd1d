"""When our training loop summarises, logs and saves around the one watched step of every loop.

The step itself (capture, run with the diagnosis, divergence, after-step, throughput, the progress
line) is ``slim_mp.seams.step_watch``, the same one ``slim_mp.train_step`` and ``TrainStepHook`` run;
``StepSchedule`` is what our loop adds around it, as ``slim.learning.train`` is a schedule around its
``train_step_fn``: TensorBoard summaries every ``--save_summaries_secs`` (from the first step on),
a progress line every ``--log_every_n_steps`` steps and after the last, and on the chief a
checkpoint every ``--save_interval_secs``.

Leaves alone: how a checkpoint is written (``slim_mp.train_dir``) and the saves on the way out (``loop``).
"""

import dataclasses
import time
from typing import Callable, Dict, Optional

import tensorflow as tf

from slim_mp.seams import StepWatch
from slim_mp.training.train_config import TrainConfig

tf1 = tf.compat.v1

# Called after every train step with that step's progress values (step, loss, learning_rate, loss_scale, skipped).
StepCallback = Callable[[Dict[str, float]], None]


@dataclasses.dataclass
class StepSchedule:
    """What our loop does between watched steps, and when; only the chief (``writer`` set) writes summaries.

    ``save`` writes a checkpoint of the given step (the chief's atomic save; None on other workers);
    ``step`` is the global step after the last step run (the loop sets the one it starts from).
    """

    config: TrainConfig
    writer: Optional[tf1.summary.FileWriter]
    save: Optional[Callable[[int], str]]
    print_line: Callable[[str], None]
    on_step: Optional[StepCallback] = None
    step: int = 0
    _last_save: float = dataclasses.field(default_factory=time.monotonic)
    _last_summary: float = -float("inf")  # summaries from the first step on
    _summary_due: bool = False
    _step_started: float = 0.0
    steps_run: int = 0  # the steps this run has taken

    def continues(self) -> bool:
        """True until the global step reaches ``--max_number_of_steps`` (never without one)."""
        return self.config.max_number_of_steps is None or self.step < self.config.max_number_of_steps

    def fetches(self, progress: Dict[str, tf.Tensor], summary_op: Optional[tf.Tensor]) -> Dict[str, tf.Tensor]:
        """What the next step's run fetches: the progress tensors, and the summaries when they are due."""
        self._step_started = time.monotonic()
        self._summary_due = (self.writer is not None
                             and self._step_started - self._last_summary >= self.config.save_summaries_secs)
        return dict(progress, summary=summary_op) if self._summary_due else progress

    def step_done(self, watch: StepWatch, values: Dict) -> None:
        """After a step: its values to ``on_step``, its summaries, the progress line and the checkpoint when due."""
        self.steps_run += 1
        self.step = int(values["step"])
        if self.on_step is not None:
            self.on_step(dict(watch.stage.last_values))
        if self._summary_due:
            self.writer.add_summary(values["summary"], self.step)
            self._last_summary = self._step_started
        if self.steps_run % self.config.log_every_n_steps == 0:
            self.print_line(watch.progress_line())
        if self.save is not None and time.monotonic() - self._last_save >= self.config.save_interval_secs:
            self.save(self.step)
            self._last_save = time.monotonic()

    def finish(self, watch: StepWatch) -> None:
        """After the last step: its progress line, unless the schedule just printed it."""
        if self.steps_run and self.steps_run % self.config.log_every_n_steps != 0:
            self.print_line(watch.progress_line())
