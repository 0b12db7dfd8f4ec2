"""``GPUCheck``: pick a GPU request and a node, press Verify, see one pass/fail row per probe."""

from __future__ import annotations

import html
import threading
from typing import Any, Callable

import ipywidgets as widgets
import traitlets

from .._units import format_bytes

__all__ = ["ALL_GPU_NODES", "GPUCheck"]

#: The node choice that probes every alive node with a GPU.
ALL_GPU_NODES = "all GPU nodes"

Runner = Callable[..., list[Any]]


def _gib(value: Any) -> str:
    return "-" if value is None else format_bytes(value)


def _gpu_nodes() -> list[tuple[str, str]]:
    """(label, node id) of every alive GPU node, if this kernel is connected; else none."""
    import ray

    from ..hpc import _internal

    if not ray.is_initialized():
        return []
    snap = _internal.current_snapshot(max_age=0)
    return [
        (f"{n.node_id[:8]} ({n.total.get('GPU', 0):g} GPU, {n.address})", n.node_id)
        for n in (snap.alive_nodes if snap else [])
        if n.total.get("GPU", 0) > 0
    ]


class GPUCheck(widgets.VBox):
    """Verify GPU use interactively: a request (fractions too), a node or all GPU nodes, Verify.

    Verify runs the probes in a background thread (the button is disabled meanwhile) and fills
    one row per probe: pass or fail, node, device, memory and the verdict. Errors appear in the
    widget, not as a traceback.

    >>> import eugo_jupyter as eugo
    >>> w = eugo.widgets.GPUCheck(num_gpus=0.25)     # doctest: +SKIP
    >>> w                                            # doctest: +SKIP
    """

    num_gpus = traitlets.Float(1.0, help="GPUs each probe requests: a fraction below 1 or a whole number.")
    node = traitlets.Unicode(ALL_GPU_NODES, help="A node id to probe, or 'all GPU nodes'.")
    running = traitlets.Bool(False, help="True while Verify is running.", read_only=True)
    results: traitlets.List[Any] = traitlets.List(help="One dict per probe (GPUReport.as_dict()), from the last Verify.")
    error = traitlets.Unicode("", help="The error of the last Verify, if it failed.")

    def __init__(self, num_gpus: float = 1.0, node: str = ALL_GPU_NODES, *,
                 runner: Runner | None = None, timeout: float = 60.0, **kwargs: Any) -> None:  # fmt: skip
        self._runner = runner
        self._timeout = timeout
        self._thread: threading.Thread | None = None
        self._gpus = widgets.FloatText(value=num_gpus, step=0.25, description="num_gpus",
                                       layout=widgets.Layout(width="180px"))  # fmt: skip
        self._nodes = widgets.Dropdown(description="node", layout=widgets.Layout(width="360px"))
        self._button = widgets.Button(description="Verify", button_style="primary", icon="check")
        self._status = widgets.HTML()
        self._table = widgets.HTML()
        super().__init__(
            children=[widgets.HBox([self._gpus, self._nodes, self._button]), self._status, self._table],
            **kwargs,
        )
        self.add_class("eugo-gpu-check")
        self.refresh_nodes()
        self.num_gpus = num_gpus
        self.node = node
        widgets.link((self, "num_gpus"), (self._gpus, "value"))
        widgets.link((self, "node"), (self._nodes, "value"))
        self._button.on_click(lambda _: self.verify())

    def __repr__(self) -> str:
        return f"<GPUCheck num_gpus={self.num_gpus:g} node={self.node!r} rows={len(self.results)}>"

    @traitlets.validate("node")
    def _known_node(self, proposal: dict[str, Any]) -> str:
        value = proposal["value"]
        known = [v for _, v in self._nodes.options]
        if value not in known:  # a node that joined after the widget was drawn
            self._nodes.options = [*self._nodes.options, (value[:8], value)]
        return str(value)

    def refresh_nodes(self) -> None:
        """Re-read the GPU nodes of the connected cluster into the node menu."""
        try:
            found = _gpu_nodes()
        except Exception:  # noqa: BLE001 - the menu is a convenience; Verify reports real errors
            found = []
        current = self._nodes.value
        self._nodes.options = [(ALL_GPU_NODES, ALL_GPU_NODES), *found]
        known = [v for _, v in self._nodes.options]
        self._nodes.value = current if current in known else ALL_GPU_NODES

    def verify(self) -> None:
        """What the Verify button does: start the probes in the background (no-op if running)."""
        if self.running:
            return
        self.set_trait("running", True)
        self._button.disabled = True
        self._button.description = "Verifying..."
        self.error = ""
        self._status.value = "<i>running the probe...</i>"
        nodes = None if self.node == ALL_GPU_NODES else [self.node]
        self._thread = threading.Thread(target=self._work, args=(self.num_gpus, nodes), daemon=True)
        self._thread.start()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the running Verify ends; True when it has ended."""
        if self._thread is not None:
            self._thread.join(timeout)
        return not self.running

    def _work(self, num_gpus: float, nodes: list[str] | None) -> None:
        try:
            runner = self._runner
            if runner is None:
                from ..gpu.check import check_nodes as runner
            reports = runner(num_gpus, nodes, timeout=self._timeout)  # type: ignore[misc]
            self.results = [dict(r) for r in reports]
            passed = sum(bool(r["ok"]) for r in self.results)
            self._status.value = (
                f"<b>{passed} of {len(self.results)} probe(s) passed</b> "
                f"(num_gpus={num_gpus:g}, {html.escape(self.node)})"
            )
            self._table.value = self._render(self.results)
        except Exception as exc:  # noqa: BLE001 - shown in the widget, not as a traceback
            self.error = f"{type(exc).__name__}: {exc}"
            self._status.value = f"<span style='color:#c62828'><b>Error:</b> {html.escape(self.error)}</span>"
            self._table.value = ""
        finally:
            self._button.description = "Verify"
            self._button.disabled = False
            self.set_trait("running", False)

    @staticmethod
    def _render(rows: list[dict[str, Any]]) -> str:
        body = "".join(
            "<tr>"
            f"<td><b style='color:{'#2e7d32' if r['ok'] else '#c62828'}'>{'PASS' if r['ok'] else 'FAIL'}</b></td>"
            f"<td><code>{html.escape(str(r.get('node_id') or '-')[:8])}</code></td>"
            f"<td>{html.escape(str(r.get('device') or '-'))}</td>"
            f"<td>{_gib(r.get('memory_used'))} / {_gib(r.get('memory_total'))}</td>"
            f"<td>{html.escape(str(r['verdict']))}</td></tr>"
            for r in rows
        )
        return (
            "<table class='eugo-gpu-check-rows'><thead><tr><th>result</th><th>node</th>"
            f"<th>device</th><th>memory used / total</th><th>verdict</th></tr></thead><tbody>{body}</tbody></table>"
        )
