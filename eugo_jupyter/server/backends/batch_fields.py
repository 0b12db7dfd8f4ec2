"""The batch schedulers' launch fields: declared once per scheduler, checked here for all.

A scheduler lists its form (:class:`.base.FormField`: the panel renders it, this module checks
it): the word fields it names its way (``partition``, ``queue``), and the common ones built here
(:func:`walltime`, :data:`NODES`, :func:`cpus`, :data:`GPUS`, :data:`MEMORY`, :func:`extra`).
Every value is checked before it reaches a job script; a refusal names the field and the fix.

>>> from eugo_jupyter.server.backends.slurm import SlurmBackend
>>> SlurmBackend().validate({"kind": "slurm", "slurm": {"partition": "a b"}})
Traceback (most recent call last):
...
eugo_jupyter.exceptions.OptionsError: slurm.partition='a b' is not allowed: use letters, \
digits, '.', '_' or '-' (as SLURM spells it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Protocol

from ...exceptions import OptionsError
from .. import requests
from .base import FormField

__all__ = [
    "GPUS", "MAX_NODES", "MEMORY", "NODES", "BatchSpec", "check", "cpus", "extra",
    "extra_lines", "walltime",
]  # fmt: skip

MAX_NODES = 256
WORD_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")

# A launch body without nodes asks for one; the panel's form starts at two (a head and a worker).
NODES = FormField("nodes", "Nodes", "count", default=1, low=1, high=MAX_NODES, suggested=2)
GPUS = FormField("gpus_per_node", "GPUs per node", "count", default=0, low=0, high=64)
MEMORY = FormField("memory_per_node", "Memory per node", "memory",
                   placeholder="e.g. 16GB (optional)")  # fmt: skip


def walltime(title: str) -> FormField:
    return FormField("walltime", "Wall time", "walltime", "01:00:00", "01:00:00", title)


def cpus(label: str = "CPUs per node") -> FormField:
    return FormField("cpus_per_node", label, "count", default=1, low=1, high=4096)


def extra(label: str, placeholder: str) -> FormField:
    return FormField("extra", label, "lines", placeholder=placeholder)


@dataclass(frozen=True)
class BatchSpec:
    """A checked batch launch: every field by key, in the form's order (memory in bytes).

    >>> spec = BatchSpec({"walltime": "01:00:00", "nodes": 2, "cpus_per_node": 4, "extra": ()})
    >>> spec.nodes, spec["walltime"], spec.gpus_per_node, spec.to_model()["extra"]
    (2, '01:00:00', 0, [])
    """

    values: dict[str, Any] = field(hash=False)

    def __getitem__(self, key: str) -> Any:
        return self.values.get(key)

    walltime = property(lambda self: str(self.values["walltime"]))
    nodes = property(lambda self: int(self.values["nodes"]))
    cpus_per_node = property(lambda self: int(self.values["cpus_per_node"]))
    gpus_per_node = property(lambda self: int(self.values.get("gpus_per_node") or 0))
    memory_per_node = property(lambda self: self.values.get("memory_per_node"))
    extra = property(lambda self: tuple(self.values.get("extra") or ()))

    def to_model(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in self.values.items()}


class Scheduler(Protocol):
    """What the checks read of a scheduler (a :class:`.batch.BatchBackend`): its form's syntax."""

    @property
    def kind(self) -> str: ...
    @property
    def label(self) -> str: ...
    @property
    def directive(self) -> str: ...  # "#SBATCH", "#$", "#PBS"
    @property
    def walltime_pattern(self) -> re.Pattern[str]: ...
    @property
    def walltime_rule(self) -> str: ...
    @property
    def extra_pattern(self) -> re.Pattern[str]: ...  # one extra line: (option, argument)
    @property
    def extra_example(self) -> str: ...
    @property
    def extra_joiner(self) -> str: ...
    @property
    def own_options(self) -> frozenset[str]: ...
    def walltime_seconds(self, value: str) -> int: ...
    def extra_refused(self, option: str, argument: str) -> str | None: ...
    def field_default(self, key: str) -> Any: ...


def extra_lines(value: Any, field: str, directive: str) -> list[tuple[int, str]]:
    """The non-blank lines of a form's ``extra`` field, numbered from 1, as the user wrote them.

    A list of lines (or one text), at most 32, each a line of text; the scheduler then checks
    each line against its own option syntax.

    >>> extra_lines(["--qos=short", " ", "#SBATCH --constraint=a100"], "slurm.extra", "#SBATCH")
    [(1, '--qos=short'), (3, '#SBATCH --constraint=a100')]
    >>> extra_lines([1], "gridengine.extra", "#$")
    Traceback (most recent call last):
    ...
    eugo_jupyter.exceptions.OptionsError: gridengine.extra[0]=1 is not allowed: give a line of text.
    """
    lines = value.splitlines() if isinstance(value, str) else value
    if lines is None:
        return []
    if not isinstance(lines, list) or len(lines) > 32:
        raise OptionsError(
            f"{field}={value!r} is not allowed: give up to 32 {directive} options, one per line."
        )
    numbered = []
    for i, line in enumerate(lines):
        if not isinstance(line, str):
            raise OptionsError(f"{field}[{i}]={line!r} is not allowed: give a line of text.")
        if line.strip():
            numbered.append((i + 1, line))
    return numbered


def _extra(s: Scheduler, value: Any) -> tuple[str, ...]:
    out = []
    where = f"{s.kind}.extra"
    for number, line in extra_lines(value, where, s.directive):
        stripped = line.strip().removeprefix(s.directive).strip()
        match = s.extra_pattern.fullmatch(stripped)
        if match is None:
            raise OptionsError(
                f"{where} line {number} {line!r} is not allowed: give one option per line, "
                f"such as {s.extra_example}, without quotes or shell characters."
            )
        option, argument = match.group(1), match.group(2) or ""
        own = option if option in s.own_options else s.extra_refused(option, argument)
        if own:
            raise OptionsError(
                f"{where} line {number} {line!r} is not allowed: the manager sets {own} "
                "itself; use the form's fields instead."
            )
        out.append(f"{option}{s.extra_joiner}{argument}" if argument else option)
    return tuple(out)


def _one(s: Scheduler, f: FormField, given: dict[str, Any]) -> Any:
    value = given.get(f.key)
    if f.check == "count":
        return requests.count(f.default if value is None else value, f.key, s.kind, f.low, f.high)
    if f.check == "lines":
        return _extra(s, value)
    if f.check == "walltime":
        value = requests.text(f.default if value is None else value, f.key, s.kind,
                              s.walltime_pattern, s.walltime_rule)  # fmt: skip
        if s.walltime_seconds(value) < 60:
            raise OptionsError(
                f"{s.kind}.{f.key}={value!r} is too short: give at least one minute."
            )
        return value
    if value in (None, ""):
        return s.field_default(f.key)
    if f.check == "memory":
        from ..._units import parse_memory

        return int(parse_memory(value, f"{s.kind}.{f.key}")) or None
    rule = f.rule or f"use letters, digits, '.', '_' or '-' (as {s.label} spells it)"
    return requests.text(value, f.key, s.kind, f.pattern or WORD_RE, rule)


def check(s: Scheduler, form: tuple[FormField, ...], given: dict[str, Any]) -> BatchSpec:
    """Every field of ``form`` from the body's part ``given`` (its keys already checked)."""
    return BatchSpec({f.key: _one(s, f, given) for f in form})
