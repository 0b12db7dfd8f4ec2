"""map's batch sizing (the planner on the shared batching engine), without a cluster."""

from __future__ import annotations

from eugo_jupyter.hpc._map import _Items, _MapPlanner


def drain(total: int, per_item: float, slots: int = 2) -> list[int]:
    """The batch sizes map would submit, with every batch reporting ``per_item`` seconds."""
    planner = _MapPlanner(_Items(range(total)), "auto", slots)
    sizes = []
    while True:
        unit = planner.next_unit()
        if unit is None:
            return sizes
        sizes.append(unit.size)
        assert unit.work[1] == list(range(unit.key, unit.key + unit.size))
        planner.finished(unit, per_item * unit.size)


def test_a_probe_first_then_batches_growing_to_about_four_per_slot() -> None:
    sizes = drain(100_000, 10e-6)
    assert sizes[0] == 1  # the probe measures before anything else is sized
    assert sum(sizes) == 100_000
    # 100,000 x 10 µs = 1 s on 2 slots: about four batches per slot, as Pool.map does.
    assert 12_000 <= max(sizes) <= 12_500
    assert len(sizes) < 30


def test_the_last_batches_shrink_so_no_worker_idles_at_the_end() -> None:
    sizes = drain(100_000, 0.1e-3)
    assert 4_900 <= max(sizes) <= 5_000  # capped at half a second of work
    assert sizes[-1] < max(sizes) / 2


def test_the_last_batches_stay_longer_than_a_batch_costs_to_start() -> None:
    # 200 x 20 ms: the tail used to shrink to one-item batches, 20 ms of work behind a 10-45 ms
    # round trip each. Every batch but the probe and the remainder keeps the 50 ms target.
    sizes = drain(200, 20e-3)
    assert sum(sizes) == 200
    assert all(size * 20e-3 >= 0.04 for size in sizes[1:-1]), sizes


def test_short_maps_keep_the_tens_of_milliseconds_target() -> None:
    sizes = drain(1_000, 10e-6)
    assert sum(sizes) == 1_000 and max(sizes) <= 5_000


def test_a_lazy_input_is_read_in_slices() -> None:
    planner = _MapPlanner(_Items(x for x in range(10)), 3, slots=2)
    units = []
    while (unit := planner.next_unit()) is not None:
        units.append(unit.work)
    assert units == [(0, [0, 1, 2]), (3, [3, 4, 5]), (6, [6, 7, 8]), (9, [9])]
