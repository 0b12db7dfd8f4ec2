"""A call's printed lines appear under the cell that made it, in a real kernel (issue 22).

What is "under a cell" is what a notebook front end shows there: the cell's own stream messages
plus the displays it made, in their latest state (JupyterLab applies ``update_display_data`` by
display id, whatever cell runs when it arrives; tests/ui/test_call_output_ui.py checks that in the
browser). The kernel caps floods at 50 lines per call and 120 per cell here, to keep it quick.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest

from tests.fixtures.waiting import until

from ._kernel import Kernel, kernel_for


@pytest.fixture(scope="module")
def kernel(ray_local: Any) -> Iterator[Kernel]:
    with kernel_for(
        ray_local.address, EUGO_OUTPUT_PER_CALL="50", EUGO_OUTPUT_PER_CELL="120"
    ) as ran:
        ran.run(
            """
            import time
            @eugo.hpc.distribute
            def talk(word, n=1, delay=0.0):
                time.sleep(delay)
                for i in range(n):
                    print(word, i)
                return n
            """
        )
        yield ran


def test_lines_printed_after_the_cell_finished_stay_under_it_and_none_fold(
    kernel: Kernel,
) -> None:
    first = kernel.run("futs = [talk('same line', 1, 1.5), talk('same line', 1, 1.5)]")
    second = kernel.run("time.sleep(4)")
    assert kernel.until(lambda: kernel.under(first).count("same line 0") == 2)
    shown = kernel.under(first)
    assert shown.count("[talk] same line 0") == 2  # both, unfolded, with the function's name
    assert "same line" not in kernel.under(second)
    assert "pid=" not in shown and "\x1b[" not in shown


def test_get_returns_after_the_lines_the_call_printed_are_shown(kernel: Kernel) -> None:
    cell = kernel.run("print('value', eugo.hpc.get(talk('before the value', 2)))")
    order = kernel.order[cell]
    shown = [i for i, item in enumerate(order) if "before the value 1" in item]
    value = [i for i, item in enumerate(order) if item.startswith("stream:value 2")]
    assert shown and value and shown[0] < value[0], order


def test_a_flood_is_capped_and_logs_returns_every_line(kernel: Kernel) -> None:
    cell = kernel.run("flood = talk('flood', 5000); eugo.hpc.get(flood)")
    assert kernel.until(lambda: "more lines" in kernel.under(cell))
    shown = kernel.under(cell)
    assert shown.count("[talk] flood") == 50
    assert "4,950 more lines from talk not shown" in shown and "eugo.hpc.logs(fut)" in shown
    count = kernel.run("print(len(eugo.hpc.logs(flood).splitlines()), eugo.hpc.logs(flood)[-11:])")
    assert kernel.stream(count).strip() == "5000 flood 4999"


def test_the_cap_per_cell_counts_all_calls_of_the_cell(kernel: Kernel) -> None:
    cell = kernel.run("eugo.hpc.get([talk(f'call{k}', 40) for k in range(4)])")
    assert kernel.until(lambda: "more lines" in kernel.under(cell))
    shown = kernel.under(cell)
    assert sum(shown.count(f"[talk] call{k}") for k in range(4)) == 120
    assert "40 more lines from talk" in shown


def test_map_batches_print_under_the_cell_with_the_maps_name(kernel: Kernel) -> None:
    cell = kernel.run(
        """
        def noisy(x):
            print('item', x)
            return x
        eugo.hpc.map(noisy, range(3), batch_size=1)
        """
    )
    assert kernel.until(lambda: kernel.under(cell).count("[map(noisy)] item") == 3)


def test_stderr_lines_are_shown_too(kernel: Kernel) -> None:
    cell = kernel.run(
        """
        import sys
        @eugo.hpc.distribute
        def warn():
            print('to stderr', file=sys.stderr)
        eugo.hpc.get(warn())
        """
    )
    assert "[warn] to stderr" in kernel.under(cell)


def test_the_token_notice_stays_out_of_the_first_cell(ray_local: Any) -> None:
    with kernel_for(ray_local.address) as fresh:
        cell = fresh.run("eugo.hpc.init()")
        assert "Token authentication" not in fresh.under(cell)


def test_a_plain_script_prints_as_ray_does(ray_local: Any) -> None:
    script = textwrap.dedent(
        f"""
        import sys
        import eugo_jupyter as eugo
        eugo.hpc.init(address={ray_local.address!r})
        @eugo.hpc.distribute
        def hello():
            print("hello from a task")
        eugo.hpc.get(hello())
        sys.stdin.readline()   # Ray's log stream is asynchronous: stay until the test has read
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-u", "-c", script],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        line = ""
        assert proc.stdout is not None
        for _ in range(2000):  # bounded: Ray prints the line within seconds
            line = proc.stdout.readline()
            if not line or "hello from a task" in line:
                break
        assert "hello from a task" in line and "pid=" in line  # Ray's own prefix, not ours
    finally:
        proc.kill()
        proc.wait()


