"""What makes a training loop safe to run, in pieces any loop can take: our loop and a user's, through their seams.

Every loop runs the same watched step (``step_watch``: capture the batch, run with the diagnosis,
divergence, after-step, throughput, the progress line), built from the pieces in the order a step
meets them: the non-finite watch (``nonfinite_watch``), progress lines (``progress``) and SIGTERM
(``preemption``). A user's loop takes it through the ecosystem's own seams: the step function of
``slim.learning.train`` (``slim_step``, its ``train_step``) and a ``SessionRunHook`` for
``MonitoredTrainingSession`` (``session_hooks``), which find the loop they run in
(``official_loops``) and keep its train dir as our script keeps its own (``train_dir_guard``: the
lock, a damaged checkpoint named); what such a loop lets through ends as one ``error:`` line
(``error_lines``, installed by ``import slim_mp``). Our loop (``slim_mp.training.loop``) is a
schedule of summaries, logs and saves around the same step.

Rank 3: imports only ``loss_scale``, ``numerics``, ``datasets`` and ``train_dir`` (and rank 0), never the training
application (which imports the ``nets`` zoo), so ``import slim_mp`` exports the seams without it.
"""

from slim_mp.seams.error_lines import DATA_ERRORS, install_error_lines, tensorflow_reason
from slim_mp.seams.preemption import EXIT_TERMINATED, SigtermStop, Terminated, sigterm_as_interrupt
from slim_mp.seams.session_hooks import TrainStepHook, reporting_divergence
from slim_mp.seams.slim_step import train_step
from slim_mp.seams.step_watch import StepWatch, step_watch

install_error_lines()

__all__ = [
    "DATA_ERRORS", "tensorflow_reason", "EXIT_TERMINATED", "SigtermStop", "Terminated", "sigterm_as_interrupt",
    "TrainStepHook", "reporting_divergence", "train_step", "StepWatch", "step_watch",
]
