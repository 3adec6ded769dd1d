"""What makes a training loop safe to run, in pieces any loop can take: our loop and a user's, through their seams.

Every loop runs the same watched step (``step_watch``: capture the batch, run with the diagnosis,
divergence, after-step, throughput, the progress line), built from the pieces in the order a step
meets them: the non-finite watch (``nonfinite_watch``), progress lines (``progress``), SIGTERM
(``preemption``), and divergence as one error (``divergence_report``). A user's loop takes it
through the ecosystem's own seams: the step function of ``slim.learning.train`` (``slim_step``, its
``train_step``) and a ``SessionRunHook`` for ``MonitoredTrainingSession`` (``session_hooks``). Our
loop (``slim_mp.training.loop``) is a schedule of summaries, logs and saves around the same step.

Rank 3: imports only ``loss_scale`` and ``numerics`` (and rank 0), never the training application
(which imports the ``nets`` zoo), so ``import slim_mp`` exports the seams without it.
"""

from slim_mp.seams.preemption import EXIT_TERMINATED, SigtermStop, Terminated, sigterm_as_interrupt
from slim_mp.seams.session_hooks import TrainStepHook, reporting_divergence
from slim_mp.seams.slim_step import train_step
from slim_mp.seams.step_watch import StepWatch, step_watch

__all__ = [
    "EXIT_TERMINATED", "SigtermStop", "Terminated", "sigterm_as_interrupt", "TrainStepHook", "reporting_divergence",
    "train_step", "StepWatch", "step_watch",
]
