"""One contract for every backend, run against the in-memory fake and the real ones.

As dask-jobqueue's ``conftest.py`` runs one suite for every job class, a parametrized fixture
gives each test a backend: the fake (``tests/fixtures/fake_backend.py``), the local backend
(real Ray processes), SLURM (a real slurmctld and two slurmd) and Grid Engine (a real private
cell). The contract: validate accepts a body and refuses an unknown key by name; plan starts
nothing; start, state, scale (where offered), stop (nothing left) and adopt (a stopped record is
forgotten); the model's facts about the kind. The batch schedulers share more: every bad field is
refused by name before anything is submitted (one table per scheduler), a request no node can
ever satisfy is said to be so, and a one-minute wall time ends the cluster with a sentence that
says so. A real scheduler's one-minute cluster is launched when the module starts (the
``schedulers`` fixture): its minute passes while the other scenarios run, and its test then only
waits for what is left of it. PBS runs here only as fake ``qsub``/``qstat``/``qdel`` commands
(``tests/fixtures/fake_pbs.py``): Debian packages no PBS (neither OpenPBS nor Torque). The ssh
backend's real part (hosts in network namespaces) is its own test bed's (tests/testbed), and
``connect`` starts nothing. The kubernetes backend runs against the mock API server of
``tests/fixtures/kube_api.py`` with its double of the KubeRay operator: no Kubernetes API server
can run on these machines.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from eugo_jupyter.exceptions import OptionsError
from eugo_jupyter.server.backends.base import Backend
from eugo_jupyter.server.backends.batch import BatchBackend
from tests.fixtures.fake_backend import FakeBackend
from tests.fixtures.gridengine import gridengine_cell, require_gridengine
from tests.fixtures.slurm import require_slurm, slurm_cluster
from tests.fixtures.waiting import until


@dataclass
class Case:
    backend: Backend
    body: dict[str, Any]
    part: str  # where the body's backend-specific keys go ("" for top-level ones)
    nodes: int = 2  # the Ray nodes the body asks for
    settle: Any = None  # for a backend whose workers appear a moment after a scale: wait for it
    # A real scheduler's one-minute cluster, launched as the module started: (backend, record).
    wall_time: tuple[BatchBackend, dict[str, Any]] | None = None


@dataclass
class Scheduler:
    """A real scheduler, up for the whole module (see ``schedulers``)."""

    variables: dict[str, str]  # what its commands need in the environment
    backend: BatchBackend
    wall_time: tuple[BatchBackend, dict[str, Any]] | None = None


@contextlib.contextmanager
def _env(variables: dict[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _fake(tmp: Path) -> Iterator[Case]:
    yield Case(FakeBackend(), {"kind": "fake", "fake": {"nodes": 2}}, "fake")


def _local(tmp: Path) -> Iterator[Case]:
    from eugo_jupyter.server.backends.local import LocalBackend

    # A head only: a second `ray start` on a machine shared by several test runs is what the
    # local tests (test_clusters.py) cover; here it would only add their load.
    yield Case(LocalBackend(), {"kind": "local", "head": {"num_cpus": 1}}, "", nodes=1)


def _pbs(tmp: Path) -> Iterator[Case]:
    """Fake PBS commands (no PBS can be installed here); a wall time passes 60 times faster."""
    from eugo_jupyter.server.backends.pbs import PbsBackend
    from tests.fixtures.fake_pbs import fake_pbs

    with fake_pbs(tmp) as variables:
        body = {"kind": "pbs", "pbs": {"nodes": 2}}
        yield from _in_env({**variables, "FAKE_PBS_SPEED": "60"},
                           Case(PbsBackend(str(tmp / "shared")), body, "pbs"))  # fmt: skip


def _in_env(variables: dict[str, str], case: Case) -> Iterator[Case]:
    with _env(variables):
        yield case


def _kubernetes(tmp: Path) -> Iterator[Case]:
    """Against the mock API server: none can run here (see tests/fixtures/kube_api.py)."""
    from eugo_jupyter.server.backends.kuberay import KubernetesBackend
    from tests.fixtures.kube_api import kube_api

    def settle(backend: Backend, record: dict[str, Any], workers: int) -> None:
        def settled() -> bool:
            rows = backend.state(record).detail["jobs"]
            return [r["role"] for r in rows if r["state"] == "Running"].count("worker") == workers

        until(settled, f"the workers settling at {workers}", 30, every_s=0.05)

    with kube_api(tmp) as api:
        body = {"kind": "kubernetes", "kubernetes": {"worker_groups": [{"replicas": 1}]}}
        case = Case(KubernetesBackend(), body, "kubernetes", settle=settle)
        yield from _in_env({"KUBECONFIG": str(api.kubeconfig)}, case)


CASES = {"fake": _fake, "local": _local, "pbs": _pbs, "kubernetes": _kubernetes}
REAL = {"slurm": require_slurm, "gridengine": require_gridengine}  # started by `schedulers`
# The kinds in the order they are tested: the real schedulers' one-minute clusters (launched as
# the module starts) run meanwhile. Grid Engine's ends first; SLURM's last (slurmctld checks time
# limits every 30 s), so SLURM comes last. The local kind's Ray head starts once the two heads of
# those clusters are long up: three starting at once on a busy machine can miss Ray's 30 s window.
ORDER = ["fake", "pbs", "kubernetes", "gridengine", "local", "slurm"]
WALL_TIME_TEST = "test_a_one_minute_wall_time_ends_the_cluster_and_says_why"


def _selected(request: pytest.FixtureRequest) -> dict[str, set[str]]:
    """The real schedulers this run's tests of the module use: kind -> those tests' names."""
    wanted: dict[str, set[str]] = {}
    for item in request.session.items:
        callspec = getattr(item, "callspec", None)
        kind = callspec.params.get("case") if callspec else None
        if kind in REAL and getattr(item, "module", None) is request.module:
            wanted.setdefault(kind, set()).add(getattr(item, "originalname", item.name))
    return wanted


@pytest.fixture(scope="module", autouse=True)
def schedulers(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Scheduler]]:
    """Start the real schedulers the selected tests use as the module starts, and launch on each
    the one-minute cluster of the wall-time test at once: that minute, the most of the module's
    time, then passes while the other scenarios run instead of in that test alone."""
    running: dict[str, Scheduler] = {}
    wanted = _selected(request)
    with contextlib.ExitStack() as stack:
        for kind in [k for k in REAL if k in wanted]:  # SLURM first: its cluster ends last
            try:
                REAL[kind]()
            except (pytest.skip.Exception, pytest.fail.Exception):
                continue  # not installed: the `case` fixture says so for each of its tests
            tmp = tmp_path_factory.mktemp(kind)
            if kind == "slurm":
                slurm = stack.enter_context(slurm_cluster(tmp / "slurm"))
                variables = {"SLURM_CONF": str(slurm.conf)}
            else:
                variables = stack.enter_context(gridengine_cell()).variables
            scheduler = running[kind] = Scheduler(variables, _scheduler(kind, tmp / "shared"))
            if WALL_TIME_TEST in wanted[kind]:
                # A folder of its own: the plan test finds the other one empty.
                backend = _scheduler(kind, tmp / "wall-time")
                body = {"kind": kind, kind: {"nodes": 1, "walltime": "00:01:00"}}
                with _env(variables):
                    scheduler.wall_time = backend, _launch(backend, body)
                stack.callback(_stop_quietly, variables, *scheduler.wall_time)
        yield running


def _stop_quietly(variables: dict[str, str], backend: BatchBackend, record: Any) -> None:
    """Stop a cluster its test may not have stopped (a failed run); the scheduler's own
    tear-down ends whatever is left."""
    with _env(variables), contextlib.suppress(Exception):
        backend.stop(record)


@pytest.fixture(scope="module", params=ORDER)
def case(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    schedulers: dict[str, Scheduler],
) -> Iterator[Case]:
    kind = request.param
    if kind not in REAL:
        yield from CASES[kind](tmp_path_factory.mktemp(kind))
        return
    REAL[kind]()  # a scheduler that is not installed: skipped here, a failure in CI
    scheduler = schedulers[kind]
    body = {"kind": kind, kind: {"nodes": 2}}
    real = Case(scheduler.backend, body, kind, wall_time=scheduler.wall_time)
    yield from _in_env(scheduler.variables, real)


def _with_part(case: Case, extra: dict[str, Any]) -> dict[str, Any]:
    if not case.part:
        return {**case.body, **extra}
    return {**case.body, case.part: {**case.body[case.part], **extra}}


def test_validate_accepts_the_body_and_refuses_an_unknown_key_by_name(case: Case) -> None:
    spec = case.backend.validate(case.body)
    assert spec.kind == case.backend.kind
    with pytest.raises(OptionsError, match="Unknown key 'bogus'"):
        case.backend.validate(_with_part(case, {"bogus": 1}))


def test_plan_describes_the_launch_and_starts_nothing(case: Case) -> None:
    backend = case.backend
    spec = backend.validate(case.body)
    plan = backend.plan(spec)
    assert plan.summary
    if isinstance(backend, BatchBackend):  # the preview is what is submitted
        assert plan.scripts[0]["text"] == backend.script(spec.fields, "head")
        assert not backend.root.exists() or list(backend.root.iterdir()) == []


def test_the_facts_speak_for_the_kind(case: Case) -> None:
    facts = case.backend.facts()
    assert facts["label"] and facts["stop_effect"].endswith(".")
    assert facts["scalable"] is case.backend.scalable
    assert facts["node_label"] in ("job", "pod", "node")


def test_start_state_scale_stop_and_adopt(case: Case) -> None:
    backend = case.backend
    spec = backend.validate(case.body)
    record: dict[str, Any] = {"id": f"c-{secrets.token_hex(4)}", "kind": spec.kind,
                              "spec": spec.to_model()}  # fmt: skip
    record.update(backend.start(spec, record, 600.0))
    try:
        observed = backend.state(record)
        assert observed.ended is None and observed.blocked is None
        assert observed.nodes_expected == case.nodes
        if backend.scalable:
            if case.settle:
                case.settle(backend, record, 1)
            record.update(backend.add_node(record))
            if case.settle:
                case.settle(backend, record, 2)
            # The jobs (a scheduler's) or pods (Kubernetes') the card lists, head first.
            jobs = record.get(backend.kind, {}).get("jobs") or backend.state(record).detail["jobs"]
            assert [j["role"] for j in jobs] == ["head", "worker", "worker"]
            assert backend.state(record).nodes_expected == 3
            record.update(backend.remove_node(record, jobs[-1]["id"]))
            assert backend.state(record).nodes_expected == 2
            with pytest.raises(OptionsError, match="is not a worker (job|pod)"):
                backend.remove_node(record, jobs[0]["id"])
    finally:
        left = backend.stop(record)
    assert left == []
    assert backend.adopt(record) is None  # nothing of it lives: a restarted server forgets it


# -- the batch schedulers' shared scenarios

BAD_FIELDS = {
    "slurm": [
        ({"partition": "gpu;rm -rf ~"}, "slurm.partition='gpu;rm -rf ~' is not allowed"),
        ({"account": "a b"}, "slurm.account='a b' is not allowed"),
        ({"walltime": "1 hour"}, "slurm.walltime='1 hour' is not allowed"),
        ({"walltime": "00:00:30"}, "is too short"),
        ({"nodes": 0}, "slurm.nodes=0 is out of range"),
        ({"nodes": 2.5}, "slurm.nodes=2.5 is not allowed"),
        ({"cpus_per_node": "four"}, "slurm.cpus_per_node='four' is not allowed"),
        ({"gpus_per_node": -1}, "slurm.gpus_per_node=-1 is out of range"),
        ({"memory_per_node": "lots"}, "slurm.memory_per_node='lots' is not allowed"),
        ({"extra": "--qos=short\n--comment=$(reboot)"}, "line 2 '--comment=$(reboot)'"),
        ({"extra": ["--qos=a b"]}, "line 1 '--qos=a b' is not allowed"),
        ({"extra": "--output=/etc/passwd"}, "the manager sets --output itself"),
        ({"extra": 5}, "give up to 32 #SBATCH options"),
        ({"queue": "x"}, "Unknown key 'queue' in slurm"),
    ],
    "gridengine": [
        ({"queue": "all.q;reboot"}, "gridengine.queue='all.q;reboot' is not allowed"),
        ({"project": "a b"}, "gridengine.project='a b' is not allowed"),
        ({"parallel_environment": "$(id)"}, "gridengine.parallel_environment='$(id)' is not"),
        ({"walltime": "90"}, "gridengine.walltime='90' is not allowed"),
        ({"walltime": "00:00:30"}, "is too short"),
        ({"nodes": 0}, "gridengine.nodes=0 is out of range"),
        ({"cpus_per_node": "four"}, "gridengine.cpus_per_node='four' is not allowed"),
        ({"memory_per_node": "lots"}, "gridengine.memory_per_node='lots' is not allowed"),
        ({"memory_per_node": "1GiB", "memory_resource": "mem job"}, "gridengine.memory_resource="),
        ({"memory_per_node": "1GiB", "memory_resource": ""}, "needs gridengine.memory_resource"),
        ({"extra": "-l gpu=1\n-ac x=$(reboot)"}, "line 2 '-ac x=$(reboot)' is not allowed"),
        ({"extra": ["-o /etc/passwd"]}, "the manager sets -o itself"),
        ({"extra": ["-l h_rt=99:00:00"]}, "the manager sets h_rt itself"),
        ({"extra": 5}, "give up to 32 #$ options"),
        ({"partition": "x"}, "Unknown key 'partition' in gridengine"),
    ],
    "pbs": [
        ({"queue": "workq;reboot"}, "pbs.queue='workq;reboot' is not allowed"),
        ({"account": "a b"}, "pbs.account='a b' is not allowed"),
        ({"walltime": "90"}, "pbs.walltime='90' is not allowed"),
        ({"walltime": "00:00:30"}, "is too short"),
        ({"nodes": 300}, "pbs.nodes=300 is out of range"),
        ({"gpus_per_node": "one"}, "pbs.gpus_per_node='one' is not allowed"),
        ({"memory_per_node": "lots"}, "pbs.memory_per_node='lots' is not allowed"),
        ({"extra": "-l place=excl\n-W x=$(reboot)"}, "line 2 '-W x=$(reboot)' is not allowed"),
        ({"extra": ["-o /etc/passwd"]}, "the manager sets -o itself"),
        ({"extra": ["-l select=4:ncpus=8"]}, "the manager sets select itself"),
        ({"extra": 5}, "give up to 32 #PBS options"),
        ({"partition": "x"}, "Unknown key 'partition' in pbs"),
    ],
}


def _scheduler(kind: str, shared_dir: Path | None = None) -> BatchBackend:
    from eugo_jupyter.server.backends.gridengine import GridEngineBackend
    from eugo_jupyter.server.backends.pbs import PbsBackend
    from eugo_jupyter.server.backends.slurm import SlurmBackend

    backend = {"slurm": SlurmBackend, "gridengine": GridEngineBackend, "pbs": PbsBackend}[kind]
    return backend(str(shared_dir) if shared_dir else None)


@pytest.mark.parametrize(
    ("kind", "fields", "says"),
    [(kind, fields, says) for kind, rows in BAD_FIELDS.items() for fields, says in rows],
)
def test_every_bad_field_is_refused_by_name_before_anything_runs(
    kind: str, fields: dict[str, Any], says: str
) -> None:
    """Validation only: no scheduler is asked (the REST API answers 400 with the sentence)."""
    with pytest.raises(OptionsError) as info:
        _scheduler(kind).validate({"kind": kind, kind: fields})
    assert says in str(info.value)


def _until(backend: Backend, record: dict[str, Any], done: Any, what: str) -> Any:
    """The backend's view of the launch once ``done(view)`` holds (a shared machine: a job may
    take long to start, hence the 600 s)."""

    def view() -> Any:
        observed = backend.state(record)
        return observed if done(observed) else None

    return until(view, f"{backend.label}: {what}", 600, every_s=0.5)


def _launch(backend: BatchBackend, body: dict[str, Any]) -> dict[str, Any]:
    spec = backend.validate(body)
    record: dict[str, Any] = {"id": f"c-{secrets.token_hex(4)}", "kind": spec.kind,
                              "spec": spec.to_model()}  # fmt: skip
    record.update(backend.start(spec, record, 600.0))
    return record


def _batch_launch(case: Case, fields: dict[str, Any]) -> tuple[BatchBackend, dict[str, Any]]:
    backend = case.backend
    if not isinstance(backend, BatchBackend):
        pytest.skip("a batch scheduler's scenario")
    return backend, _launch(backend, _with_part(case, {"nodes": 1, **fields}))


def test_a_request_no_node_can_run_is_said_to_be_impossible(case: Case) -> None:
    backend, record = _batch_launch(case, {"cpus_per_node": 64})
    try:
        observed = _until(backend, record, lambda o: o.blocked, "the job blocked")
        job = observed.detail["jobs"][0]
        assert observed.blocked == (
            f"{backend.label} cannot run job {job['id']} (head) as asked: {job['reason']}."
        )
        assert "launch with" in job["reason"]  # what to change
    finally:
        assert backend.stop(record) == []


def test_a_one_minute_wall_time_ends_the_cluster_and_says_why(case: Case) -> None:
    # On a real scheduler the cluster was launched as the module started (see `schedulers`).
    backend, record = case.wall_time or _batch_launch(case, {"walltime": "00:01:00"})
    try:
        observed = _until(backend, record, lambda o: o.ended, "the wall time ended the job")
        assert observed.ended.startswith(
            f"The wall time (00:01:00) ran out: {backend.label} ended job"
        )
        backend.release(record)
    finally:
        assert backend.stop(record) == []


def test_the_form_the_panel_renders_is_the_one_the_backend_checks(case: Case) -> None:
    """``GET /eugo/kinds`` serves each kind's form; the panel has no copy of its fields."""
    form = case.backend.form_model()
    if form is None or form["widget"] == "nodes":
        pytest.skip("a kind launched by a form of its own")
    keys = [f["key"] for f in form["fields"]]
    if isinstance(case.backend, BatchBackend):
        assert keys == list(case.backend.facts()["fields"])  # one list: checked and rendered
    defaults = {f["key"]: f["default"] for f in form["fields"] if f["default"] != ""}
    for f in form["fields"]:
        assert f["label"] and f["type"] in ("text", "count", "lines")
        if f["type"] == "count":
            assert f["min"] <= f["default"] <= f["max"]
    if isinstance(case.backend, BatchBackend):  # the form's defaults are a valid launch
        case.backend.validate({"kind": case.backend.kind, case.backend.kind: defaults})


def test_a_script_can_go_to_the_submit_command_on_its_standard_input(tmp_path: Path) -> None:
    """LSF's ``bsub < script`` (dask-jobqueue's ``LSFJob._submit_job``): the base's hook, on the
    fake PBS commands, whose ``qsub`` reads a script from its standard input as PBS's does."""
    from eugo_jupyter.server.backends.pbs import PbsBackend
    from tests.fixtures.fake_pbs import fake_pbs

    class ThroughStdin(PbsBackend, register=False):
        submit_through_stdin = True

        def submit_command(self, folder: str, cluster_id: str, role: str) -> list[str]:
            return ["qsub", "-N", f"eugo-{cluster_id}-{role}"]

    with fake_pbs(tmp_path) as variables:
        case = Case(ThroughStdin(str(tmp_path / "shared")), {"kind": "pbs", "pbs": {}}, "pbs")
        for _ in _in_env(variables, case):
            backend, record = _batch_launch(case, {})
            try:
                jobs = backend.state(record).detail["jobs"]
                assert [(j["role"], j["state"]) for j in jobs] == [("head", "R")]
            finally:
                assert backend.stop(record) == []
