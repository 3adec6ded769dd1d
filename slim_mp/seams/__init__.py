"""What makes a training loop safe to run, in pieces any loop can take: our loop and a user's, through their seams.

The pieces, in the order a step meets them: per-graph step state (``step_watch``), the non-finite
watch (``nonfinite_watch``), progress lines (``progress``), SIGTERM (``preemption``), and divergence
as one error (``divergence_report``). A user's loop takes them through the ecosystem's own seams: the
step function of ``slim.learning.train`` (``slim_step``, its ``train_step``) and a ``SessionRunHook``
for ``MonitoredTrainingSession`` (``session_hooks``). Our loop (``slim_mp.training.loop``) uses the
same pieces.

Rank 3: imports only ``loss_scale`` and ``numerics`` (and rank 0), never the training application
(which imports the ``nets`` zoo), so ``import slim_mp`` exports the seams without it.
"""

from slim_mp.seams.divergence_report import diverged_error, report_uncaught_divergence
from slim_mp.seams.nonfinite_watch import NonfiniteWatch
from slim_mp.seams.preemption import EXIT_TERMINATED, SigtermStop, Terminated, sigterm_as_interrupt
from slim_mp.seams.progress import Throughput, format_progress, graph_progress_tensors, images_per_step
from slim_mp.seams.session_hooks import TrainStepHook, reporting_divergence
from slim_mp.seams.slim_step import train_step
from slim_mp.seams.step_watch import StepWatch, step_watch

__all__ = [
    "diverged_error", "report_uncaught_divergence", "NonfiniteWatch", "EXIT_TERMINATED", "SigtermStop", "Terminated",
    "sigterm_as_interrupt", "Throughput", "format_progress", "graph_progress_tensors", "images_per_step",
    "TrainStepHook", "reporting_divergence", "train_step", "StepWatch", "step_watch",
]
