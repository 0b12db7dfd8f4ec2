"""%eugo status | connect ADDRESS | options | check, through a real IPython shell and Ray."""

from __future__ import annotations

from typing import Any

import pytest
from IPython.core.error import UsageError


def test_status_shows_the_cluster_summary(ray_local: Any, run: Any) -> None:
    ran = run("%eugo status\n")
    assert ran.result.success, ran.text
    info = ran.result.result
    assert info.total("CPU") == 2
    bundle = info._repr_mimebundle_()
    assert "<table" in bundle["text/html"] and "1 node" in bundle["text/plain"]


def test_connect_to_the_same_cluster_keeps_the_connection(ray_local: Any, run: Any) -> None:
    ran = run(f"%eugo connect {ray_local.address}\n")
    assert ran.result.success, ran.text
    assert ran.result.result.address == ray_local.address
    assert "Disconnecting" not in ran.text


def test_connect_to_nothing_keeps_the_working_connection(ray_local: Any, run: Any) -> None:
    import socket

    import eugo_jupyter as eugo

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free_port = s.getsockname()[1]
    ran = run(f"%eugo connect 127.0.0.1:{free_port}\n")
    assert "No Ray cluster answers" in ran.text and "Traceback" not in ran.text
    assert f"Still connected to {ray_local.address}" in ran.text
    assert "Disconnecting" not in ran.text
    # The cluster the notebook was using still runs its work, with nothing to reconnect.
    ran = run("%eugo status\n")
    assert ran.result.success and ran.result.result.address == ray_local.address

    @eugo.hpc.distribute
    def twice(x: int) -> int:
        return 2 * x

    assert eugo.hpc.get(twice(21), timeout=60) == 42


def test_connect_to_a_port_that_is_not_ray_keeps_the_connection(ray_local: Any, run: Any) -> None:
    import socket

    with socket.socket() as listener:  # answers TCP, speaks no Ray
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        ran = run(f"%eugo connect 127.0.0.1:{port}\n")
    assert "not as a Ray cluster's GCS" in ran.text and "Traceback" not in ran.text
    assert run("%eugo status\n").result.result.address == ray_local.address


def test_options_shows_the_widget_with_the_flags(ray_local: Any, run: Any) -> None:
    ran = run("%eugo options --num-cpus 4 --num-gpus 0.25\n")
    assert ran.result.success, ran.text
    widget = ran.result.result
    assert widget.value == {"num_cpus": 4, "num_gpus": 0.25}
    assert widget.code == ".options(num_cpus=4, num_gpus=0.25)"


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("%eugo stat", "Did you mean %eugo status?"),
        ("%eugo connect", "needs an address"),
        ("%eugo status 1.2.3.4:6379", "takes no address"),
        ("%eugo status --num-gpus 1", "Resource flags go with"),
        ("%eugo options --num-gpus 1.5", "num_gpus=1.5 is not allowed"),
        ("%eugo", "COMMAND"),
    ],
)
def test_bad_usage_says_what_to_type(run: Any, line: str, says: str) -> None:
    ran = run(line + "\n")
    assert isinstance(ran.result.error_in_exec, UsageError), ran.text
    assert says in ran.text


def test_check_tells_the_truth_on_a_cluster_without_gpus(ray_local: Any, run: Any) -> None:
    ran = run("%eugo check\n")
    assert ran.result.success, ran.text
    report = ran.result.result
    assert report.ok is False and report["cuda"] is False
    assert "no node in this cluster has a GPU" in report.verdict
    assert "FAIL" in report._repr_html_().upper()


def test_gpu_memory_flag_is_sized_on_the_clusters_gpus(ray_local: Any, run: Any) -> None:
    # No GPU on this cluster: sizing refuses with the fix, before anything is submitted.
    ran = run("%%distribute --gpu-memory 6GB\nx = 1\n")
    assert isinstance(ran.result.error_in_exec, UsageError), ran.text
    assert "gpu_memory='6GB' needs a GPU node" in str(ran.result.error_in_exec)
    ran = run("%eugo options --gpu-memory lots\n")
    assert "gpu_memory='lots' is not allowed" in str(ran.result.error_in_exec)
