"""What showing a call's prints under its cell costs, in real kernels on one local Ray (2 CPUs).

Two kernels join the same Ray in the same run: one as a user gets it (lines routed under the
calling cell), one with ``EUGO_OUTPUT=ray`` (Ray's own printing, nothing wrapped). Rounds
alternate between them, and medians are compared.

1. A fan-out of 10,000 calls that print nothing, submitted and gathered with one ``get``:
   routed / Ray's own (target at most 1.05).
2. ``get`` of one call that prints one line, against the same call printing nothing, in the
   routed kernel: the median difference (target at most 50 ms); and of one call that writes
   its line straight to descriptor 1, as C code does (read back from the call's own file).
3. One call printing 100,000 lines: the lines shown under the cell, the kernel's memory growth,
   and the size of the notebook saved with what the front end shows.

Run: ``python benchmarks/bench_output.py`` (a few minutes). Prints a table.
"""

from __future__ import annotations

import json
import os
import queue
import statistics
import sys
import textwrap
from typing import Any

SETUP = """
import time, os, resource
import eugo_jupyter as eugo
@eugo.hpc.distribute
def quiet(x):
    return x
@eugo.hpc.distribute
def one_line(x):
    print('one line', x)
    return x
@eugo.hpc.distribute
def c_line(x):
    os.write(1, b'one line written as C code writes it\\n')
    return x
@eugo.hpc.distribute
def flood(n):
    for i in range(n):
        print('flood line', i)
    return n
eugo.hpc.get([quiet(i) for i in range(200)] + [one_line(0)])
"""

FANOUT = """
t = time.perf_counter(); eugo.hpc.get([quiet(i) for i in range(10_000)])
print('RESULT', time.perf_counter() - t)
"""

LATENCY = """
import statistics
def lat(fn, n=30):
    out = []
    for i in range(n):
        t = time.perf_counter(); eugo.hpc.get(fn(i)); out.append(time.perf_counter() - t)
    return statistics.median(out)
print('RESULT', lat(quiet), lat(one_line), lat(c_line))
"""

FLOOD = """
def rss():
    with open('/proc/self/status') as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith('VmRSS'))
before = rss(); fut = flood(100_000); eugo.hpc.get(fut)
print('RESULT', rss() - before, len(eugo.hpc.logs(fut).splitlines()))
"""


class Kernel:
    def __init__(self, address: str, **env: str) -> None:
        from jupyter_client.manager import KernelManager

        self.manager = KernelManager(kernel_name="python3")
        self.manager.start_kernel(env={**os.environ, "EUGO_CLUSTER_ADDRESS": address, **env})
        self.client = self.manager.client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=120)
        self.outputs: dict[str, dict[str, Any]] = {}  # display id -> its latest output
        self.cell_outputs: dict[str, list[Any]] = {}

    def run(self, code: str) -> str:
        msg_id = self.client.execute(textwrap.dedent(code))
        out = []
        while True:
            try:
                msg = self.client.get_iopub_msg(timeout=600)
            except queue.Empty:
                raise RuntimeError("kernel stalled") from None
            kind, content = msg["msg_type"], msg["content"]
            parent = msg["parent_header"].get("msg_id")
            if kind in ("display_data", "update_display_data"):
                key = content.get("transient", {}).get("display_id", "")
                output = {"output_type": "display_data", "data": content["data"], "metadata": {}}
                if kind == "display_data":
                    self.cell_outputs.setdefault(parent, []).append(key)
                self.outputs[key] = output
            if parent != msg_id:
                continue
            if kind == "stream":
                out.append(content["text"])
            elif kind == "error":
                raise RuntimeError("\n".join(content["traceback"]))
            elif kind == "status" and content["execution_state"] == "idle":
                return "".join(out)

    def result(self, code: str) -> list[float]:
        line = [x for x in self.run(code).splitlines() if x.startswith("RESULT")][-1]
        return [float(v) for v in line.split()[1:]]

    def close(self) -> None:
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)


def main() -> None:
    import eugo_jupyter as eugo

    connection = eugo.hpc.init(num_cpus=2)
    routed = Kernel(connection.address)
    plain = Kernel(connection.address, EUGO_OUTPUT="ray")
    try:
        for kernel in (routed, plain):
            kernel.run(SETUP)
        fan: dict[str, list[float]] = {"routed": [], "plain": []}
        for _ in range(3):
            fan["routed"].append(routed.result(FANOUT)[0])
            fan["plain"].append(plain.result(FANOUT)[0])
        r, p = statistics.median(fan["routed"]), statistics.median(fan["plain"])
        print(f"fan-out of 10,000 quiet calls: routed {r:.2f} s, Ray's own {p:.2f} s, "
              f"ratio {r / p:.3f} (target <= 1.05)")  # fmt: skip
        quiet, one, c_line = routed.result(LATENCY)
        diff = (one - quiet) * 1e3
        print(f"get of one call: quiet {quiet * 1e3:.1f} ms, printing one line "
              f"{one * 1e3:.1f} ms, difference {diff:.1f} ms (target <= 50)")  # fmt: skip
        print(f"get of one call writing one line straight to its descriptor: "
              f"{c_line * 1e3:.1f} ms, {(c_line - quiet) * 1e3:+.1f} ms against quiet")  # fmt: skip
        before = set(routed.cell_outputs)
        grown, kept = routed.result(FLOOD)
        cells = [c for c in routed.cell_outputs if c not in before]
        shown = 0
        outputs = []
        for cell in cells:
            for key in routed.cell_outputs[cell]:
                output = routed.outputs[key]
                outputs.append(output)
                shown += str(output["data"].get("text/plain", "")).count("flood line")
        notebook = {
            "cells": [
                {
                    "cell_type": "code",
                    "source": FLOOD,
                    "metadata": {},
                    "outputs": outputs,
                    "execution_count": 1,
                }
            ],  # fmt: skip
            "metadata": {},
            "nbformat": 4,
            "nbformat_minor": 5,
        }
        size = len(json.dumps(notebook, indent=1))
        print(f"100,000 lines from one call: {shown} shown under the cell, {int(kept):,} kept "
              f"for eugo.hpc.logs(fut), kernel memory +{grown / 2**20:.1f} MiB, saved "
              f"notebook {size / 1024:.1f} KiB")  # fmt: skip
    finally:
        routed.close()
        plain.close()
        eugo.hpc.shutdown()


if __name__ == "__main__":
    sys.exit(main())
