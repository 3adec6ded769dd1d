"""Start the training session: the chief restores or initialises the model, the other workers wait for it.

One path serves a single process (target "") and every task of a cluster. The chief restores the
latest checkpoint of ``--train_dir`` (weights, global step, loss-scale state) or initialises and
fine-tunes; other workers wait until the shared variables are ready and then initialise only
their own local state. Local variables that live on a parameter server (the loss-scale skip
counters) are shared by the workers, so only the chief initialises them: a worker that restarts
does not reset them. With synchronous replicas the chief also runs the gradient-aggregation
queue runner.

A chief restarted while the parameter servers and the other workers kept running finds the
synchronous state as its predecessor left it: an aggregation cut short has emptied some gradient
accumulators but not others, and the other workers wait for a token no one will send. The new
chief therefore resynchronises (``ResyncOps``): it empties every accumulator (before setting their
step to the restored global step), drops the tokens left in the queue, and gives each other worker
one fresh token, so all step again from the restored global step. A fresh start (nothing initialised
on the parameter servers yet) skips this.
"""

import dataclasses
import threading
from typing import Callable, List, Optional

import tensorflow as tf
from absl import logging

from slim_mp.distribute import PS_JOB

tf1 = tf.compat.v1

SessionInit = Callable[[tf1.Session], None]
# How often a waiting worker checks whether the chief has initialised the model.
RECOVERY_WAIT_SECS = 1
# How long closing a session may take once a task of the cluster is gone. Closing deregisters the
# session's graphs on every task; with a parameter server gone, that retries until it is back.
LOST_TASK_CLOSE_SECS = 10


@dataclasses.dataclass(frozen=True)
class SessionOps:
    """The init and readiness ops a session start needs; built with the graph, before it is finalized."""

    global_init: tf.Operation
    shared_local_init: tf.Operation
    local_init: tf.Operation
    ready: tf.Tensor
    ready_for_local_init: tf.Tensor
    sync_init: Optional[tf.Operation]
    init_tokens: Optional[tf.Operation]
    chief_queue_runner: Optional[tf1.train.QueueRunner]
    resync: Optional["ResyncOps"] = None


@dataclasses.dataclass(frozen=True)
class ResyncOps:
    """What a restarted chief runs to restart a synchronous job that its predecessor left mid-step.

    ``counts[i]`` is how many gradients accumulator ``i`` holds and ``empty[i]`` takes them all
    (run only where the count is positive: taking from an empty accumulator waits). ``drop_tokens``
    empties the token queue; ``fresh_tokens`` adds one token per other worker, valued at the global step.
    """

    counts: List[tf.Tensor]
    empty: List[tf.Operation]
    drop_tokens: tf.Operation
    fresh_tokens: Optional[tf.Operation]

    def empty_accumulators(self, session: tf1.Session) -> None:
        """Drop the gradients the accumulators hold (taking them advances each accumulator's step by one)."""
        for count, empty in zip(session.run(self.counts), self.empty):
            if count > 0:
                session.run(empty)

    def renew_tokens(self, session: tf1.Session) -> None:
        """Empty the token queue, then release each other worker once, at the (restored) global step."""
        session.run(self.drop_tokens)
        if self.fresh_tokens is not None:
            session.run(self.fresh_tokens)


def _discard(taken) -> tf.Operation:
    """An op that runs ``taken`` (a dense gradient, or the IndexedSlices of a sparse accumulator) and drops it."""
    return tf.group(*(taken.values, taken.indices) if isinstance(taken, tf.IndexedSlices) else (taken,))


def _resync_ops(sync_optimizer: tf1.train.SyncReplicasOptimizer, num_workers: int) -> ResyncOps:
    """Build the ``ResyncOps`` of ``sync_optimizer`` (it has applied its gradients already)."""
    # SyncReplicasOptimizer keeps its accumulators and token queue private; these names are its own.
    accumulators = [
        accumulator for accumulator, _ in sync_optimizer._accumulator_list  # pylint: disable=protected-access
    ]
    queue = sync_optimizer._sync_token_queue  # pylint: disable=protected-access
    with tf.name_scope("resync_after_chief_restart"):
        return ResyncOps(
            counts=[accumulator.num_accumulated() for accumulator in accumulators],
            empty=[_discard(accumulator.take_grad(1)) for accumulator in accumulators],
            drop_tokens=tf.group(queue.dequeue_many(queue.size())),
            fresh_tokens=sync_optimizer.get_init_tokens_op(num_tokens=num_workers - 1) if num_workers > 1 else None,
        )


def _on_parameter_server(variable: tf.Variable) -> bool:
    return tf.DeviceSpec.from_string(variable.device or "").job == PS_JOB


