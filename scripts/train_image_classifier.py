"""Train a TF-Slim network on a dataset, in float32 or mixed precision (float16 / bfloat16).

    python scripts/train_image_classifier.py --train_dir=runs/lenet --dataset_name=fashion_mnist \
        --model_name=lenet --max_number_of_steps=1000 --precision=bfloat16

Every flag of TF-Slim's original ``train_image_classifier.py`` keeps its name, default and
meaning; ``--precision``, ``--loss_scale*`` and ``--mp_*`` are new. Without the cluster flags, a task
started by a cluster manager takes its cluster from ``TF_CONFIG`` (Kubeflow's TFJob, Vertex AI,
SageMaker) or, with ``--num_ps_tasks``, from Slurm's ``srun`` (docs/operations.md). Bad input prints
one ``error: ...`` line and exits with status 2 (``--verbose`` adds the traceback).
"""

import quiet_tensorflow_start  # noqa: F401  (first: TensorFlow loads without its start-up notices on screen)

import os

from slim_mp.distribute import WORKER_JOB, cluster_from_environment
from slim_mp.training import cli, train
from slim_mp.training.train_config import TrainConfig, check_command_line_config

cli.define_flags(TrainConfig)


def main() -> None:
    """Train with the options given on the command line."""
    config = cluster_from_environment(cli.config_from_flags(TrainConfig), os.environ, WORKER_JOB)
    check_command_line_config(config)
    train(config)


if __name__ == "__main__":
    cli.run(main)
