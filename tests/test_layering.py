"""Dependencies point one way: no import cycle, and hpc's private files stay private.

Read statically from the source: every import, lazy ones inside functions included (a lazy
import that closes a loop still ties the two modules together), and every
``importlib.import_module("eugo_jupyter...")`` string, which is an import by another name.
"""

from __future__ import annotations

import ast
from pathlib import Path

import eugo_jupyter

PACKAGE = Path(eugo_jupyter.__file__).parent
ROOT = "eugo_jupyter"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in PACKAGE.rglob("*.py") if "labextension" not in p.parts}


def _is_import_module_call(node: ast.AST) -> bool:
    """``import_module("x")`` or ``importlib.import_module("x")`` with a literal first argument."""
    if not isinstance(node, ast.Call) or not node.args:
        return False
    func = node.func
    called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return called == "import_module" and isinstance(node.args[0], ast.Constant)


def _imports(name: str, path: Path) -> set[str]:
    """The eugo_jupyter modules ``name`` imports (``from pkg import sub`` counts as ``pkg.sub``)."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if _is_import_module_call(node):
            assert isinstance(node, ast.Call)
            target = node.args[0].value  # type: ignore[attr-defined]
            if isinstance(target, str) and target.startswith(ROOT):
                found.add(target)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith(ROOT)}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith(ROOT):
                continue
            subs = {f"{target}.{alias.name}" for alias in node.names}
            found |= {s for s in subs if s in MODULES} or {target}
            if not subs & MODULES.keys():
                found.add(target)
    return found


GRAPH = {name: _imports(name, path) & MODULES.keys() for name, path in MODULES.items()}


def test_the_scan_sees_the_package() -> None:
    # A guard for the guard: the scan reads real edges, so the checks below can fail.
    assert "eugo_jupyter.hpc._internal" in GRAPH["eugo_jupyter.gpu.check"]
    assert "eugo_jupyter._hooks" in GRAPH["eugo_jupyter.hpc._distribute"]
    assert len(MODULES) > 40


def test_the_scan_reads_import_module_strings(tmp_path: Path) -> None:
    # A guard for the guard: an import spelled as a string is an edge like any other.
    source = tmp_path / "m.py"
    source.write_text(
        "import importlib\n"
        "def f():\n"
        "    return importlib.import_module('eugo_jupyter.gpu.audit')._private()\n"
    )
    assert "eugo_jupyter.gpu.audit" in _imports("eugo_jupyter.hpc.m", source)


#: What hpc sits below: these build on it and plug into ``_hooks.py``, never the reverse.
ABOVE_HPC = ("gpu", "server", "magics", "widgets", "pandas")


def test_hpc_imports_nothing_that_builds_on_it() -> None:
    offenders = sorted(
        f"{name} imports {target}"
        for name, targets in GRAPH.items()
        if name.startswith("eugo_jupyter.hpc")
        for target in targets
        if target.split(".")[1:2] and target.split(".")[1] in ABOVE_HPC
    )
    assert offenders == [], (
        "hpc must not import the parts above it; register a hook in eugo_jupyter/_hooks.py:\n"
        + "\n".join(offenders)
    )


def test_no_module_outside_hpc_reaches_into_its_private_files() -> None:
    offenders = []
    for name, path in MODULES.items():
        if name.startswith("eugo_jupyter.hpc"):
            continue
        for target in _imports(name, path):
            parts = target.split(".")
            if (
                len(parts) >= 3
                and parts[1] == "hpc"
                and parts[2].startswith("_")
                and parts[2] != "_internal"
            ):
                offenders.append(f"{name} imports {target}")
    assert offenders == [], "use eugo_jupyter.hpc._internal instead:\n" + "\n".join(offenders)


def test_there_is_no_import_cycle() -> None:
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(GRAPH[node]):
            if state.get(nxt) == 1:
                cycles.append([*path[path.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt)
        path.pop()
        state[node] = 2

    for module in sorted(GRAPH):
        if module not in state:
            visit(module)
    assert cycles == [], "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


#: The one package that uses Ray's private APIs: when Ray renames one, this is what to fix.
RAY_PRIVATE_OWNER = "eugo_jupyter._raystate"


def _owned_by(module: str, owner: str) -> bool:
    """Whether ``module`` is ``owner`` or one of its modules (an owner may be a package)."""
    return module == owner or module.startswith(owner + ".")


def _owner_files(owner: str) -> list[Path]:
    return [path for name, path in MODULES.items() if _owned_by(name, owner)]


def _ray_private_uses(path: Path) -> list[str]:
    """Where a file names a private Ray module: imports (``ray._private``, ``ray._raylet``...),
    ``import_module`` strings and names such as a private module's logger."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names = [node.value]
        private = [n for n in names if n.startswith("ray._") or n.startswith("ray.") and "._" in n]
        if private:  # once per statement or string
            found.append(f"{path.name}:{node.lineno} {private[-1]}")  # type: ignore[attr-defined]
    return found


