"""``eugo.hpc.readiness`` on real Ray: verdicts, checklists, and numbers that agree with each other.

The cluster: an embedded Ray with 2 CPUs that *declares* one GPU (Ray's bookkeeping; there is
no GPU on this machine, which is exactly what the GPU-unused check must notice). No assertion
compares a time with the wall clock: the numbers are checked against
each other and the verdicts against what the functions do.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import eugo_jupyter as eugo
from eugo_jupyter.exceptions import OptionsError
from eugo_jupyter.hpc._readiness.model import Measurements, plan_batches, predict


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    eugo.hpc.shutdown()
    yield eugo.hpc.init(num_cpus=2, num_gpus=1)
    eugo.hpc.shutdown()


def tiny(x: int) -> int:
    return x + 1


def slow(x: int) -> int:
    time.sleep(0.2)
    return x


def size_of(blob: bytes) -> int:
    return len(blob)


def check(report: Any, name: str) -> Any:
    return next(c for c in report.checks if c.name == name)


def test_a_tiny_function_one_task_per_item_is_not_worth_it(cluster: Any) -> None:
    report = eugo.hpc.readiness(tiny, range(2000), batch_size=1)
    assert report.verdict.startswith("not worth it: each item takes "), report.verdict
    assert report.verdict.endswith("; run it here or batch it")
    items = check(report, "items large enough")
    assert items.ok is False and 'batch_size="auto"' in items.fix
    data = report.as_dict()
    assert data["prediction"]["batches"] == [1] * 2000
    # tiny items were called well beyond the 8 sampled, and the prediction uses that mean
    sustained = data["measurements"]["sustained_per_item_s"]
    assert sustained > 0 and data["prediction"]["serial_s"] == pytest.approx(2000 * sustained)
    assert data["prediction"]["speedup"] < 1
    assert not report.ok
    assert "not worth it" in repr(report) and "not worth it" in report._repr_html_()


def test_a_long_function_is_worth_it_and_the_numbers_agree(cluster: Any) -> None:
    report = eugo.hpc.readiness(slow, range(60))
    m, p = report.measurements, report.prediction
    assert report.verdict == f"worth it: about {p.speedup:.1f}x faster on 2 slots"
    assert report.ok
    assert m.slots == 2 and m.sampled == 8
    assert all(t >= 0.2 for t in m.per_item_s)  # measured on the worker, includes the sleep
    mean = sum(m.per_item_s) / len(m.per_item_s)
    assert p.serial_s == pytest.approx(60 * mean)
    assert p.speedup == pytest.approx(p.serial_s / p.parallel_s)
    assert p.efficiency == pytest.approx(p.speedup / 2)
    assert p.ideal_s == pytest.approx(p.serial_s / 2)
    assert p.parallel_s >= p.ideal_s and 1.5 <= p.speedup <= 2
    assert sum(p.batches) == 60 and p.batches[0] == 1  # map's probe first
    assert p.batches == plan_batches(60, mean, 2, "auto")
    assert all(c.ok is not False for c in report.checks)
    data = report.as_dict()
    assert data["measurements"]["per_item_mean_s"] == pytest.approx(mean)
    assert data["measurements"]["per_item_median_s"] <= max(m.per_item_s)
    assert data["checks"][0]["name"] == "arguments can be pickled"


def test_an_unpicklable_argument_is_named_with_the_fix(cluster: Any) -> None:
    items = [1, 2, threading.Lock()]
    report = eugo.hpc.readiness(tiny, items)
    failing = check(report, "arguments can be pickled")
    assert failing.ok is False
    assert "item #2 (lock) cannot be pickled" in failing.detail
    assert "build it inside the function" in failing.fix
    assert report.verdict.startswith("not ready: item #2 (lock) cannot be pickled")
    assert report.measurements is None and report.as_dict()["prediction"] is None


def test_a_huge_argument_fails_the_shipping_check(cluster: Any) -> None:
    blobs = [bytes(2 << 20) for _ in range(12)]
    report = eugo.hpc.readiness(size_of, blobs)
    failing = check(report, "arguments small enough to ship per call")
    assert failing.ok is False
    assert "each item is 2 MiB after serialization" in failing.detail
    assert "eugo.hpc.put" in failing.fix
    m = report.measurements
    # the cost per byte was measured both ways: into the store here, out of it on the workers
    assert m.per_byte_s > 0 and m.worker_per_byte_s > 0
    assert m.shipped_bytes == pytest.approx(m.arg_bytes, rel=0.01)  # distinct blobs: no sharing
    total = sum(b * (m.shipped_bytes + m.result_bytes) for b in report.prediction.batches)
    busy = m.per_byte_s if m.busy_per_byte_s is None else m.busy_per_byte_s
    # the notebook's rate lies between its idle and its busy one, the workers' is added
    low, high = sorted([m.per_byte_s, busy])
    assert total * (low + m.worker_per_byte_s) * (1 - 1e-9) <= report.prediction.transfer_s
    assert report.prediction.transfer_s <= total * (high + m.worker_per_byte_s) * (1 + 1e-9)
    assert report.verdict.startswith("not worth it")


def test_a_gpu_request_the_function_does_not_use(cluster: Any) -> None:
    report = eugo.hpc.readiness(slow, range(4), num_gpus=1)
    failing = check(report, "the GPU requested is used")
    assert failing.ok is False
    assert "slow asked for 1 GPU and never used it" in failing.detail
    assert "drop num_gpus" in failing.fix
    assert report.measurements.slots == 1  # one declared GPU in the cluster


def test_a_request_no_node_can_run_is_not_ready(cluster: Any) -> None:
    report = eugo.hpc.readiness(slow, range(4), num_gpus=2)
    assert report.verdict.startswith("not ready: needs 2 GPUs"), report.verdict
    assert check(report, "the request can run").ok is False


def test_bad_input_says_what_is_allowed() -> None:
    with pytest.raises(OptionsError, match="batch_size=0 is not allowed"):  # map's own rule
        eugo.hpc.readiness(tiny, [1], batch_size=0)
    with pytest.raises(ValueError, match="at least one item"):
        eugo.hpc.readiness(tiny, [])


def test_the_prediction_replays_maps_batching() -> None:
    # 1 ms items on 4 slots: map probes with 1, grows fourfold towards its target per batch
    # (62.5 ms here: the whole second of work cut into four batches per slot)
    m = Measurements(
        "f", 1000, 5, [0.001] * 5, 10, 10, 0.0005, 0.001, 0.0, 4, {"CPU": 1}, "auto", "n"
    )
    p = predict(m)
    assert p.batches[:3] == [1, 4, 16] and max(p.batches) == 62 and sum(p.batches) == 1000
    # no start_s measured: the first batch costs a round trip (1 ms) plus its submission
    assert p.overhead_s == pytest.approx(0.0015 + (len(p.batches) - 1) * 0.0005)
    assert p.serial_s == pytest.approx(1.0)
    assert p.ideal_s < p.parallel_s < p.serial_s
    # the same items one task each: overhead (0.5 ms x 1000) rivals the work
    one = predict(
        Measurements("f", 1000, 5, [0.001] * 5, 10, 10, 0.0005, 0.001, 0.0, 4, {"CPU": 1}, 1, "n")
    )
    assert one.batches == [1] * 1000 and one.parallel_s > p.parallel_s
    assert math.isclose(one.speedup, one.serial_s / one.parallel_s)


def measured(items: int, per_item: float, batch_size: int | str, **costs: Any) -> Measurements:
    base = {"overhead_s": 0.0, "latency_s": 0.0, "per_byte_s": 0.0, "arg_bytes": 0.0}
    base.update(costs)
    return Measurements(
        "f",
        items,
        5,
        [per_item] * 5,
        base.pop("arg_bytes"),
        0.0,
        base.pop("overhead_s"),
        base.pop("latency_s"),
        base.pop("per_byte_s"),
        2,
        {"CPU": 1},
        batch_size,
        "n",
        **base,
    )


def test_each_batch_costs_maps_measured_cost_on_the_notebook() -> None:
    # no-op items: the first batch costs a whole one-batch map, each further one its own cost
    p = predict(measured(50, 0.0, 1, overhead_s=0.002, start_s=0.03))
    assert p.parallel_s == pytest.approx(0.03 + 49 * 0.002)
    # the per-batch cost is serial in the notebook: it caps throughput even with free slots
    busy = predict(measured(50, 0.001, 1, overhead_s=0.002, start_s=0.03))
    assert busy.parallel_s == pytest.approx(0.03 + 49 * 0.002 + 0.001)


def test_the_probe_runs_alone_before_anything_else() -> None:
    # 100 ms items, auto: the probe (1 item) is collected before the others are submitted
    p = predict(measured(10, 0.1, "auto", overhead_s=0.0, start_s=0.05))
    assert p.batches[0] == 1
    assert p.serial_part_s == pytest.approx(0.05 + 0.1)
    # then the other 9 items, one per batch, on 2 slots: 5 rounds
    assert p.batches == [1] * 10 and p.parallel_s == pytest.approx(0.15 + 5 * 0.1)
    # with a fixed batch size there is no probe: 10 items in 5 rounds from the start
    fixed = predict(measured(10, 0.1, 1, overhead_s=0.0, start_s=0.05))
    assert fixed.serial_part_s == 0 and fixed.parallel_s == pytest.approx(0.05 + 5 * 0.1)


def test_the_in_flight_limit_holds_submissions_back() -> None:
    # 12 slow single-item batches on 2 slots: 6 in flight at most, so the 7th is submitted only
    # when the first ends; a cheap submission cannot run ahead of the work
    p = predict(measured(12, 1.0, 1, overhead_s=0.01, start_s=0.01))
    assert p.parallel_s == pytest.approx(6.0 + 0.01, abs=0.02)


def test_bytes_shipped_are_counted_per_batch_as_map_ships_them() -> None:
    heavy = measured(6, 0.0, 1, overhead_s=0.001, start_s=0.01, arg_bytes=1e6, per_byte_s=1e-9)
    p = predict(heavy)
    assert p.transfer_s == pytest.approx(6 * 1e6 * 1e-9)
    assert p.parallel_s == pytest.approx(0.01 + 5 * 0.001 + 6 * 1e-3)
    # items sharing one big object ship it once per batch, whatever the batch's size
    shared = dict(start_s=0.01, arg_bytes=1e6, per_byte_s=1e-9, shipped_bytes=10.0,
                  batch_shared_bytes=1e6)  # fmt: skip
    assert predict(measured(6, 0.0, 6, **shared)).transfer_s == pytest.approx((1e6 + 60) * 1e-9)
    assert predict(measured(6, 0.0, 1, **shared)).transfer_s == pytest.approx(6 * (1e6 + 10) * 1e-9)


def test_reading_a_batch_takes_its_slot_not_the_notebook() -> None:
    # 10 batches of one 1 MB item on 2 slots, nothing else to pay: the workers' reads (1 ms
    # each) run on both slots at once, 5 rounds; the notebook ships nothing
    costs = dict(start_s=0.01, arg_bytes=1e6, worker_per_byte_s=1e-9)
    p = predict(measured(10, 0.0, 1, **costs))
    assert p.parallel_s == pytest.approx(0.01 + 5 * 1e-3)
    assert p.transfer_s == pytest.approx(10 * 1e-3)


def test_the_notebook_ships_slower_while_the_slots_are_busy() -> None:
    base = dict(start_s=0.01, overhead_s=0.001, arg_bytes=1e6, per_byte_s=1e-9)
    idle = predict(measured(40, 0.01, 4, **base))
    busy = predict(measured(40, 0.01, 4, **base, busy_per_byte_s=4e-9))
    assert busy.parallel_s > idle.parallel_s and busy.transfer_s > idle.transfer_s
    # no-op items never keep a slot busy: the busy rate does not apply
    noop = predict(measured(40, 0.0, 4, **base, busy_per_byte_s=4e-9))
    assert noop.transfer_s == pytest.approx(40 * 1e6 * 1e-9)


def data_heavy(items: int, nbytes: float) -> Measurements:
    # shaped like bench_readiness's distinct-payload cells at 8 ms per item on 2 slots, with
    # costs per byte of the size measured there (ns per byte: 1 put, 2.5 busy, 0.7 read)
    return measured(
        items, 0.008, "auto", overhead_s=0.002, start_s=0.006, arg_bytes=nbytes,
        shipped_bytes=nbytes, per_byte_s=1e-9, busy_per_byte_s=2.5e-9, worker_per_byte_s=0.7e-9,
    )  # fmt: skip


def test_data_heavy_items_are_predicted_by_where_their_bytes_go() -> None:
    # 400 x 1 MB: the work (3.2 s) outweighs the shipping, which overlaps it: faster than serial
    # (a run measured 0.8x when the cost per byte was taken from one item per batch)
    small = predict(data_heavy(400, 1e6))
    assert small.ideal_s < small.parallel_s < small.serial_s and small.speedup > 1
    # 80 x 10 MB: the notebook's shipping (at least 800 MB at 1 ns) bounds the run, well over
    # the work per slot, and distributing does not pay
    large = predict(data_heavy(80, 1e7))
    assert large.parallel_s >= 80 * 1e7 * 1e-9 > large.ideal_s
    assert large.parallel_s > large.serial_s


def test_items_sharing_one_object_are_measured_as_map_ships_them(cluster: Any) -> None:
    blob = bytes(1 << 20)
    report = eugo.hpc.readiness(size_of, [blob] * 12)  # twelve references to one blob
    m = report.measurements
    assert m.arg_bytes > 1 << 20  # one item alone carries the blob
    assert m.batch_shared_bytes > 1 << 20 and m.shipped_bytes < 100  # a batch carries it once


def test_the_sustained_per_item_time_outweighs_a_few_short_calls() -> None:
    few = measured(100, 0.001, 10, start_s=0.01)
    held = measured(100, 0.001, 10, start_s=0.01, sustained_per_item_s=0.002)
    assert predict(few).serial_s == pytest.approx(0.1)
    assert predict(held).serial_s == pytest.approx(0.2)
    assert predict(held).parallel_s > predict(few).parallel_s
