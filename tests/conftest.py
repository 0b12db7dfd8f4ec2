"""Shared fixtures: real Ray clusters on this machine, isolated Jupyter runtime folders.

Connections are module-scoped: a module that needs Ray asks for ``ray_local`` (one node, 2
CPUs) or ``gpu_cluster`` (a head without GPU plus a worker node that *declares* one GPU; declared
resources are scheduling bookkeeping only, no GPU exists here). Only one Ray connection can be
open per process, so each fixture lets go of what it connected to; ``ray_local`` hands its Ray
on instead when the next module asks for ``ray_local`` too. ``gpu_cluster``'s nodes start once
for the modules of a folder that ask for them (they run one after another) and stop before a
module that does not.
"""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

# pytest-jupyter's server fixtures (jp_fetch...) for tests/server. Plugins must be declared here,
# at the top, and are active for every test; tests/ui/conftest.py opts out of its event loop.
pytest_plugins = ("pytest_jupyter.jupyter_server",)


_optimize_cache: dict[str, Any] = {}
_T = TypeVar("_T")


def pytest_configure(config: pytest.Config) -> None:
    """The optimizer's node cache goes to a temporary folder for the whole run, set before
    anything starts (nbval starts the examples' kernels before any fixture runs; Ray workers and
    kernels inherit it): a test never reads or fills the user's own."""
    folder = tempfile.TemporaryDirectory(prefix="eugo-test-optimize-cache-")
    _optimize_cache.update(folder=folder, old=os.environ.get("EUGO_OPTIMIZE_CACHE"))
    os.environ["EUGO_OPTIMIZE_CACHE"] = folder.name
    # Ctrl-C as a user presses it: a run started in the background (`cmd &`) inherits SIGINT
    # ignored, and then `_thread.interrupt_main()` does nothing; the interrupt tests need it.
    # Child processes inherit the handler's reset (default), not the ignore.
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_unconfigure(config: pytest.Config) -> None:
    if "folder" not in _optimize_cache:
        return
    old = _optimize_cache.pop("old")
    if old is None:
        os.environ.pop("EUGO_OPTIMIZE_CACHE", None)
    else:
        os.environ["EUGO_OPTIMIZE_CACHE"] = old
    _optimize_cache.pop("folder").cleanup()


@pytest.fixture(autouse=True, scope="session")
def _isolated_environment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """No address leaks in from the developer's shell; cluster records go to a temp folder."""
    saved = {k: os.environ.pop(k, None) for k in ("RAY_ADDRESS", "EUGO_CLUSTER_ADDRESS")}
    runtime = tmp_path_factory.mktemp("jupyter-runtime")
    old_runtime = os.environ.get("JUPYTER_RUNTIME_DIR")
    os.environ["JUPYTER_RUNTIME_DIR"] = str(runtime)
    yield
    for key, value in saved.items():
        if value is not None:
            os.environ[key] = value
    if old_runtime is None:
        os.environ.pop("JUPYTER_RUNTIME_DIR", None)
    else:
        os.environ["JUPYTER_RUNTIME_DIR"] = old_runtime


def _shutdown() -> None:
    import eugo_jupyter as eugo

    eugo.hpc.shutdown()


# The item pytest runs next, known while the current one's fixtures are torn down.
_next: dict[str, pytest.Item | None] = {}
_kept: dict[str, object] = {}  # the embedded Ray a module left running for the next one


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    _next["item"] = nextitem
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    # A Ray handed on to a module whose tests were all skipped (no GPU here) reaches a test
    # that did not ask for it: it stops before that test starts.
    if _kept and "ray_local" not in getattr(item, "fixturenames", ()):
        _kept.clear()
        _shutdown()
    yield


@pytest.fixture(scope="module")
def ray_local() -> Iterator[object]:
    """An embedded local Ray with 2 CPUs, connected through eugo.hpc.

    Kept for the next module when that one asks for it too and nothing shut it down meanwhile
    (a start costs about 9 s of two busy cores); otherwise shut down with the module.
    """
    import ray

    import eugo_jupyter as eugo
    from eugo_jupyter.hpc import _session

    connection = _session._connection
    if connection is None or _kept.get("ray") is not connection or not ray.is_initialized():
        _shutdown()
        connection = eugo.hpc.init(num_cpus=2)
    yield connection
    following = _next.get("item")
    if following is not None and "ray_local" in getattr(following, "fixturenames", ()):
        if _session._connection is connection:
            _kept["ray"] = connection
            return
    _kept.clear()
    _shutdown()


def _node_started(start: Callable[[], _T]) -> _T:
    """``start()``, once more if Ray's fixed 30 s for the new node's raylet to register ran out
    (these two cores miss it now and then); what the failed try started is stopped first, as
    ``eugo.hpc.init`` does for the embedded Ray (see ``_session._start_embedded``)."""
    from eugo_jupyter._raystate import stop_failed_start

    try:
        return start()
    except Exception as exc:
        if not stop_failed_start(exc):
            raise
    return start()


