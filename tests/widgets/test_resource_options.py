"""ResourceOptions: trait values, the API's validation rules, the generated code."""

from __future__ import annotations

import subprocess
import sys

import pytest
import traitlets


def test_defaults_and_value_usable_as_options() -> None:
    import eugo_jupyter as eugo

    w = eugo.widgets.ResourceOptions()
    assert (w.num_cpus, w.num_gpus, w.memory) == (1, 0, None)
    assert w.value == {"num_cpus": 1}
    assert w.code == ".options(num_cpus=1)"
    from eugo_jupyter.hpc._options import validate_options

    assert validate_options(w.value) == {"num_cpus": 1}


def test_code_follows_the_choice() -> None:
    from eugo_jupyter.widgets import ResourceOptions

    w = ResourceOptions(num_cpus=4, num_gpus=0.25, memory="4GB")
    assert w.value == {"num_cpus": 4, "num_gpus": 0.25, "memory": "4GB"}
    assert w.code == ".options(num_cpus=4, num_gpus=0.25, memory='4GB')"
    assert ".options(num_cpus=4, num_gpus=0.25, memory=&#x27;4GB&#x27;)" in w._code_view.value
    seen = []
    w.observe(lambda change: seen.append(change["new"]), "value")
    w.num_cpus = 2
    assert seen[-1]["num_cpus"] == 2 and w.code.startswith(".options(num_cpus=2,")


@pytest.mark.parametrize(
    ("trait", "bad", "says"),
    [
        ("num_gpus", 1.5, "never part of a second one"),
        ("num_gpus", -1, "num_gpus must be"),
        ("num_cpus", -2, "num_cpus must be"),
        ("memory", "lots", 'such as "512MiB"'),
    ],
)
def test_validation_uses_the_api_rules(trait: str, bad: object, says: str) -> None:
    from eugo_jupyter.widgets import ResourceOptions

    w = ResourceOptions(num_cpus=2)
    before = dict(w.value)
    with pytest.raises(traitlets.TraitError, match=says.replace("(", r"\(")):
        setattr(w, trait, bad)
    assert w.value == before


def test_bad_input_in_a_box_is_shown_not_raised() -> None:
    from eugo_jupyter.widgets import ResourceOptions

    w = ResourceOptions()
    w._gpu_box.value = 1.5  # what typing 1.5 in the GPU box does
    assert "never part of a second one" in w.warning and "never part" in w._warning_view.value
    assert "num_gpus" not in w.value
    w._memory_box.value = "512MiB"
    assert w.value["memory"] == "512MiB" and w.warning == ""


def test_fraction_buttons_are_one_click_away() -> None:
    from eugo_jupyter.widgets import ResourceOptions

    w = ResourceOptions()
    labels = [b.description for b in w._gpu_buttons]
    assert labels == ["0.25", "0.5", "1"]
    w._gpu_buttons[1].click()
    assert w.value["num_gpus"] == 0.5 and w._gpu_box.value == 0.5
    w._gpu_buttons[2].click()
    assert w.value["num_gpus"] == 1


def test_not_connected_means_no_cluster_warning_and_no_connection() -> None:
    code = (
        "import sys, eugo_jupyter as eugo\n"
        "w = eugo.widgets.ResourceOptions(num_gpus=8)\n"
        "import ray\n"
        "print(repr(w.warning), ray.is_initialized())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "'' False"


def test_widgets_load_lazily_and_workers_import_no_jupyter() -> None:
    code = (
        "import sys, eugo_jupyter as eugo\n"
        "heavy = [m for m in ('IPython', 'ipywidgets', 'tornado') if m in sys.modules]\n"
        "print(heavy)\n"
        "eugo.widgets.ResourceOptions\n"
        "print('ipywidgets' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == ["[]", "True"]


def test_gpu_memory_replaces_the_gpu_count_and_checks_its_format() -> None:
    from eugo_jupyter.widgets import ResourceOptions

    w = ResourceOptions(num_cpus=2, num_gpus=0.5, gpu_memory="6GB")
    assert w.value == {"num_cpus": 2, "gpu_memory": "6GB"}
    assert w.code == ".options(num_cpus=2, gpu_memory='6GB')"
    with pytest.raises(traitlets.TraitError, match="gpu_memory='lots' is not allowed"):
        w.gpu_memory = "lots"
    w._gpu_memory_box.value = "a lot"  # typed in the box: shown, not raised
    assert "gpu_memory='a lot' is not allowed" in w.warning
    w.gpu_memory = None
    assert w.value == {"num_cpus": 2, "num_gpus": 0.5}


def test_gpu_memory_on_a_cluster_without_gpus_warns_live(ray_local: object) -> None:
    from eugo_jupyter.widgets import ResourceOptions

    w = ResourceOptions(gpu_memory="6GB")
    assert "needs a GPU node, and no node in this cluster has a GPU" in w.warning