def test_actor_methods_print_under_the_calling_cell_unfolded(kernel: Kernel) -> None:
    cell = kernel.run(
        """
        @eugo.hpc.distribute
        class Greeter:
            def __init__(self):
                self.calls = 0
            def hi(self):
                self.calls += 1
                print('actor says hi')
                return self.calls
        greeters = [Greeter(), Greeter(), Greeter()]
        print(eugo.hpc.get([g.hi() for g in greeters]), eugo.hpc.get(greeters[0].hi()))
        """
    )
    shown = kernel.under(cell)
    assert shown.count("[Greeter.hi] actor says hi") == 4, shown  # shown before get returned
    assert "[1, 1, 1] 2" in kernel.stream(cell)  # the actor keeps its state
    later = kernel.run("fut = greeters[1].hi()")
    kernel.run("time.sleep(2)")
    assert kernel.until(lambda: "[Greeter.hi] actor says hi" in kernel.under(later))


def test_pandas_partitions_print_under_the_cell(kernel: Kernel) -> None:
    cell = kernel.run(
        """
        import pandas as pd
        import eugo_jupyter.pandas
        def tell(part):
            print('partition of', len(part))
            return part
        frame = pd.DataFrame({"x": range(8)})
        out = frame.eugo.map_partitions(tell, partitions=2)
        """
    )
    assert kernel.until(lambda: kernel.under(cell).count("partition of 4") == 2), kernel.under(cell)


def test_output_written_straight_to_the_descriptors_shows_under_the_cell_and_only_there(
    kernel: Kernel,
) -> None:
    # C code and subprocesses write to the worker's descriptors, past sys.stdout.
    cell = kernel.run(
        """
        import os, subprocess
        def native():
            print('from Python')
            os.write(1, b'from a C library\\n')
            subprocess.run(['echo', 'from a subprocess'], check=True)
            os.write(2, b'to the C stderr\\n')
            return 'done'
        low_level = eugo.hpc.distribute(native)
        @eugo.hpc.distribute
        class Native:
            def call(self):
                return native()
        straight = low_level()
        print(eugo.hpc.get(straight))
        library = Native()
        print(eugo.hpc.get(library.call()))
        """
    )
    shown = kernel.under(cell)  # before get returned
    for line in ("from Python", "from a C library", "from a subprocess", "to the C stderr"):
        assert f"[native] {line}" in shown and f"[Native.call] {line}" in shown, shown

    # Ray's own copy stays out of the notebook. The actor's worker then writes a line past eugo
    # (Ray's __ray_call__ runs a function in the actor, unwrapped): once Ray's log stream has
    # brought that line, it would have brought the call's lines before it.
    kernel.run(
        "library.handle.__ray_call__.remote("
        "lambda _: (os.write(1, b'past eugo\\n'), os.write(2, b'past eugo\\n')))"
    )

    def everywhere() -> str:
        return "".join(text for cell in kernel.streams.values() for _, text in cell)

    assert kernel.until(lambda: everywhere().count("past eugo") == 2), everywhere()
    assert "from a C library" not in everywhere() and "to the C stderr" not in everywhere()
    text = kernel.value("print(eugo.hpc.logs(straight))")
    assert "from Python" in text and "from a C library" in text and "from a subprocess" in text


