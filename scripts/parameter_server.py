"""Run one parameter server of a TensorFlow cluster for ``train_image_classifier.py`` workers.

    python scripts/parameter_server.py --ps_hosts=10.0.0.1:2222 --worker_hosts=10.0.0.2:2222,10.0.0.3:2222 --task=0

It serves the shared variables until stopped. ``scripts/launch_local_cluster.py`` starts these for
a cluster on one machine. Bad input prints one ``error: ...`` line and exits with status 2.
"""

import quiet_tensorflow_start  # noqa: F401  (first: TensorFlow loads without its start-up notices on screen)

from slim_mp.distribute.cluster import ParameterServerConfig, serve_parameter_server
from slim_mp.training import cli

cli.define_flags(ParameterServerConfig)


def main() -> None:
    """Serve until stopped."""
    serve_parameter_server(cli.config_from_flags(ParameterServerConfig))


if __name__ == "__main__":
    cli.run(main)
