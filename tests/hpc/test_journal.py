"""The journal on disk: what a user sees after kills, damage, a second kernel, a changed function.

No cluster here: these tests drive the storage directly (the runs that write it are in
``test_journal_runs.py``).
"""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

from eugo_jupyter.exceptions import JournalError, JournalWarning
from eugo_jupyter.hpc._journal import Journal, Writer, identity_of, item_key


def _write(folder: Path, identity: str = "id-1", n: int = 3, **kw: object) -> None:
    with Writer.open(folder, identity=identity, function="f", **kw) as writer:  # type: ignore[arg-type]
        for i in range(n):
            writer.done(item_key(i), i, i * i)


def test_a_journal_is_plain_pickle_and_json_readable_without_eugo(tmp_path: Path) -> None:
    _write(tmp_path / "j", n=5)
    code = textwrap.dedent(
        f"""
        import json, pickle, pathlib
        root = pathlib.Path({str(tmp_path / "j")!r})
        index = json.loads((root / "journal.json").read_text())
        entries = [e for p in sorted((root / "g0001").glob("*.pkl"))
                   for e in pickle.loads(p.read_bytes())["entries"]]
        print(index["generations"][0]["function"], sorted(e["value"] for e in entries))
        """
    )
    # -I: isolated, so the package is not importable: only pickle and json read it.
    out = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "f [0, 1, 4, 9, 16]", out.stderr


