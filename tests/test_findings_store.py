"""The findings store next to cluster records: bounded, newest first, owner-only, atomic."""

from __future__ import annotations

import stat

from eugo_jupyter import records


def run(created: float, function: str) -> records.RunFindings:
    return {
        "version": 1,
        "created": created,
        "functions": [function],
        "summary": {"tasks": 3.0, "speedup": 1.5},
        "timeline": {"workers": 2.0, "tail_s": 0.1},
        "findings": [{"kind": "tiny_tasks", "function": function, "message": "m", "fix": "f"}],
    }


def test_the_newest_runs_are_kept_newest_first_and_private() -> None:
    cluster = "c-store-1"
    for n in range(records.FINDINGS_KEPT + 3):
        path = records.write_findings(cluster, run(1000.0 + n, f"f{n}"))
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    kept = records.read_findings(cluster)
    assert len(kept) == records.FINDINGS_KEPT
    newest = records.FINDINGS_KEPT + 2
    assert [r["functions"][0] for r in kept[:2]] == [f"f{newest}", f"f{newest - 1}"]
    assert len(list(records.findings_dir(cluster).glob("*.json"))) == records.FINDINGS_KEPT
    assert not list(records.findings_dir(cluster).glob(".tmp-*"))  # writes are atomic renames


def test_a_cluster_without_runs_and_a_forgotten_cluster_have_none() -> None:
    assert records.read_findings("c-never-profiled") == []
    records.write_record({"id": "c-store-2", "name": "x", "kind": "local", "address": "1.2.3.4:1"})
    records.write_findings("c-store-2", run(1.0, "g"))
    assert len(records.read_findings("c-store-2")) == 1
    records.delete_record("c-store-2")
    assert records.read_findings("c-store-2") == []


def test_an_unreadable_file_is_skipped() -> None:
    records.write_findings("c-store-3", run(5.0, "ok"))
    (records.findings_dir("c-store-3") / "00000000009.000000-1-1.json").write_text("{not json")
    assert [r["functions"] for r in records.read_findings("c-store-3")] == [["ok"]]
