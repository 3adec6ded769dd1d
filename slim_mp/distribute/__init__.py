"""Several devices and machines: model clones, parameter-server clusters, the local cluster launcher.

In the order a distributed step is built: ``cluster`` (where this process sits: job, task, devices,
session target), ``cluster_environment`` (the cluster as ``TF_CONFIG`` or Slurm describe it),
``clones`` (copies of the network sharing one set of variables, their gradients summed),
``train_step`` (one, optionally synchronized, update from the summed gradients), ``worker_fusions``
(grappler's bfloat16 convolution fusions made in the form a worker accepts, once the graph is
complete), ``wire_bytes`` (what a traced step sent between the tasks), and ``local_cluster``
(parameter-server and worker processes on this machine, for tests and trials).

The names other packages use are exported here; code outside ``distribute`` imports them from
``slim_mp.distribute``.
"""

from slim_mp.distribute.clones import (Clone, CloneDevices, create_clones, first_clone_update_ops, optimize_clones,
                                       scope_filter)
from slim_mp.distribute.cluster import (LOST_TASK_ERRORS, PS_JOB, WORKER_JOB, ClusterLayout, lost_task,
                                        make_cluster_layout, session_target)
from slim_mp.distribute.cluster_environment import TF_CONFIG, cluster_from_environment
from slim_mp.distribute.train_step import SyncSettings, build_train_step
from slim_mp.distribute.wire_bytes import (IncompleteTraceError, WireRoute, WireTraffic, task_of, traced_wire_traffic,
                                          wire_traffic)
from slim_mp.distribute.worker_fusions import WorkerFusion, form_worker_fusions

__all__ = [
    "Clone", "CloneDevices", "create_clones", "first_clone_update_ops", "optimize_clones", "scope_filter",
    "LOST_TASK_ERRORS", "PS_JOB", "WORKER_JOB", "ClusterLayout", "lost_task", "make_cluster_layout", "session_target",
    "TF_CONFIG", "cluster_from_environment",
    "SyncSettings", "build_train_step", "WorkerFusion", "form_worker_fusions",
    "IncompleteTraceError", "WireRoute", "WireTraffic", "task_of", "traced_wire_traffic", "wire_traffic",
]