def test_a_process_killed_while_writing_leaves_a_journal_that_opens(tmp_path: Path) -> None:
    folder = tmp_path / "j"
    code = textwrap.dedent(
        f"""
        import sys
        from eugo_jupyter.hpc import _journal
        _journal.CHUNK_ENTRIES = 10
        with _journal.Writer.open({str(folder)!r}, identity="id", function="f") as w:
            for i in range(10**9):
                w.done(str(i), i, "x" * 1000)
                if i == 200:
                    print("writing", flush=True)
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=dict(os.environ)
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "writing"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    # Whatever chunk was being written when the kill came is a temporary file, ignored.
    journal = Journal(folder)
    assert journal.done >= 200 and journal.done % 10 == 0
    assert sorted(int(k) for k, _ in journal.results()) == list(range(journal.done))
    # And the lock died with the process: a new writer opens at once and cleans up.
    with Writer.open(folder, identity="id", function="f") as writer:
        assert len(writer.stored) == journal.done
    assert not list((folder / "g0001").glob(".*.tmp"))


def test_a_truncated_chunk_costs_its_items_and_says_so(tmp_path: Path) -> None:
    folder = tmp_path / "j"
    _write(folder, n=3)
    with Writer.open(folder, identity="id-1", function="f") as writer:
        writer.done(item_key(10), 10, 100)
    chunks = sorted((folder / "g0001").glob("*.pkl"))
    assert len(chunks) == 2
    chunks[1].write_bytes(chunks[1].read_bytes()[:-7])  # cut short, as a full disk does
    with pytest.warns(
        JournalWarning, match=r"whose items run again: 000002\.pkl.*written whole is used"
    ):
        journal = Journal(folder)
    assert journal.done == 3


def test_a_damaged_index_is_a_sentence_that_keeps_the_results(tmp_path: Path) -> None:
    folder = tmp_path / "j"
    _write(folder)
    (folder / "journal.json").write_text("{not json")
    with pytest.raises(JournalError, match=r"cannot be read.*move the folder away.*clear\(\)"):
        Journal(folder)
    assert list((folder / "g0001").glob("*.pkl"))  # nothing was removed


def test_a_second_writer_is_refused_with_the_first_ones_name(tmp_path: Path) -> None:
    folder = tmp_path / "j"
    with Writer.open(folder, identity="id", function="f") as first:
        first.done("a", 0, 1)
        with pytest.raises(JournalError, match=rf"being written by pid {os.getpid()} on .*another"):
            Writer.open(folder, identity="id", function="f", wait=0.1)
        with pytest.raises(JournalError, match="being written"):
            Journal(folder).clear()
    assert Journal(folder).done == 1  # the refused writer lost nothing of the first


def test_a_changed_function_starts_a_new_generation(tmp_path: Path) -> None:
    folder = tmp_path / "j"
    _write(folder, identity="old", n=4)
    with Writer.open(folder, identity="new", function="f") as writer:
        assert writer.stored == {} and writer.previous is not None
        assert writer.previous["identity"] == "old"
        writer.done(item_key(0), 0, "fresh")
    journal = Journal(folder)
    assert [g["identity"] for g in journal.generations] == ["old", "new"]
    assert journal.done == 1 and dict(journal.results()) == {item_key(0): "fresh"}
    # The old generation is still on disk: nothing was deleted.
    assert len(list((folder / "g0001").glob("*.pkl"))) == 1


def test_carry_done_keeps_the_finished_items_not_the_failures(tmp_path: Path) -> None:
    folder = tmp_path / "j"
    with Writer.open(folder, identity="old", function="f") as writer:
        writer.done("a", 0, 1)
        writer.failed("b", 1, {"error_type": "ValueError", "message": "corrupt"})
    with Writer.open(folder, identity="fixed", function="f", carry_done=True) as writer:
        assert sorted(writer.stored) == ["a"]
        writer.done("b", 1, 2)
    journal = Journal(folder)
    assert (journal.done, journal.failed) == (2, 0)


def test_a_later_entry_of_a_key_wins(tmp_path: Path) -> None:
    folder = tmp_path / "j"
    with Writer.open(folder, identity="id", function="f") as writer:
        writer.failed("a", 0, {"error_type": "OSError", "message": "flaky"})
    with Writer.open(folder, identity="id", function="f") as writer:
        assert writer.stored["a"]["ok"] is False
        writer.done("a", 0, 42)
    assert dict(Journal(folder).results()) == {"a": 42}


def test_a_result_that_cannot_be_pickled_is_returned_not_journaled(tmp_path: Path) -> None:
    folder = tmp_path / "j"
    import threading

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with Writer.open(folder, identity="id", function="f") as writer:
            writer.done("lock", 0, threading.Lock())
            writer.done("fine", 1, lambda x: x + 1)  # cloudpickle can
    assert any("item #0 cannot be written" in str(w.message) for w in seen)
    stored = dict(Journal(folder).results())
    assert list(stored) == ["fine"] and stored["fine"](1) == 2


def test_the_summary_says_what_it_holds(tmp_path: Path) -> None:
    folder = tmp_path / "j"
    with Writer.open(folder, identity="abcdef0123456789", function="resample") as writer:
        writer.done("a", 0, 1)
        writer.failed("b", 1, {"error_type": "ValueError", "message": "bad tile"})
    journal = Journal(folder)
    text = repr(journal)
    assert "resample (identity abcdef012345)" in text and "done: 1" in text
    assert "failed: 1" in text and "generation: 1 of 1" in text
    assert "<th style='text-align:left'>failed</th><td>1</td>" in journal._repr_html_()
    assert journal.failures == [
        {"key": "b", "index": 1, "error_type": "ValueError", "message": "bad tile"}
    ]
    journal.clear()
    assert not folder.exists() and Journal(folder).done == 0


def test_the_identity_follows_helpers_and_globals_not_the_cell_file() -> None:
    namespace: dict[str, object] = {"__name__": "__main__", "SCALE": 2}
    exec("def helper(x):\n    return x * SCALE\ndef f(x):\n    return helper(x) + 1\n", namespace)
    first = identity_of(namespace["f"])
    namespace["SCALE"] = 3
    assert identity_of(namespace["f"]) != first  # a global it reads changed
    namespace["SCALE"] = 2
    exec("def helper(x):\n    return x * SCALE\n", namespace, namespace)
    assert identity_of(namespace["f"]) == first  # re-running the same cell changes nothing
    exec("def helper(x):\n    return x * SCALE - 1\n", namespace, namespace)
    assert identity_of(namespace["f"]) != first  # an edited helper
    assert identity_of(namespace["f"], {"k": 1}) != identity_of(namespace["f"], {"k": 2})


def test_item_keys_are_stable_across_processes() -> None:
    items = [("tile", 3), "path/a.tif", 7, 2.5, {"a": 1}]
    code = (
        f"from eugo_jupyter.hpc._journal import item_key; print([item_key(i) for i in {items!r}])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == repr([item_key(i) for i in items])
    assert pickle.loads(pickle.dumps(item_key(1))) == item_key(1)
