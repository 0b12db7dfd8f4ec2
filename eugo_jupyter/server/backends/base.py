"""The backend interface: validate a spec, plan, start, read state, stop.

The manager drives every kind of cluster through these five steps and never looks inside a
backend. A backend keeps what it needs to find its cluster again in the cluster's *record* (a
JSON-ready dict the manager writes to disk), under keys it owns. Every method but
:meth:`Backend.validate` and :meth:`Backend.plan` may block (the manager runs them in a thread).

>>> from eugo_jupyter.server.backends.local import LocalBackend
>>> backend = LocalBackend()
>>> spec = backend.validate({"kind": "local", "head": {"num_cpus": 2}})
>>> backend.plan(spec).summary
'A head with 2 CPUs on this machine.'
"""

from __future__ import annotations

from abc import ABCMeta, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypedDict

from traitlets.config import Configurable
from traitlets.traitlets import MetaHasTraits

__all__ = ["Backend", "Form", "FormField", "Observed", "Plan", "PlanModel", "Spec", "registered"]

_REGISTRY: dict[str, type[Backend]] = {}


class PlanModel(TypedDict):
    """``POST /eugo/clusters/preview``: what a launch would run, nothing started."""

    kind: str
    name: str
    summary: str
    scripts: list[dict[str, Any]]  # [{"name": "head", "count": 1, "text": "#!/bin/bash..."}]
    commands: list[list[str]]  # argument lists, run in this order


@dataclass(frozen=True)
class Spec:
    """A checked launch request: the display name, the lifetime and the backend's own part."""

    kind: str
    name: str
    lifetime: str | None
    fields: Any  # the backend's own typed spec (NodeSpecs, SlurmSpec, an address)

    def to_model(self) -> Any:
        to_model = getattr(self.fields, "to_model", None)
        return to_model() if to_model else None


@dataclass(frozen=True)
class Plan:
    """What :meth:`Backend.start` will do, readable before anything runs."""

    summary: str
    scripts: list[dict[str, Any]] = field(default_factory=list)
    commands: list[list[str]] = field(default_factory=list)

    def to_model(self, spec: Spec) -> PlanModel:
        return {
            "kind": spec.kind,
            "name": spec.name,
            "summary": self.summary,
            "scripts": self.scripts,
            "commands": self.commands,
        }


@dataclass(frozen=True)
class FormField:
    """One field of a kind's launch form: a key of the body's part named after the kind.

    The panel renders it (``GET /eugo/kinds``); a dotted key (``head.cpus``,
    ``worker_groups.0.replicas``) puts the value that deep in the part. ``check`` is how the
    batch base checks it (:mod:`.batch_fields`): "word", "count", "memory", "walltime" or
    "lines"; ``low``/``high`` bound a count, ``pattern``/``rule`` a word.
    """

    key: str
    label: str
    check: str = "word"
    default: str | int = ""
    placeholder: str = ""
    title: str = ""
    low: int = 0
    high: int = 4096
    pattern: Any = None  # a re.Pattern for a word of another shape than the base's
    rule: str = ""  # what the pattern allows, as the end of the refusal's sentence
    suggested: str | int | None = None  # the form's first value, where not the default

    def to_model(self) -> dict[str, Any]:
        kind = {"count": "count", "lines": "lines"}.get(self.check, "text")
        model: dict[str, Any] = {"key": self.key, "label": self.label, "type": kind,
                                 "default": self.default if self.suggested is None
                                 else self.suggested}  # fmt: skip
        if kind == "count":
            model.update(min=self.low, max=self.high)
        model.update({k: v for k, v in (("placeholder", self.placeholder),
                                        ("title", self.title)) if v})  # fmt: skip
        return model


@dataclass(frozen=True)
class Form:
    """A kind's launch form, as the panel shows it: ``widget`` "fields" (these fields, the
    preview, the lifetime) or "nodes" (the local form's node rows); ``rank`` orders the kinds;
    ``hint`` is the sentence under the wall time (or the first field)."""

    fields: tuple[FormField, ...] = ()
    hint: str = ""
    rank: int = 100
    label: str = ""
    widget: str = "fields"

    def to_model(self, label: str) -> dict[str, Any]:
        return {
            "label": self.label or label,
            "widget": self.widget,
            "rank": self.rank,
            "hint": self.hint,
            "fields": [f.to_model() for f in self.fields],
        }


@dataclass
class Observed:
    """What a backend sees of its cluster right now (:meth:`Backend.state`)."""

    address: str | None = None  # the head's GCS host:port once known
    dashboard_url: str | None = None
    nodes_expected: int = 1  # Ray nodes that should be alive when the cluster is up
    ended: str | None = None  # gone for good, and why (a sentence); the record is then removed
    blocked: str | None = None  # will not start as asked (a sentence saying what to change)
    waiting: bool = False  # queued outside Ray (a scheduler): no launch deadline runs meanwhile
    detail: dict[str, Any] | None = None  # the model's key named after the kind