def test_async_actor_methods_print_under_the_calling_cell_each_under_its_own_call(
    kernel: Kernel,
) -> None:
    # An async actor runs its calls at once on one event loop: each call's lines are its own.
    cell = kernel.run(
        """
        import asyncio
        @eugo.hpc.distribute
        class Waiter:
            async def wait(self, tag, n):
                for i in range(n):
                    print('async', tag, i)
                    await asyncio.sleep(0.05)
                return tag
        waiter = Waiter()
        both = [waiter.wait('a', 3), waiter.wait('b', 3)]
        print(eugo.hpc.get(both))
        """
    )
    shown = kernel.under(cell)
    assert all(f"[Waiter.wait] async {t} {i}" in shown for t in "ab" for i in range(3)), shown
    assert "pid=" not in shown
    text = kernel.value("print(eugo.hpc.logs(both[0]))")
    assert "async a 2" in text and "async b" not in text  # each call keeps its own lines
    later = kernel.run("late = waiter.wait('late', 2)")
    kernel.run("time.sleep(2)")
    assert kernel.until(lambda: "[Waiter.wait] async late 1" in kernel.under(later))


def test_generator_tasks_and_methods_print_under_the_calling_cell(kernel: Kernel) -> None:
    # Ray's streaming generators: a generator task, a generator method, an async one.
    cell = kernel.run(
        """
        import asyncio
        @eugo.hpc.distribute
        def count(n):
            for i in range(n):
                print('made', i)
                yield i
        @eugo.hpc.distribute
        class Source:
            def items(self, n):
                for i in range(n):
                    print('item', i)
                    yield i * 10
            async def slowly(self, n):
                for i in range(n):
                    print('slow', i)
                    await asyncio.sleep(0.01)
                    yield i
        source = Source()
        stream = count(3)
        print([eugo.hpc.get(ref) for ref in stream])
        print([eugo.hpc.get(ref) for ref in source.items(2)])
        """
    )
    assert "[0, 1, 2]" in kernel.stream(cell) and "[0, 10]" in kernel.stream(cell)
    shown = kernel.under(cell)
    assert all(f"[count] made {i}" in shown for i in range(3)), shown  # before each get returned
    assert "[Source.items] item 1" in shown and "pid=" not in shown
    later = kernel.run("slow = source.slowly(3)\nasync_items = [eugo.hpc.get(r) for r in slow]")
    assert kernel.until(lambda: "[Source.slowly] slow 2" in kernel.under(later)), kernel.under(
        later
    )
    assert "made 2" in kernel.value("print(eugo.hpc.logs(stream))")


def test_calls_made_while_a_profile_records_print_under_the_calling_cell(kernel: Kernel) -> None:
    cell = kernel.run(
        """
        @eugo.hpc.distribute
        class Tally:
            def add(self, k):
                print('adding', k)
                return k
        tally = Tally()
        with eugo.hpc.profile() as recorded:
            print(eugo.hpc.get([talk('while profiled', 1), tally.add(5)]))
        """
    )
    shown = kernel.under(cell)
    assert "[talk] while profiled 0" in shown and "[Tally.add] adding 5" in shown, shown
    assert "pid=" not in shown


def test_a_no_block_cell_prints_under_its_cell_after_it_finished(kernel: Kernel) -> None:
    first = kernel.run(
        """
        %%distribute --no-block --out later_cell
        import time
        for i in range(3):
            time.sleep(0.5)
            print('still going', i)
        """
    )
    second = kernel.run("time.sleep(3)")
    assert kernel.until(lambda: "still going 2" in kernel.under(first)), kernel.under(first)
    assert "still going" not in kernel.under(second)
    assert "still going 1" in kernel.value("print(eugo.hpc.logs(later_cell))")
    # get of the cell's future returns once the lines it printed are shown, as for a call.
    first = kernel.run(
        "%%distribute --no-block --out quick_cell\nimport time\ntime.sleep(1)\n"
        "print('said before the value')\n"
    )
    kernel.run("eugo.hpc.get(quick_cell)")
    assert "said before the value" in kernel.under(first)


