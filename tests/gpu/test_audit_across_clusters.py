"""An audit belongs to the cluster it ran on: after the kernel moves to another cluster, its
records are gone with that cluster, and reading them (directly or through a profile's report)
says so by returning none instead of failing on a dead actor."""

from __future__ import annotations

import eugo_jupyter as eugo


@eugo.hpc.distribute
def double(x: int) -> int:
    return 2 * x


def test_records_of_an_audit_from_a_previous_cluster_are_empty() -> None:
    eugo.hpc.shutdown()
    eugo.hpc.init(num_cpus=1)
    try:
        with eugo.gpu.audit():
            pass
        eugo.hpc.shutdown()
        eugo.hpc.init(num_cpus=1)  # the audit's collector died with the first cluster
        assert eugo.gpu.audit_records() == []
        with eugo.hpc.profile() as run:
            assert eugo.hpc.get(double(21)) == 42
        report = run.report()
        assert [f for f in report.findings if f["kind"] == "gpu_unused"] == []
    finally:
        eugo.hpc.shutdown()
