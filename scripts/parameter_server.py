"""Run one parameter server of a TensorFlow cluster for ``train_image_classifier.py`` workers.

    python scripts/parameter_server.py --ps_hosts=10.0.0.1:2222 --worker_hosts=10.0.0.2:2222,10.0.0.3:2222 --task=0

It serves the shared variables until stopped. ``scripts/launch_local_cluster.py`` starts these for
a cluster on one machine. Without the flags, a task started by a cluster manager takes its cluster
from ``TF_CONFIG`` (Kubeflow's TFJob, Vertex AI, SageMaker) or, with ``--num_ps_tasks``, from
Slurm's ``srun`` (docs/operations.md). Bad input prints one ``error: ...`` line and exits with status 2.
"""

import quiet_tensorflow_start  # noqa: F401  (first: TensorFlow loads without its start-up notices on screen)

import os

from slim_mp.distribute import PS_JOB, cluster_from_environment
from slim_mp.distribute.cluster import ParameterServerConfig, serve_parameter_server
from slim_mp.training import cli

cli.define_flags(ParameterServerConfig)


def main() -> None:
    """Serve until stopped."""
    serve_parameter_server(cluster_from_environment(cli.config_from_flags(ParameterServerConfig), os.environ, PS_JOB))


if __name__ == "__main__":
    cli.run(main)
