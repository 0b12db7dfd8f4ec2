"""This process's side of Ray: actor handles, cloudpickle, the session, a failed node start."""

from __future__ import annotations

from typing import Any


def actor_creation_task(handle: Any) -> str:
    """The id (hex) of the task that runs an actor's ``__init__``, from its handle."""
    from ray._raylet import TaskID

    return str(TaskID.for_actor_creation_task(handle._actor_id).hex())


def actor_id_hex(handle: Any) -> str:
    """An actor's id (hex), from its handle."""
    return str(handle._actor_id.hex())


def actor_class_name(handle: Any) -> str:
    """The name of the class an actor handle was made from."""
    return str(handle._ray_actor_creation_function_descriptor.class_name)


def pickled_by_value(module: Any) -> bool:
    """Whether Ray's cloudpickle ships ``module``'s objects by value (registered so)."""
    try:
        from ray.cloudpickle import cloudpickle as _cp

        return bool(_cp._is_registered_pickle_by_value(module))
    except Exception:  # noqa: BLE001 - an older cloudpickle: only the notebook's own code
        return False


def session_name() -> str | None:
    """The Ray session this process is connected to: a ``ray.init`` after ``ray.shutdown``
    (even at the same address) is another one. None when not connected, or through a
    ``ray://`` client."""
    from ray._private.worker import global_worker

    return getattr(getattr(global_worker, "node", None), "session_name", None)


def in_ray_worker() -> bool:
    """Whether this process is one of Ray's workers (it runs tasks), not a driver."""
    import ray
    from ray._private.worker import global_worker

    return bool(global_worker.mode == ray.WORKER_MODE)  # None until connected


def in_async_actor() -> bool:
    """Whether this worker runs an async actor, where Ray refuses a blocking ``ray.get`` (it
    warns, and would block the actor's event loop)."""
    from ray._private.worker import global_worker

    core = getattr(global_worker, "core_worker", None)
    return bool(core is not None and core.current_actor_is_asyncio())


# What Ray says (it has no code) when a new node ran out of one of its fixed waits: the head's
# raylet did not register within 30 s, or the GCS did not write its port file within 30 s.
_STARTUP_TIMEOUTS = ("timed out during startup", "Timed out waiting for file")


def startup_timed_out(message: str) -> bool:
    """Whether a failed node start only ran out of one of Ray's fixed waits (the raylet's
    registration, the GCS's port file) on a busy machine, so that another try may do: the one
    rule, for the embedded Ray (:func:`stop_failed_start`) and the launched clusters'
    ``ray start``.

    >>> startup_timed_out("The current node timed out during startup. This could happen ...")
    True
    >>> startup_timed_out("Timed out waiting for file /tmp/r/session_1/gcs_server_port_ab12")
    True
    >>> startup_timed_out("Failed to start the GCS: address already in use")
    False
    """
    return any(text in message for text in _STARTUP_TIMEOUTS)


def stop_failed_start(exc: BaseException) -> bool:
    """Stop the processes of a local Ray node whose start raised ``exc``; whether the start
    only ran out of time (:func:`startup_timed_out`), so that one more try may do.

    ``ray.init`` (and ``ray.cluster_utils``) raise from inside ``Node.__init__`` and keep no
    handle: the node's GCS, raylet, dashboard and agents go on running in this process's
    children. The node is found in the traceback's frames, whatever the failure, and its
    processes are killed with all they started (:func:`eugo_jupyter._processes.stop_tree`):
    Ray's own ``kill_all_processes`` stops the raylet but not the dashboard and runtime-env
    agents a starting raylet forks, which, still waiting for the GCS, outlive it for a minute
    or more. Then ``kill_all_processes`` reaps what it holds.
    """
    from ray._private.node import Node

    from .._processes import stop_tree

    traceback = exc.__traceback__
    while traceback is not None:
        node = traceback.tb_frame.f_locals.get("self")
        if isinstance(node, Node):
            started = {
                info.process.pid
                for infos in node.all_processes.values()
                for info in infos
                if info.process is not None
            }
            stop_tree(started)
            node.kill_all_processes(check_alive=False, allow_graceful=False, wait=True)
            return startup_timed_out(str(exc))
        traceback = traceback.tb_next
    return False
