"""The one place that uses Ray's private APIs: cluster state, jobs, tokens, the dashboard.

Everything is read from the GCS by address, so the Jupyter server (which is not a Ray driver)
and a kernel (which is) share the same code. The results are plain data (:class:`Snapshot`).
When Ray renames a private module, this package is what to fix. A leaf module: the token file
(``_raytoken``), ``hpc`` and the server all use it.
"""

from .auth import (
    TOKEN_NOTICE_LOGGER,
    dashboard_auth_headers,
    enable_token_auth,
    keep_every_log_line,
    new_token,
    published_dashboard,
)
from .cluster import (
    Drivers,
    NodeFacts,
    Snapshot,
    drivers,
    has_live_driver,
    held_by_actors,
    snapshot,
)
from .process import (
    actor_class_name,
    actor_creation_task,
    actor_id_hex,
    in_async_actor,
    in_ray_worker,
    pickled_by_value,
    session_name,
    startup_timed_out,
    stop_failed_start,
)
from .tasks import (
    WAITING_STATES,
    TaskEvent,
    TaskEvents,
    TaskStates,
    task_events,
    task_node,
    task_states,
)

__all__ = [
    "Drivers",
    "NodeFacts",
    "Snapshot",
    "TaskEvent",
    "TaskEvents",
    "TaskStates",
    "WAITING_STATES",
    "TOKEN_NOTICE_LOGGER",
    "actor_class_name",
    "actor_creation_task",
    "actor_id_hex",
    "dashboard_auth_headers",
    "drivers",
    "enable_token_auth",
    "has_live_driver",
    "held_by_actors",
    "in_async_actor",
    "in_ray_worker",
    "keep_every_log_line",
    "new_token",
    "pickled_by_value",
    "published_dashboard",
    "session_name",
    "snapshot",
    "startup_timed_out",
    "stop_failed_start",
    "task_events",
    "task_node",
    "task_states",
]
