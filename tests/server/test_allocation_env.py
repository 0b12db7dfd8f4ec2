"""Reading the job from the schedulers' own variables, against their documented formats.

SLURM's host lists (``scontrol show hostnames`` expands the same forms: ``tux[1-3,7]``, zero
padding kept, several bracket groups, several lists), ``SLURM_JOB_CPUS_PER_NODE`` (``72(x2),36``
in sbatch's manual), Grid Engine's ``PE_HOSTFILE`` (sge_pe(5): host, slots, queue, processor
range per line) and PBS's ``PBS_NODEFILE`` (one line per slot). Pure: nothing is started.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from eugo_jupyter.exceptions import OptionsError
from eugo_jupyter.server.backends.allocation_env import (
    detect,
    expand_counts,
    expand_hostlist,
    gpus_here,
    parse_nodefile,
    parse_pe_hostfile,
    ports_of,
)


@pytest.mark.parametrize(
    ("text", "hosts"),
    [
        ("node[01-03,07]", ["node01", "node02", "node03", "node07"]),
        ("tux[1-3,7]", ["tux1", "tux2", "tux3", "tux7"]),
        ("gpu1", ["gpu1"]),
        ("a[8-10],b2", ["a8", "a9", "a10", "b2"]),
        ("rack[1-2]-n[01,03]", ["rack1-n01", "rack1-n03", "rack2-n01", "rack2-n03"]),
        ("n[009-011]", ["n009", "n010", "n011"]),
    ],
)
def test_slurm_host_lists_expand_in_order(text: str, hosts: list[str]) -> None:
    assert expand_hostlist(text) == hosts


def test_a_broken_host_list_says_what_is_wrong() -> None:
    with pytest.raises(OptionsError, match="unclosed"):
        expand_hostlist("node[01-03")
    with pytest.raises(OptionsError, match="n or n-m"):
        expand_hostlist("node[a-b]")


def test_slurm_cpu_counts_expand_per_node() -> None:
    assert expand_counts("72(x2),36") == [72, 72, 36]
    assert expand_counts("4") == [4]
    with pytest.raises(OptionsError, match="4\\(x2\\),2"):
        expand_counts("4x2")


def test_pe_hostfile_lines_give_hosts_and_slots() -> None:
    text = (
        "node01.example.org 8 all.q@node01.example.org UNDEFINED\n"
        "node02.example.org 4 all.q@node02.example.org <NULL>\n"
        "node01.example.org 2 gpu.q@node01.example.org 0,1\n"
    )
    assert parse_pe_hostfile(text) == [("node01.example.org", 10), ("node02.example.org", 4)]


def test_pbs_nodefile_counts_slots_per_host() -> None:
    assert parse_nodefile("n1\nn1\nn2\n\n") == [("n1", 2), ("n2", 1)]


def test_a_slurm_job_puts_this_node_first_with_its_own_cpus() -> None:
    job = detect({
        "SLURM_JOB_ID": "4242", "SLURM_JOB_NODELIST": "c[1-3]",
        "SLURM_JOB_CPUS_PER_NODE": "8,4(x2)", "SLURMD_NODENAME": "c2",
        "SLURM_CPUS_ON_NODE": "4", "CUDA_VISIBLE_DEVICES": "0,1",
    })  # fmt: skip
    assert [(n.name, n.cpus) for n in job.nodes] == [("c2", 4), ("c1", 8), ("c3", 4)]
    assert job.gpus == 2 and job.scheduler == "slurm" and job.launcher[0] == "srun"


def test_grid_engine_and_pbs_jobs_read_their_files(tmp_path: Path) -> None:
    pe = tmp_path / "pe"
    pe.write_text("h1 4 all.q@h1 UNDEFINED\nh2 2 all.q@h2 UNDEFINED\n")
    job = detect({"JOB_ID": "7", "PE_HOSTFILE": str(pe)})
    assert job.scheduler == "gridengine" and {(n.name, n.cpus) for n in job.nodes} == {
        ("h1", 4), ("h2", 2),
    }  # fmt: skip
    nodefile = tmp_path / "nodes"
    nodefile.write_text("p1\np1\np1\np2\n")
    job = detect({"PBS_JOBID": "9.server", "PBS_NODEFILE": str(nodefile)})
    assert job.launcher[:2] == ("pbsdsh", "-h") and len(job.nodes) == 2


def test_outside_a_job_the_sentence_says_where_to_run() -> None:
    with pytest.raises(OptionsError, match="inside a job"):
        detect({})
    with pytest.raises(OptionsError, match="PE_HOSTFILE='/nonexistent' cannot be read"):
        detect({"JOB_ID": "1", "PE_HOSTFILE": "/nonexistent"})


def test_gpus_and_ports_come_from_the_job() -> None:
    assert gpus_here({"SLURM_JOB_GPUS": "0,1,2"}) == 3
    assert gpus_here({"CUDA_VISIBLE_DEVICES": ""}) == 0
    # Two jobs on one node get different blocks; one job's nodes on one machine differ too.
    assert ports_of("1001", 0) != ports_of("1002", 0)
    assert ports_of("1001", 1) - ports_of("1001", 0) == 10
