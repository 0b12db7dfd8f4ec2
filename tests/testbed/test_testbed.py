"""The test bed itself: separate addresses, private /data, refusal when the range is taken."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.testbed import BRIDGE, TestBed, TestBedError, available

pytestmark = pytest.mark.skipif(available() is not None, reason=str(available()))


@pytest.fixture(scope="module")
def bed() -> Iterator[TestBed]:
    with TestBed(3, refuse_key=(2,)) as testbed:
        yield testbed


def test_each_host_has_its_own_address(bed: TestBed) -> None:
    hosts = bed.hosts[:2]
    seen = [bed.ssh(host, "hostname -I").stdout.split() for host in hosts]
    assert seen == [[host.address] for host in hosts]


def test_a_file_in_a_hosts_data_is_not_visible_to_the_notebook_and_the_reverse(
    bed: TestBed,
) -> None:
    name = f"eugo-{uuid.uuid4().hex}.txt"
    first, second, _ = bed.hosts
    made = bed.ssh(first, f"echo written-on-host > /data/{name} && cat /data/{name}")
    assert made.stdout == "written-on-host\n", made.stderr
    assert not Path("/data", name).exists()  # the notebook (this process) does not see it
    assert bed.ssh(second, f"test -e /data/{name}").returncode == 1  # nor does another host

    mine = Path("/data", f"notebook-{name}")
    mine.write_text("written-in-notebook")
    try:
        assert bed.ssh(first, f"test -e /data/notebook-{name}").returncode == 1
        # ...while the rest of the file system is shared: the notebook's temp files are seen.
        shared = bed.dir / name
        shared.write_text("shared")
        assert bed.ssh(first, f"cat {shared}").stdout == "shared"
    finally:
        mine.unlink()


def test_a_hosts_shell_reads_its_own_bashrc_not_this_machines(bed: TestBed) -> None:
    # Each ssh command runs root's ~/.bashrc first: this machine's may start tools whose state
    # is shared with every shell here (a stale lock of pyenv's made each command wait 60 s).
    first = bed.hosts[0]
    seen = bed.ssh(first, "cat ~/.bashrc")
    assert seen.stdout == f"# {first.name}'s own ~/.bashrc (a test host)\n", seen.stderr


def test_a_refused_key_is_refused(bed: TestBed) -> None:
    result = bed.ssh(bed.hosts[2], "true")
    assert result.returncode == 255
    assert "Permission denied" in result.stderr


def test_a_second_bed_refuses_to_start_while_one_runs(bed: TestBed) -> None:
    with pytest.raises(TestBedError, match=f"{BRIDGE} exists already"):
        TestBed(1).__enter__()