@contextlib.contextmanager
def two_node_cluster(
    worker_cpus: float, worker_gpus: float, head_cpus: float = 2
) -> Iterator[tuple[Any, Any]]:
    """A head (2 CPUs unless told, no GPU) plus one worker node, connected through eugo.hpc.

    Yields ``(cluster, worker_node)`` (``ray.cluster_utils.Cluster``, so tests can remove the node).
    """
    import eugo_jupyter as eugo

    _shutdown()
    with _two_nodes(worker_cpus, worker_gpus, head_cpus) as (cluster, worker):
        try:
            eugo.hpc.init(address=cluster.address)
            yield cluster, worker
        finally:
            _shutdown()


@contextlib.contextmanager
def _two_nodes(
    worker_cpus: float, worker_gpus: float, head_cpus: float
) -> Iterator[tuple[Any, Any]]:
    """The nodes of :func:`two_node_cluster`, started but not connected to."""
    from ray.cluster_utils import Cluster

    from eugo_jupyter._raystate import enable_token_auth

    # Start the nodes in the auth mode a kernel connects with (as `ray start` does when this
    # account has a Ray token): a driver sending tokens to nodes that expect none sees its own
    # objects' owner "die".
    enable_token_auth()
    head = {"num_cpus": head_cpus, "num_gpus": 0, "dashboard_host": "127.0.0.1"}
    cluster = _node_started(lambda: Cluster(initialize_head=True, head_node_args=head))
    try:
        worker = _node_started(lambda: cluster.add_node(num_cpus=worker_cpus, num_gpus=worker_gpus))
        cluster.wait_for_nodes()
        yield cluster, worker
    finally:
        cluster.shutdown()


# The nodes behind ``gpu_cluster``: started by the first of the modules that ask for them and
# run one after another (see pytest_collection_modifyitems), stopped after the last of them (a
# start costs 30-40 s of these two busy cores; idle nodes must not stay up under other tests).
_gpu_nodes = contextlib.ExitStack()
_gpu_held: dict[str, Any] = {}  # "cluster": those nodes, while they run
_gpu_modules: set[Any] = set()  # the modules that use them


@pytest.fixture(scope="module")
def gpu_cluster() -> Iterator[object]:
    """A two-node cluster on this machine: head (2 CPUs, no GPU) + worker (4 CPUs, 1 declared
    GPU), connected through eugo.hpc for the module (a module's tasks and actors end with its
    connection, as a notebook's do with its kernel)."""
    import eugo_jupyter as eugo

    _kept.clear()
    _shutdown()
    nodes = _gpu_held.get("cluster")
    if nodes is None:
        nodes, _ = _gpu_nodes.enter_context(_two_nodes(worker_cpus=4, worker_gpus=1, head_cpus=2))
        _gpu_held["cluster"] = nodes
    try:
        eugo.hpc.init(address=nodes.address)
        yield nodes
    finally:
        _shutdown()
        following = _next.get("item")
        if getattr(following, "module", None) not in _gpu_modules:
            _gpu_held.clear()
            _gpu_nodes.close()  # the next module does not ask for them: it must not find them


# -- tests marked ``gpu`` need a real NVIDIA GPU: skipped, with the reason, without one (here, so
# that a run of one folder, such as tests/hpc, skips them too). Run them on a GPU machine with
# scripts/gpu_checks.sh.


def _no_gpu_reason() -> str | None:
    from eugo_jupyter._nvml import devices

    view = devices()
    if view["error"]:
        return (
            f"needs a real NVIDIA GPU; none here ({view['error']}); "
            "run scripts/gpu_checks.sh on a GPU machine"
        )
    if not view["devices"]:
        return (
            "needs a real NVIDIA GPU; NVML lists none here; "
            "run scripts/gpu_checks.sh on a GPU machine"
        )
    return None


def pytest_sessionfinish(session: pytest.Session) -> None:
    _gpu_held.clear()
    _gpu_nodes.close()  # a run stopped early (-x, Ctrl-C) leaves no nodes behind


def _uses_gpu_nodes(item: pytest.Item) -> bool:
    return "gpu_cluster" in getattr(item, "fixturenames", ())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Within a folder, the modules that use gpu_cluster run one after another, where the first
    # of them is, so that its nodes start once per folder. Folders keep their order: one
    # folder's tests leave state another's do not expect (the magics' IPython shell).
    _gpu_modules.clear()
    _gpu_modules.update(item.module for item in items if _uses_gpu_nodes(item))  # type: ignore[attr-defined]
    folders: dict[str, set[Any]] = {}
    for module in _gpu_modules:
        folders.setdefault(os.path.dirname(module.__file__), set()).add(module)
    for modules in folders.values():
        grouped = [item for item in items if getattr(item, "module", None) in modules]
        first = items.index(grouped[0])
        rest = [item for item in items if getattr(item, "module", None) not in modules]
        items[:] = rest[:first] + grouped + rest[first:]
    marked = [item for item in items if item.get_closest_marker("gpu")]
    if not marked:
        return
    reason = _no_gpu_reason()
    if reason:
        for item in marked:
            item.add_marker(pytest.mark.skip(reason=reason))