def test_the_private_ray_scan_sees_private_names(tmp_path: Path) -> None:
    # A guard for the guard: each way of naming a private module is seen.
    source = tmp_path / "m.py"
    source.write_text(
        "import logging\n"
        "from ray._private import ray_logging\n"
        "from ray import _raylet\n"
        "logging.getLogger('ray._private.authentication.authentication_token_setup')\n"
    )
    assert len(_ray_private_uses(source)) == 3


def test_only_one_module_uses_rays_private_apis() -> None:
    offenders = [
        use
        for name, path in MODULES.items()
        if not _owned_by(name, RAY_PRIVATE_OWNER)
        for use in _ray_private_uses(path)
    ]
    assert offenders == [], (
        f"Ray's private APIs belong in {RAY_PRIVATE_OWNER}; add a function there:\n"
        + "\n".join(offenders)
    )
    # A guard for the guard: the owner is where we look.
    assert [use for path in _owner_files(RAY_PRIVATE_OWNER) for use in _ray_private_uses(path)]


#: The one reader of ``/proc`` (processes, their command lines, descriptors, sockets, sessions).
PROC_OWNER = PACKAGE / "_processes.py"


def _proc_paths(path: Path) -> list[str]:
    """Where a file spells a ``/proc`` path (a string, or the start of an f-string)."""
    return [
        f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value.startswith("/proc")
    ]


def test_only_processes_reads_proc_and_the_tests_call_it() -> None:
    sources = [*MODULES.values(), *Path(__file__).parent.rglob("*.py")]
    offenders = [
        where for path in sources if path not in (PROC_OWNER, Path(__file__))
        for where in _proc_paths(path)
    ]  # fmt: skip
    assert offenders == [], "read /proc through eugo_jupyter._processes:\n" + "\n".join(offenders)
    assert _proc_paths(PROC_OWNER) != []  # a guard for the guard: the owner is seen


#: The one place that asks "does something answer at host:port?" (``tcp_answer``, ``reachable``).
TCP_OWNER = PACKAGE / "_rayaddress.py"


def _tcp_connects(path: Path) -> list[str]:
    """Where a file opens a TCP connection itself (``connect``, ``connect_ex``,
    ``create_connection``)."""
    return [
        f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("connect", "connect_ex", "create_connection")
    ]


def test_only_rayaddress_asks_whether_a_port_answers() -> None:
    sources = [*MODULES.values(), *Path(__file__).parent.rglob("*.py")]
    offenders = [where for path in sources if path != TCP_OWNER for where in _tcp_connects(path)]
    assert offenders == [], "use eugo_jupyter._rayaddress.tcp_answer:\n" + "\n".join(offenders)
    assert _tcp_connects(TCP_OWNER) != []  # a guard for the guard: the owner is seen


def test_leaf_modules_import_nothing_above_them() -> None:
    # exceptions, _units, _nvml, _gpu_use and _processes are leaves: all may use them, they use none
    assert GRAPH["eugo_jupyter.exceptions"] == set()
    assert GRAPH["eugo_jupyter._units"] <= {"eugo_jupyter.exceptions"}
    assert GRAPH["eugo_jupyter._nvml"] <= {"eugo_jupyter.exceptions", "eugo_jupyter._units"}
    assert GRAPH["eugo_jupyter._gpu_use"] == set()
    assert GRAPH["eugo_jupyter._processes"] == set()