class _BackendMeta(MetaHasTraits, ABCMeta):
    """Configurable traits and abstract methods on one class."""


def registered() -> dict[str, type[Backend]]:
    """Every backend class that set a ``kind``, by kind, in the order they were defined."""
    return dict(_REGISTRY)


class Backend(Configurable, metaclass=_BackendMeta):
    """One kind of cluster. Subclasses set ``kind`` and implement the five steps.

    A subclass that sets ``kind`` registers itself (:func:`registered`): the manager and the
    watchdog take their backends from there, never from a list of their own. Each is a traitlets
    ``Configurable`` made with the server extension as its parent, so what it lets a site
    configure is a trait of its own (``c.SlurmBackend.shared_dir``).
    """

    kind: ClassVar[str]
    #: The panel's name of the kind, and what its form is called ("SLURM", "Grid Engine").
    label: ClassVar[str] = ""
    #: What one node of the cluster is, for the card ("job": a scheduler's job; "pod"; "node").
    node_label: ClassVar[str] = "node"
    #: What stopping does, the sentence of the panel's confirmation.
    stop_effect: ClassVar[str] = (
        "Every Ray process of this cluster stops; running tasks and objects in its store are lost."
    )
    #: The keys of the body's part named after the kind (``launch(kind, **fields)`` nests them).
    form_fields: ClassVar[tuple[str, ...]] = ()
    #: The panel's launch form of the kind (None: the kind has none in the launch section).
    form: ClassVar[Form | None] = None

    def __init_subclass__(cls, register: bool = True, **kwargs: Any) -> None:
        # ``register=False``: a backend made for one purpose (a test's fake) stays out of the
        # server's set.
        super().__init_subclass__(**kwargs)
        if register and "kind" in cls.__dict__:
            _REGISTRY[cls.kind] = cls

    #: False for clusters the manager did not start (``connect``): nothing to stop.
    owns_processes: ClassVar[bool] = True
    #: Whether :meth:`add_node` / :meth:`remove_node` are offered.
    scalable: ClassVar[bool] = False
    #: True: :meth:`start` returns within seconds (it submits, or checks an address), so the
    #: manager runs it before answering and a refusal is the request's 400; False: it runs in
    #: the background and a failure shows on the card.
    starts_quickly: ClassVar[bool] = False

    @abstractmethod
    def validate(self, body: dict[str, Any]) -> Spec:
        """Check a ``POST /eugo/clusters`` body; raise OptionsError naming the bad field."""

    @abstractmethod
    def plan(self, spec: Spec) -> Plan:
        """What starting ``spec`` would run, for the preview; starts nothing."""

    @abstractmethod
    def start(self, spec: Spec, record: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Start the cluster; returns the keys to add to its record. Blocks."""

    @abstractmethod
    def state(self, record: dict[str, Any]) -> Observed:
        """What the backend sees now (cheap; called on every monitoring read). Blocks."""

    @abstractmethod
    def stop(self, record: dict[str, Any]) -> list[str]:
        """Stop everything the cluster started; returns what is left (empty: the proof)."""

    def adopt(self, record: dict[str, Any]) -> str | None:
        """A record a previous server left: "running"/"starting" to keep it, None to forget it
        (after stopping whatever half of it is left)."""
        return "running"

    def facts(self) -> dict[str, Any]:
        """What the model carries about this kind, so no reader tests kinds by name."""
        return {
            "label": self.label or self.kind,
            "node_label": self.node_label,
            "stop_effect": self.stop_effect,
            "scalable": self.scalable,
            "fields": list(self.form_fields),
        }

    def form_model(self) -> dict[str, Any] | None:
        """The launch form the panel renders (``GET /eugo/kinds``), or None."""
        return self.form.to_model(self.label or self.kind) if self.form else None

    def release(self, record: dict[str, Any]) -> None:
        """The cluster ended by itself (:attr:`Observed.ended`): let go of what is left of it
        (a scheduler's worker jobs, which serve nothing without their head). The manager calls
        it once, where it acts on the end; :meth:`state` only reads. Blocks."""
        return None

    def add_node(self, record: dict[str, Any]) -> dict[str, Any]:
        """Add one worker node; returns the keys to update in the record."""
        raise NotImplementedError

    def remove_node(self, record: dict[str, Any], node: str) -> dict[str, Any]:
        """Remove the worker node ``node``; returns the keys to update in the record."""
        raise NotImplementedError
