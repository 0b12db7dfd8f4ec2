"""``ResourceOptions``: pick CPUs, GPUs and memory for a call; ``.value`` is the options dict."""

from __future__ import annotations

import html
import sys
from typing import Any

import ipywidgets as widgets
import traitlets

from .._units import parse_memory
from ..exceptions import OptionsError
from ..hpc import _internal

__all__ = ["ResourceOptions"]

#: The GPU shares one click away.
GPU_FRACTIONS = (0.25, 0.5, 1)


def _number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else float(value)


def _diagnose(options: dict[str, Any]) -> str | None:
    """Why the connected cluster cannot run these options, or None (also when not connected)."""
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return None  # never connect just to draw a widget
    snap = _internal.current_snapshot()
    if snap is None:
        return None
    try:
        checked = _internal.resolve_options(options)  # gpu_memory is sized on the cluster here
    except OptionsError as exc:
        return str(exc)
    return _internal.infeasible_message(_internal.request_of(checked), snap)


class ResourceOptions(widgets.VBox):
    """Inputs for CPUs, GPUs and memory; ``.value`` goes to ``f.options(**w.value)``.

    It shows the equivalent code, checks each choice with the same rules as the API and warns
    when the connected cluster has no node that could run it.

    >>> w = ResourceOptions(num_cpus=4, num_gpus=0.25)
    >>> w.value
    {'num_cpus': 4, 'num_gpus': 0.25}
    >>> w.code
    '.options(num_cpus=4, num_gpus=0.25)'
    """

    num_cpus = traitlets.Float(1.0, help="CPUs one call reserves (0 or more; fractions allowed).")
    num_gpus = traitlets.Float(
        0.0, help="GPUs one call reserves: a fraction below 1 shares a GPU, or whole GPUs."
    )
    memory = traitlets.Unicode(
        None,
        allow_none=True,
        help='Memory one call reserves: bytes or "4GB", "512MiB"; None for no reservation.',
    )
    gpu_memory = traitlets.Unicode(
        None,
        allow_none=True,
        help=(
            'GPU memory one call needs ("6GB"); '
            "when set, num_gpus is sized from the cluster's GPUs."
        ),
    )
    value = traitlets.Dict(
        read_only=True, help="The options dict: f.options(**w.value), %%distribute --options w."
    )
    code = traitlets.Unicode(read_only=True, help="The equivalent call-site code.")
    warning = traitlets.Unicode(
        "", read_only=True, help="Why the choice cannot run (input or cluster), or ''."
    )

    def __init__(
        self,
        num_cpus: float = 1,
        num_gpus: float = 0,
        memory: str | int | None = None,
        gpu_memory: str | int | None = None,
        **kwargs: Any,
    ) -> None:
        self._cpu_box = widgets.BoundedFloatText(
            min=0, max=1e6, step=1, description="CPUs", layout={"width": "180px"}
        )
        self._gpu_box = widgets.BoundedFloatText(
            min=0, max=1e4, step=0.25, description="GPUs", layout={"width": "180px"}
        )
        self._gpu_buttons = [
            widgets.Button(
                description=f"{f:g}", tooltip=f"num_gpus={f:g}", layout={"width": "48px"}
            )
            for f in GPU_FRACTIONS
        ]
        self._memory_box = widgets.Text(
            placeholder="e.g. 4GB, 512MiB", description="Memory", layout={"width": "240px"}
        )
        self._gpu_memory_box = widgets.Text(
            placeholder="e.g. 6GB (sizes GPUs)", description="GPU memory", layout={"width": "240px"}
        )
        self._code_view = widgets.HTML()
        self._warning_view = widgets.HTML()
        super().__init__(
            children=[
                widgets.HBox([self._cpu_box]),
                widgets.HBox([self._gpu_box, *self._gpu_buttons]),
                widgets.HBox([self._memory_box, self._gpu_memory_box]),
                self._code_view,
                self._warning_view,
            ],
            **kwargs,
        )
        self.add_class("eugo-resource-options")
        self.num_cpus, self.num_gpus = num_cpus, num_gpus
        self.memory = None if memory is None else str(memory)
        self._cpu_box.value, self._gpu_box.value = self.num_cpus, self.num_gpus
        self._memory_box.value = self.memory or ""
        self.gpu_memory = None if gpu_memory is None else str(gpu_memory)
        self._gpu_memory_box.value = self.gpu_memory or ""
        self._cpu_box.observe(lambda ch: self._from_input("num_cpus", ch["new"]), "value")
        self._gpu_box.observe(lambda ch: self._from_input("num_gpus", ch["new"]), "value")
        self._memory_box.observe(
            lambda ch: self._from_input("memory", ch["new"].strip() or None), "value"
        )
        self._gpu_memory_box.observe(
            lambda ch: self._from_input("gpu_memory", ch["new"].strip() or None), "value"
        )
        for button, fraction in zip(self._gpu_buttons, GPU_FRACTIONS, strict=True):
            button.on_click(lambda _b, f=fraction: setattr(self, "num_gpus", f))
        self._refresh()

    # -- validation: the API's rules, as trait errors with the API's sentence
    def _check(self, key: str, value: Any) -> Any:
        try:
            _internal.validate_options({key: value})
        except OptionsError as exc:
            raise traitlets.TraitError(str(exc)) from None
        return value

    @traitlets.validate("num_cpus")
    def _valid_cpus(self, proposal: Any) -> float:
        return self._check("num_cpus", proposal["value"])

    @traitlets.validate("num_gpus")
    def _valid_gpus(self, proposal: Any) -> float:
        return self._check("num_gpus", proposal["value"])

    @traitlets.validate("memory")
    def _valid_memory(self, proposal: Any) -> str | None:
        return None if proposal["value"] is None else self._check("memory", proposal["value"])

    @traitlets.validate("gpu_memory")
    def _valid_gpu_memory(self, proposal: Any) -> str | None:
        value = proposal["value"]
        if value is None:
            return None
        try:  # the format only: sizing needs the cluster, which a widget never connects to
            parse_memory(value, "gpu_memory")
        except OptionsError as exc:
            raise traitlets.TraitError(str(exc)) from None
        return value

    @traitlets.observe("num_cpus", "num_gpus", "memory", "gpu_memory")
    def _changed(self, _change: Any) -> None:
        if hasattr(self, "_code_view"):
            self._cpu_box.value, self._gpu_box.value = self.num_cpus, self.num_gpus
            self._refresh()

    # -- user input: a bad entry is shown, not raised into the frontend's comm handler
    def _from_input(self, key: str, value: Any) -> None:
        try:
            setattr(self, key, value)
        except traitlets.TraitError as exc:
            self._show_warning(str(exc))

    def _refresh(self) -> None:
        options: dict[str, Any] = {"num_cpus": _number(self.num_cpus)}
        if self.gpu_memory:
            options["gpu_memory"] = self.gpu_memory  # becomes num_gpus when the call is made
        elif self.num_gpus:
            options["num_gpus"] = _number(self.num_gpus)
        if self.memory:
            options["memory"] = self.memory
        self.set_trait("value", options)
        self.set_trait("code", _internal.format_options(options))
        self._code_view.value = f"<code>{html.escape(self.code)}</code>"
        try:
            problem = _diagnose(options)
        except Exception:  # noqa: BLE001 - a widget never breaks on a cluster read
            problem = None
        self._show_warning(f"No node can run this: {problem}" if problem else "")

    def _show_warning(self, text: str) -> None:
        self.set_trait("warning", text)
        self._warning_view.value = (
            f"<span class='eugo-warning' style='color:#c62828'>&#9888; {html.escape(text)}</span>"
            if text
            else ""
        )

    def check_cluster(self) -> str:
        """Re-read the connected cluster and return the warning ('' when the choice can run)."""
        self._refresh()
        return self.warning

    def __repr__(self) -> str:
        return f"ResourceOptions({self.code})"
