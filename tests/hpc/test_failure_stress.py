"""A failed, interrupted or timed-out batch, partition or cell never aborts the driver (issue 27's
dead kernel).

Ray 2.60's ``ray.cancel`` of a task that completes at that moment aborts the whole process
(``task_manager.cc: Check failed: it != submissible_tasks_.end() Tried to complete task that
was not pending``), whatever ``force`` and ``recursive`` say. ``map`` and the accessors used to
cancel the siblings of a failed unit, most of which were finishing: in a loop the driver died
within a few dozen rounds. A Ctrl-C (here ``_thread.interrupt_main``) of a map or an accessor
lets its units go the same way; a cell's timeout or Ctrl-C cancels its task only while it still
runs, and the rounds end their cells about when the cancel comes. Each stress runs in a child
process, so that an abort fails the test instead of ending pytest, on one node and on two.
Bounded by rounds, not by time.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

STRESS = textwrap.dedent(
    """
    import _thread
    import random
    import sys
    import threading
    import time

    import pandas as pd
    from IPython.core.interactiveshell import InteractiveShell

    import eugo_jupyter as eugo
    from eugo_jupyter.exceptions import MapItemError, PartitionError

    nodes = int(sys.argv[1])
    if nodes == 2:
        from ray.cluster_utils import Cluster
        from eugo_jupyter._raystate import enable_token_auth

        enable_token_auth()
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 4})
        cluster.add_node(num_cpus=4)
        cluster.wait_for_nodes()
        eugo.hpc.init(address=cluster.address)
    else:
        eugo.hpc.init(num_cpus=8)

    def item(x):
        if x == 30:
            raise ValueError("item 30")
        return x * 2

    def row(v):
        if v == 300:
            raise ValueError("row 300")
        return v

    # Eight slots (more than this machine's cores: declared, so that 24 units are in flight and
    # many siblings are completing when one fails, which is when Ray's race bites).
    frame = pd.DataFrame({"a": range(400)})
    for _ in range(30):  # a failing batch: its siblings are finishing as it fails
        try:
            eugo.hpc.map(item, range(200), batch_size=1)
        except MapItemError:
            pass
        else:
            raise AssertionError("the failing item did not fail the map")
    for _ in range(15):  # a failing partition, and a keyword the function does not take
        for call in (lambda: frame["a"].eugo.map(row, partitions=16),
                     lambda: frame["a"].eugo.map(row, partitions=16, unknown=1)):
            try:
                call()
            except (PartitionError, TypeError):
                pass
            else:
                raise AssertionError("the failing partition did not fail the call")
    def nap(x):
        time.sleep(0.01)
        return x

    def interrupted(call, after):  # Ctrl-C `after` seconds into `call`: True if it stopped it
        lock, running = threading.Lock(), [True]

        def press():
            with lock:
                if running[0]:
                    _thread.interrupt_main()

        timer = threading.Timer(after, press)
        timer.start()
        try:
            try:
                call()
            finally:
                with lock:  # a Ctrl-C pressed as the call returned is raised here at the latest
                    running[0] = False
                timer.cancel()
        except KeyboardInterrupt:
            return True
        return False

    # Ctrl-C while units are finishing all the time: map and the accessors let them go.
    stopped = 0
    for _ in range(6):
        mapping = lambda: eugo.hpc.map(nap, range(400), batch_size=1)
        partitioned = lambda: frame["a"].eugo.map(nap, partitions=16)
        stopped += interrupted(mapping, random.uniform(0.2, 1.0))
        stopped += interrupted(partitioned, random.uniform(0.1, 0.6))
    assert stopped, "no Ctrl-C landed during a call"
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "eugo_jupyter")
    for _ in range(3):  # a failing cell, and a cell cancelled by its timeout
        assert not shell.run_cell("%%distribute\\nx = 1\\n1 / 0\\n").success
        assert not shell.run_cell(
            "%%distribute --timeout 1\\nimport time\\ntime.sleep(30)\\n"
        ).success
    # Cells that end about when their timeout or a Ctrl-C stops them: the cancel of a task that
    # completes at that moment is Ray's abort, so a cell cancels only a task still running.
    for _ in range(6):
        seconds = random.uniform(0, 1.2)
        shell.run_cell(f"%%distribute --timeout 1\\nimport time\\ntime.sleep({seconds:.2f})\\n")
        cell = f"%%distribute\\nimport time\\ntime.sleep({seconds:.2f})\\n"
        interrupted(lambda: shell.run_cell(cell), random.uniform(0.3, 1.5))
    # The driver is alive and still works.
    print("after", eugo.hpc.map(item, range(30)) == [x * 2 for x in range(30)], flush=True)
    eugo.hpc.shutdown()
    if nodes == 2:
        cluster.shutdown()
    """
)


@pytest.mark.parametrize("nodes", [1, 2])
def test_failing_units_and_cancelled_cells_never_abort_the_driver(nodes: int) -> None:
    child = subprocess.run(
        [sys.executable, "-c", STRESS, str(nodes)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    output = child.stdout + child.stderr
    assert "Check failed" not in output, output[-4000:]
    assert child.returncode == 0, output[-4000:]
    assert "after True" in child.stdout