def test_a_blocking_cell_prints_into_its_own_cell_as_a_call_does(kernel: Kernel) -> None:
    # The cell is a call like any other: C-level and subprocess lines show too, as the cell's
    # own streams (no prefix, no output area of its own).
    cell = kernel.run(
        """
        %%distribute
        import os, sys
        print('cell says')
        os.system('echo cell subprocess')
        os.write(2, b'cell C stderr\\n')
        """
    )
    out, err = kernel.stream(cell), kernel.stream(cell, "stderr")
    assert "cell says\n" in out and "cell subprocess\n" in out, (out, err)
    assert "cell C stderr\n" in err, (out, err)
    assert "[%%distribute" not in kernel.under(cell) and "pid=" not in kernel.under(cell)


def test_after_shutdown_the_output_pump_leaves_ray_alone_and_the_next_call_prints(
    kernel: Kernel,
) -> None:
    """Last in this module: it disconnects the kernel. Before, the pump's ``ray.get`` started a
    default Ray on its own thread after ``eugo.hpc.shutdown()``, and the notebook's next call
    failed with "Perhaps you called ray.init twice by accident?"."""
    kernel.run("eugo.hpc.get(talk('before'))")
    pumped = kernel.value(
        "import ray\nfrom eugo_jupyter.hpc._output import kernel\n"
        "eugo.hpc.shutdown()\nkernel.router.pump()\nray.is_initialized()"
    )
    assert pumped == "False"
    cell = kernel.run("print('again', eugo.hpc.get(talk('after the shutdown')))")
    assert "again 1" in kernel.stream(cell), kernel.stream(cell)
    assert kernel.until(lambda: "[talk] after the shutdown 0" in kernel.under(cell))


def test_an_actors_init_prints_under_the_cell_that_created_it(kernel: Kernel) -> None:
    cell = kernel.run(
        """
        @eugo.hpc.distribute
        class Loud:
            def __init__(self, name):
                print('created', name)
                self.name = name
            def hi(self):
                return self.name
        loud = Loud('first')
        eugo.hpc.get(loud.hi())
        """
    )
    later = kernel.run("time.sleep(0.5)")
    assert kernel.until(lambda: "[Loud] created first" in kernel.under(cell))
    assert "created" not in kernel.under(later) and "pid=" not in kernel.under(cell)


def test_calls_with_optimize_print_under_the_calling_cell_once(kernel: Kernel) -> None:
    cell = kernel.run(
        """
        @eugo.hpc.distribute(optimize=True)
        def shout(n):
            print('optimized', n)
            return n + 1
        [eugo.hpc.get(shout(k)) for k in range(3)]
        """
    )
    assert kernel.until(lambda: "[shout] optimized 2" in kernel.under(cell))
    shown = kernel.under(cell)
    # Verifying runs the compiled version beside Python: its prints must not show twice.
    assert [shown.count(f"[shout] optimized {k}") for k in range(3)] == [1, 1, 1], shown


def test_an_async_actors_plain_methods_print_without_blocking_its_loop(kernel: Kernel) -> None:
    """Ray refuses a blocking ``ray.get`` in an async actor (it warns into the notebook): its
    ``__init__``, plain and generator methods hand their lines over without one."""
    cell = kernel.run(
        """
        import asyncio
        @eugo.hpc.distribute
        class Mixed:
            def __init__(self):
                print('mixed ready')
            def plain(self, x):
                print('plain', x)
                return x
            def gen(self, n):
                for i in range(n):
                    print('gen', i)
                    yield i
            async def tick(self):
                await asyncio.sleep(0)
                return 'tick'
        mixed = Mixed()
        print(eugo.hpc.get(mixed.plain(7)), [eugo.hpc.get(r) for r in mixed.gen(2)],
              eugo.hpc.get(mixed.tick()))
        """
    )
    assert "7 [0, 1] tick" in kernel.stream(cell)
    after = kernel.run("time.sleep(1)")  # Ray's warning, if any, arrives through its stream
    assert kernel.until(lambda: "[Mixed.gen] gen 1" in kernel.under(cell))
    shown = kernel.under(cell) + kernel.under(after)
    assert "[Mixed] mixed ready" in shown and "[Mixed.plain] plain 7" in shown, shown
    assert "blocking ray.get" not in shown, shown


