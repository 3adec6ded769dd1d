"""A parameter server and a worker as servers of this test process, on fresh loopback ports."""

from typing import List, Tuple

import tensorflow as tf

from slim_mp.distribute import PS_JOB, ClusterLayout, make_cluster_layout, session_target
from slim_mp.distribute.local_cluster import LOOPBACK, free_loopback_ports

_SERVERS: List[tf.distribute.Server] = []  # a server stops when collected; these serve until pytest exits


def loopback_cluster() -> Tuple[ClusterLayout, str]:
    """One parameter server (started here) and this process as worker 0: (layout, the worker's session target)."""
    ps_port, worker_port = free_loopback_ports(2)
    layout = make_cluster_layout(task=0, worker_replicas=1, num_ps_tasks=1, ps_hosts=[f"{LOOPBACK}:{ps_port}"],
                                 worker_hosts=[f"{LOOPBACK}:{worker_port}"])
    _SERVERS.append(tf.distribute.Server(layout.cluster_spec(), job_name=PS_JOB, task_index=0, start=True))
    return layout, session_target(layout)
