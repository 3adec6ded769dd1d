"""Try distributed training on one machine: parameter servers and workers as processes on loopback ports.

    python scripts/launch_local_cluster.py --num_ps=1 --num_workers=2 -- \
        --train_dir=runs/cluster --dataset_name=fashion_mnist --model_name=lenet \
        --precision=bfloat16 --sync_replicas --replicas_to_aggregate=2 --max_number_of_steps=200

Everything after ``--`` goes to ``train_image_classifier.py``; the launcher adds ``--ps_hosts``,
``--worker_hosts``, ``--task``, ``--num_ps_tasks`` and ``--worker_replicas``. Output lines carry a
``[ps 0]`` / ``[worker 1]`` prefix. When the chief (worker 0) finishes, or a worker fails, every
process is stopped and the launcher exits with that status. Ctrl-C (SIGINT) or SIGTERM to the
launcher is forwarded to the chief first, which saves the current step and exits, then to the other
tasks; a line per task says how it ended, and the launcher exits 130 (SIGINT) or 143 (SIGTERM).
"""

import quiet_tensorflow_start  # noqa: F401  (first: TensorFlow loads without its start-up notices on screen)

import os
import sys

from absl import flags

from slim_mp.distribute.local_cluster import LocalCluster, check_train_args, python_command
from slim_mp.training import cli
from slim_mp.seams import Terminated, sigterm_as_interrupt

SCRIPTS = os.path.dirname(os.path.abspath(__file__))

flags.DEFINE_integer("num_ps", 1, "Number of parameter-server processes.")
flags.DEFINE_integer("num_workers", 2, "Number of worker processes (worker 0 is the chief).")
flags.DEFINE_float("timeout_secs", None, "Stop everything if the chief has not finished after this long.")
FLAGS = flags.FLAGS


def main(train_args: list) -> None:
    """Start the cluster, stream its output, and exit with the chief's status."""
    check_train_args(train_args)
    cluster = LocalCluster(
        python_command(os.path.join(SCRIPTS, "parameter_server.py")),
        python_command(os.path.join(SCRIPTS, "train_image_classifier.py"), train_args),
        FLAGS.num_ps, FLAGS.num_workers,
    )
    print(f"[launcher] ps {','.join(cluster.ps_hosts)}; workers {','.join(cluster.worker_hosts)}", flush=True)
    # The tasks run in their own sessions, so a signal reaches only the launcher, which forwards it in order.
    with sigterm_as_interrupt():
        try:
            cluster.start()
            code = cluster.wait_for_chief(FLAGS.timeout_secs)
        except TimeoutError as error:
            raise ValueError(f"{error} Raise --timeout_secs or lower --max_number_of_steps.") from error
        except Terminated:
            raise Terminated(
                "terminated by SIGTERM; forwarded to the chief (which saves the current step), then to the other "
                "tasks; rerun the same command to resume"
            ) from None
        finally:
            cluster.stop()
    how = f"status {code}" if code >= 0 else f"signal {-code}"
    print(f"[launcher] the chief exited with {how}; all processes stopped", flush=True)
    sys.exit(code if code >= 0 else 128 - code)


if __name__ == "__main__":
    cli.run(main, takes_arguments=True)