def test_every_error_class_lives_in_the_eugo_error_tree() -> None:
    from eugo_jupyter import exceptions

    # Defined in exceptions.py only (a private control-flow marker is not an error users see).
    elsewhere = [
        f"{name}.{node.name}"
        for name, path in MODULES.items()
        if name != "eugo_jupyter.exceptions"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef)
        and not node.name.startswith("_")
        and any(
            getattr(base, "id", getattr(base, "attr", "")).endswith(("Error", "Exception"))
            for base in node.bases
        )
    ]
    assert elsewhere == []
    for name in exceptions.__all__:
        cls = getattr(exceptions, name)
        assert issubclass(cls, (exceptions.EugoError, exceptions.EugoWarning)), name


def test_scheduler_error_keeps_its_slurm_name() -> None:
    """``SlurmError`` became the scheduler-wide ``SchedulerError``; code that catches the old
    name still catches what every scheduler raises, and the tree drawn in the docstring says
    where it sits."""
    from eugo_jupyter import exceptions

    assert exceptions.SlurmError is exceptions.SchedulerError
    assert issubclass(exceptions.SchedulerError, exceptions.ClusterError)
    assert "+-- SchedulerError" in (exceptions.__doc__ or "")
    drawn = {line.split("+-- ")[1].split()[0] for line in (exceptions.__doc__ or "").splitlines()
             if "+-- " in line}  # fmt: skip
    errors = {n for n in exceptions.__all__ if n.endswith("Error") and n != "SlurmError"}
    assert errors - {"EugoError"} <= drawn


#: Where another library's private names may be used: one module per library, the file to fix
#: when that library renames one (Ray's and its cloudpickle's; numba's).
PRIVATE_OWNERS = {
    "eugo_jupyter._raystate": "Ray",
    "eugo_jupyter.hpc.optimize._numba_private": "numba",
}
#: Private names of other libraries used in one module each, outside those two: CPython's
#: documented ``sys._getframe``; argparse's, pandas' and tornado's, each where it is needed.
PRIVATE_ELSEWHERE = {
    "_getframe": None,  # sys._getframe, documented by CPython
    "_actions": "eugo_jupyter.magics.flags",
    "_constructor": "eugo_jupyter.pandas._run",
    "_cast_pointwise_result": "eugo_jupyter.pandas._run",
    "_reason": "eugo_jupyter.server.routes",
}


def _ours() -> set[str]:
    """The private names this package defines: functions, classes, module names, attributes
    it sets (outside the owners, which set other libraries' too), ``__slots__``, and names it
    imports."""
    names: set[str] = set()
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.alias):
                names.add(node.asname or node.name.split(".")[-1])
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Store)
                and not any(_owned_by(module, owner) for owner in PRIVATE_OWNERS)
            ):
                names.add(node.attr)
            elif isinstance(node, ast.Assign) and any(
                getattr(t, "id", "") == "__slots__" for t in node.targets
            ):
                names |= {
                    c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant)
                }  # fmt: skip
    return names


