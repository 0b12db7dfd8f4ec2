"""Writes examples/01_quickstart.ipynb (then execute it with nbconvert to store its outputs)."""

import nbformat as nbf

md, code = nbf.v4.new_markdown_cell, nbf.v4.new_code_cell
cells = [
    md(
        "# Quick start: ordinary Python on a Ray cluster\n\n"
        "`@eugo.hpc.distribute` turns a function into a **task**: calling it returns a **future** "
        "at once, while the work happens elsewhere. With nothing configured, the first call "
        "starts an embedded local Ray sized to this machine; the same code runs on a real cluster "
        "once the EugoHPC Manager (or `eugo.hpc.init(address=...)`) points it there."
    ),
    code(
        "import time\n\nimport eugo_jupyter as eugo\n\n"
        "eugo.hpc.init(num_cpus=2)   # optional: the first call would do it\n"
        "eugo.hpc.cluster()"
    ),
    md("## A function becomes a task"),
    code(
        "@eugo.hpc.distribute\ndef simulate(seed):\n"
        "    time.sleep(0.5)          # stands in for real work\n"
        "    return seed * seed\n\nfuture = simulate(3)          # returns at once\nfuture"
    ),
    code("# NBVAL_CHECK_OUTPUT\neugo.hpc.get(future)"),
    md(
        "## Fan out first, block once\n\n"
        "Blocking too early is the most common reason a distributed run gains nothing. Calling "
        "`get` inside the loop waits for each task before the next is even submitted:"
    ),
    code(
        "start = time.perf_counter()\n"
        "slow = [eugo.hpc.get(simulate(s)) for s in range(6)]   # blocks 6 times\n"
        'print(f"blocking in the loop: {time.perf_counter() - start:.1f} s")'
    ),
    md("Submit everything, then wait once; the tasks run side by side:"),
    code(
        "start = time.perf_counter()\n"
        "futures = [simulate(s) for s in range(6)]              # fan-out\n"
        "fast = eugo.hpc.get(futures)                           # block once\n"
        'print(f"fan-out, then get: {time.perf_counter() - start:.1f} s")'
    ),
    code("# NBVAL_CHECK_OUTPUT\nfast == slow, fast"),
    md("To act on results as they arrive, iterate with `as_completed`:"),
    code(
        "# NBVAL_CHECK_OUTPUT\n"
        "sorted(eugo.hpc.get(f) for f in eugo.hpc.as_completed([simulate(s) for s in range(4)]))"
    ),
    md(
        "## Ask for resources at the call site\n\n"
        "One definition, several resource profiles. The default is one CPU and no GPU; set "
        "`options()` when you know why (the task is multi-threaded, needs a GPU, or more memory)."
    ),
    code("# NBVAL_CHECK_OUTPUT\neugo.hpc.get(simulate.options(num_cpus=2)(4))"),
    md(
        "A request that no node can satisfy waits forever in Ray. Here you learn it at the call "
        "site: this machine has no GPU, so the call warns, and `waiting()` says why it waits."
    ),
    code("gpu_future = simulate.options(num_gpus=0.25)(5)"),
    code(
        "time.sleep(2)    # the cluster reports what waits about once a second\neugo.hpc.waiting()"
    ),
    code("eugo.hpc.cancel(gpu_future)   # nothing will ever run it here"),
    md(
        "## Share a large argument once\n\n"
        "Arguments are serialized into every call. Put a large object in the cluster's object "
        "store once and pass its future instead:"
    ),
    code(
        "weights = eugo.hpc.put(list(range(100_000)))\n\n"
        "@eugo.hpc.distribute\ndef score(weights, k):\n    return sum(weights) * k\n\n"
        "scores = eugo.hpc.get([score(weights, k) for k in range(3)])"
    ),
    code("# NBVAL_CHECK_OUTPUT\nscores"),
    md(
        "## An actor keeps state between calls\n\n"
        "Decorate a class: each instance lives on a worker, "
        "and each method call returns a future."
    ),
    code(
        "@eugo.hpc.distribute\nclass Counter:\n    def __init__(self):\n"
        "        self.n = 0\n\n    def incr(self, k=1):\n"
        "        self.n += k\n        return self.n\n\n"
        "counter = Counter.options(num_cpus=1)()\n"
        "counts = eugo.hpc.get([counter.incr(2), counter.incr(3)])"
    ),
    code("# NBVAL_CHECK_OUTPUT\ncounts"),
    code("eugo.hpc.shutdown()"),
]
nb = nbf.v4.new_notebook(cells=cells)
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
nbf.write(nb, "examples/01_quickstart.ipynb")