def make_session_ops(is_chief: bool, sync_optimizer: Optional[tf1.train.SyncReplicasOptimizer]) -> SessionOps:
    """Build the session ops of the default graph for the chief or another worker."""
    local = tf1.local_variables()
    shared = [v for v in local if _on_parameter_server(v)]
    own = [v for v in local if not _on_parameter_server(v)]
    sync_init = init_tokens = queue_runner = resync = None
    if sync_optimizer is not None:
        # Replaced by ready_for_local_init below, which also covers the shared local variables.
        sync_optimizer.ready_for_local_init_op.mark_used()
        sync_init = sync_optimizer.chief_init_op if is_chief else sync_optimizer.local_step_init_op
        if is_chief:
            # No initial tokens: every worker waits for the update its gradients went into (lockstep).
            init_tokens = sync_optimizer.get_init_tokens_op(num_tokens=0)
            queue_runner = sync_optimizer.get_chief_queue_runner()
            resync = _resync_ops(sync_optimizer, sync_optimizer._total_num_replicas)  # pylint: disable=protected-access
    ready = tf1.report_uninitialized_variables()
    ready_for_local_init = tf1.report_uninitialized_variables(tf1.global_variables() + shared)
    for report in (ready, ready_for_local_init):
        report.mark_used()  # a check that fails before the session starts leaves them unused, rightly
    return SessionOps(
        global_init=tf1.global_variables_initializer(),
        shared_local_init=tf1.variables_initializer(shared, name="init_shared_local_variables"),
        local_init=tf.group(tf1.variables_initializer(own), tf1.tables_initializer(), name="init_own_local_variables"),
        ready=ready,
        ready_for_local_init=ready_for_local_init,
        sync_init=sync_init,
        init_tokens=init_tokens,
        chief_queue_runner=queue_runner,
        resync=resync,
    )


@dataclasses.dataclass
class TrainingSession:
    """A started session and the chief's background threads; ``close()`` stops both."""

    session: tf1.Session
    coordinator: tf1.train.Coordinator
    threads: List

    def close(self, timeout_secs: Optional[float] = None) -> bool:
        """Stop the threads and close the session; False if ``timeout_secs`` passed first.

        Pass ``timeout_secs`` when a task of the cluster is gone: closing then waits for it for ever
        (it deregisters the session's graphs on every task). A close that times out keeps running in
        a daemon thread, which the process leaves behind when it exits.
        """
        self.coordinator.request_stop()
        if timeout_secs is None:
            self.session.close()
        else:
            closing = threading.Thread(target=self.session.close, name="close-session", daemon=True)
            closing.start()
            closing.join(timeout_secs)
            if closing.is_alive():
                logging.warning("The session did not close within %g s (a task of the cluster is gone); "
                                "leaving it open", timeout_secs)
                return False
        self.coordinator.join(self.threads, stop_grace_period_secs=5, ignore_live_threads=True)
        return True


def start_session(
    ops: SessionOps, is_chief: bool, target: str, config: Optional[tf1.ConfigProto], chief_init: SessionInit
) -> TrainingSession:
    """Create the session: the chief runs ``chief_init`` (restore or initialise); other workers wait for it."""
    manager = tf1.train.SessionManager(
        local_init_op=ops.local_init, ready_op=ops.ready, ready_for_local_init_op=ops.ready_for_local_init,
        recovery_wait_secs=RECOVERY_WAIT_SECS,
    )
    restarted = False
    if is_chief:

        def initialise(session: tf1.Session) -> None:
            nonlocal restarted
            # Shared variables already initialised: the parameter servers outlived the previous chief.
            restarted = ops.resync is not None and session.run(ops.ready_for_local_init).size == 0
            chief_init(session)
            session.run(ops.shared_local_init)

        session = manager.prepare_session(target, init_fn=initialise, config=config)
    else:
        logging.info("Waiting for the chief to initialise the model")
        session = manager.wait_for_session(target, config=config)
    coordinator = tf1.train.Coordinator()
    threads = []
    if restarted:
        logging.info("The parameter servers outlived the previous chief: resynchronising the workers")
        ops.resync.empty_accumulators(session)
    if ops.sync_init is not None:  # after emptying, which advances the accumulators' own step
        session.run(ops.sync_init)
    if ops.init_tokens is not None:
        session.run(ops.init_tokens)
    if restarted:
        ops.resync.renew_tokens(session)
    if ops.chief_queue_runner is not None:
        threads = ops.chief_queue_runner.create_threads(session, coord=coordinator, daemon=True, start=True)
    return TrainingSession(session, coordinator, threads)