def _foreign_private_uses(path: Path, ours: set[str]) -> list[str]:
    """Where a file reads or sets another library's private attribute (``handle._actor_id``,
    ``dispatcher._compile_for_args``) or imports numba's internals (``numba.core.caching``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Attribute):
            attr = node.attr
            protocol = attr.endswith("_")  # IPython's _repr_html_, _render_traceback_
            if attr.startswith("_") and not protocol and attr not in ours:
                found.append(f"{path.name}:{node.lineno} {ast.unparse(node)}")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("numba.core"):
            # numba.core is numba's inside (its caching, typing, registries); only its
            # exception classes (numba.core.errors) are meant for users.
            if node.module != "numba.core.errors":
                found.append(f"{path.name}:{node.lineno} {node.module}")
        elif isinstance(node, ast.Import) and any(
            a.name.startswith("numba.core") and a.name != "numba.core.errors" for a in node.names
        ):
            found.append(f"{path.name}:{node.lineno} numba.core")
        elif isinstance(node, ast.Constant) and node.value == "_compile_for_args":
            found.append(f"{path.name}:{node.lineno} '_compile_for_args'")
    return found


def test_the_foreign_private_scan_sees_private_attributes(tmp_path: Path) -> None:
    # A guard for the guard: a read, a write and numba's cache module are seen; ours is not.
    source = tmp_path / "m.py"
    source.write_text(
        "from numba.core.typing.typeof import Purpose\n"
        "from numba.core.errors import NumbaError\n"
        "from numba.core import caching\n"
        "def f(handle, d, cb, entry):\n"
        "    d._compile_for_args = cb\n"
        "    entry._checking = True\n"
        "    return handle._actor_id\n"
    )
    uses = _foreign_private_uses(source, {"_checking"})
    assert [u.split()[-1] for u in uses] == [
        "numba.core.typing.typeof", "numba.core", "d._compile_for_args", "handle._actor_id"
    ], uses  # fmt: skip


def test_other_libraries_private_names_have_one_owner_each() -> None:
    ours = _ours()
    offenders = []
    for name, path in MODULES.items():
        if any(_owned_by(name, owner) for owner in PRIVATE_OWNERS):
            continue
        for use in _foreign_private_uses(path, ours):
            attr = use.split()[-1].rsplit(".", 1)[-1]
            place = PRIVATE_ELSEWHERE.get(attr, "")
            if place is None or place == name:
                continue
            offenders.append(f"{name}: {use}")
    assert offenders == [], (
        "another library's private names belong in its one module ("
        + ", ".join(f"{lib}: {mod}" for mod, lib in PRIVATE_OWNERS.items())
        + "); add a function there:\n"
        + "\n".join(offenders)
    )
    for owner in PRIVATE_OWNERS:  # a guard for the guard: the owners are where we look
        assert [u for path in _owner_files(owner) for u in _foreign_private_uses(path, ours)], owner


def _numba_imports_unguarded(path: Path) -> list[str]:
    """Imports of numba in ``path`` not made through ``import_numba``: ``import numba`` outside
    that function, and numba's parts imported in a function that did not call ``import_numba``
    before. ``numba.core.errors`` is let be: it is imported only after a
    compiled call raised, numba being loaded."""
    tree = ast.parse(path.read_text(), str(path))
    found = []
    functions = [
        n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module or ""]
        else:
            continue
        names = [n for n in names if n.split(".")[0] == "numba" and n != "numba.core.errors"]
        if not names:
            continue
        inside = [f for f in functions if f.lineno <= node.lineno <= (f.end_lineno or 0)]
        if "numba" in names:
            if not any(f.name == "import_numba" for f in inside):
                found.append(f"{path.name}:{node.lineno} import numba")
            continue
        guarded = any(
            isinstance(call, ast.Call)
            and getattr(call.func, "id", getattr(call.func, "attr", "")) == "import_numba"
            and call.lineno < node.lineno
            for f in inside for call in ast.walk(f)
        )  # fmt: skip
        if not guarded:
            found.append(f"{path.name}:{node.lineno} {names[0]}")
    return found


def test_numba_is_imported_by_one_thread_at_a_time_through_one_function(tmp_path: Path) -> None:
    """Two threads of a worker importing numba at once (its early start, a background compile,
    the call's own type check) can meet its modules half made: seen in a full run, a worker
    whose numba said "module 'numba.core.types' has no attribute 'Type'" and ran Python for
    good. Every import goes through ``_prewarm.import_numba``, which takes a lock."""
    offenders = [use for path in MODULES.values() for use in _numba_imports_unguarded(path)]
    assert offenders == [], offenders
    # A guard for the guard: a bare import and an unguarded part are seen, a guarded one not.
    source = tmp_path / "m.py"
    source.write_text(
        "import numba\n"
        "def f():\n    from numba.core import types\n"
        "def g():\n    import_numba()\n    from numba.core import types\n"
        "def h():\n    from numba.core.errors import NumbaError\n"
    )
    assert [u.split()[-1] for u in _numba_imports_unguarded(source)] == ["numba", "numba.core"]