def test_dynamic_and_streaming_generators_in_a_notebook_behave_as_under_ray(
    kernel: Kernel,
) -> None:
    # In a kernel eugo wraps each function to route its prints (issue 37): the blocks a
    # num_returns="dynamic" task reports, and a streaming method of an actor declared with
    # actor options, must still be Ray's.
    cell = kernel.run(
        """
        import ray
        def split(n):
            for i in range(n):
                print('block', i)
                yield [i] * (i + 1)
        class Source:
            def items(self, n):
                for i in range(n):
                    print('item', i)
                    yield i * 10
        seen = {}
        for name, deco in (("ray", ray.remote), ("eugo", eugo.hpc.distribute)):
            f = deco(num_returns="dynamic")(split)
            blocks = ray.get(f.remote(3) if name == "ray" else f(3))
            actor = deco(max_concurrency=2, max_restarts=1)(Source)
            a = actor.remote() if name == "ray" else actor()
            items = a.items.remote(2) if name == "ray" else a.items(2)
            seen[name] = (type(blocks).__name__, [ray.get(b) for b in blocks],
                          type(items).__name__, [ray.get(r) for r in items])
        print(seen["ray"] == seen["eugo"], seen["eugo"])
        """
    )
    assert (
        "True ('DynamicObjectRefGenerator', [[0], [1, 1], [2, 2, 2]], 'ObjectRefGenerator', "
        "[0, 10])" in kernel.stream(cell)
    ), kernel.under(cell)
    assert kernel.until(lambda: "[split] block 2" in kernel.under(cell)), kernel.under(cell)
    assert kernel.until(lambda: "[Source.items] item 1" in kernel.under(cell))


class _StuckHub:
    """A hub whose ``take`` waits until a file exists (bounded): a hub on a cluster that just
    died answers no better."""

    def take(self, begun: str, flag: str) -> tuple[dict[str, Any], list[str]]:
        import os
        import time

        open(begun, "w").close()
        for _ in range(1200):
            if os.path.exists(flag):
                break
            time.sleep(0.05)
        return {}, []


def test_letting_go_of_a_cluster_does_not_wait_for_a_stuck_take_but_the_pump_leaves_ray_first(
    ray_local: Any, tmp_path: Any
) -> None:
    """The output thread's take from a hub on a dying cluster waits (up to 10 s); letting go of
    the cluster (``disconnect``, then Ray's shutdown) must not wait behind it, or Ray ends the
    kernel's process first. Before, the take held the router's lock. Nor may Ray shut down
    while the pump still waits in ``ray.get``: that crashed the process (ray-project/ray#31145,
    a segmentation fault in CI); before, ``disconnect`` returned with the pump still in Ray."""
    import threading

    import ray

    from eugo_jupyter.hpc._output.router import Router

    begun, flag = tmp_path / "begun", tmp_path / "release"
    hub = ray.remote(_StuckHub).options(num_cpus=0).remote()

    class Stuck:  # the router calls hub.take.remote(); this hub's take waits on the flag
        class take:  # the method's name
            @staticmethod
            def remote() -> Any:
                return hub.take.remote(str(begun), str(flag))

    router = Router(None, tasks=False)
    router.hub, router.cluster = Stuck(), "here"
    outcome: list[str] = []

    def pump() -> None:
        try:
            router.pump()
            outcome.append("returned")
        except Exception as exc:  # noqa: BLE001 - before: the take timed out (disconnect waited)
            outcome.append(type(exc).__name__)

    pumping = threading.Thread(target=pump, daemon=True)
    pumping.start()
    until(begun.exists, "the pump's take to reach the hub")
    left = threading.Event()
    threading.Thread(target=lambda: (router.disconnect(), left.set()), daemon=True).start()
    try:
        assert left.wait(timeout=60), "disconnect waited for the stuck take"
        assert router.hub is None
        # The pump had left Ray when disconnect returned (it no longer holds the pumping
        # lock), without an error; the take, still waiting, is dropped. The thread's own
        # record of that comes just after the lock is let go, so it is joined for first.
        assert router.pumping.acquire(blocking=False), "disconnect returned with the pump in Ray"
        router.pumping.release()
        pumping.join(timeout=60)
        assert outcome == ["returned"], outcome
    finally:
        flag.touch()  # the take answers only now: had disconnect waited, it would have timed out
        pumping.join(timeout=60)
    ray.kill(hub)
