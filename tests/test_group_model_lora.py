"""ComfyUI's LoRA loaders on the MGPU Loader's MODEL (NOTE [node patches] in nodes/group_model/patches.py).

LoraLoaderModelOnly on CheckpointLoaderSimple's MODEL (native, one process) against the same node on
the MGPU Loader's MODEL (1 and 2 CPU ranks, float32, the tiny LTX-2): at most 1e-5 of the largest
native magnitude per stream; chained nodes; a strength change and back to no LoRA (bit for bit the
base run); composed with the loader's own lora_name. The patch set travels once per distinct set.
"""

from __future__ import annotations

import pytest
import torch
from test_comfyui_native_parity import comfy, errors  # noqa: F401
from test_group_model import RELATIVE_TOLERANCE, Graph, _stop_group, group_model, run_graph  # noqa: F401

from ltx2_mgpu.workers.group.manager import get_manager

pytestmark = pytest.mark.comfyui
GRAPH = Graph(sampler="euler")


@pytest.fixture(scope="module")
def loras(lora_files):
    import folder_paths

    folder_paths.add_model_folder_path("loras", str(lora_files["lora"].parent))
    return lora_files["lora"].name, lora_files["alpha"].name


def lora_node(model, name: str, strength: float):
    import nodes  # ComfyUI's nodes.py

    return nodes.LoraLoaderModelOnly().load_lora_model_only(model, name, strength)[0]


class SentSets:
    """Counts the requests that carry a patch set's tensors (the rest name it by token)."""

    def __init__(self, call) -> None:
        self.call, self.run, self.sent = call, call._run_job, 0

    def __enter__(self):
        def run(request):
            self.sent += getattr(request, "patches", None) is not None
            return self.run(request)

        self.call._run_job = run
        return self

    def __exit__(self, *exc):
        self.call._run_job = self.run


def assert_close(ours, native, what: str) -> None:
    found = errors(ours, native)
    print(f"\n[group MODEL + LoRA node] {what}: rel {[f'{r:.2e}' for _, r in found]}")
    assert len(found) == 2 and all(rel <= RELATIVE_TOLERANCE for _, rel in found), (what, found)


def test_lora_node_matches_native_then_switches_and_restores(comfy, group_model, loras):  # noqa: F811
    name, _ = loras
    call = group_model.model.diffusion_model.call
    ranks = call.recipe.world_size
    base = run_graph(comfy, group_model, GRAPH)
    for strength in (0.8, 0.3):
        native = run_graph(comfy, lora_node(comfy.model, name, strength), GRAPH)
        with SentSets(call) as sent:
            ours = run_graph(comfy, lora_node(group_model, name, strength), GRAPH)
        assert_close(ours, native, f"{ranks} ranks, strength {strength}")
        assert sent.sent == 1, "the patch set travels once, then by token"
        # The LoRA matters here: without it the result is far off.
        assert max(rel for _, rel in errors(base, native)) > 1e-3
    again = run_graph(comfy, group_model, GRAPH)  # the MODEL without the node: the base restored
    assert all(torch.equal(a, b) for a, b in zip(again, base))


def test_the_console_says_how_the_lora_node_was_made_live(comfy, group_model, loras, caplog):  # noqa: F811
    """A LoRA node's set on the MODEL path: fused once and kept, the base back, then swapped in."""
    name, _ = loras
    with_lora = lora_node(group_model, name, 0.7)
    lines = []
    for model in (with_lora, group_model, with_lora):
        caplog.clear()
        with caplog.at_level("INFO", logger="ltx2_mgpu"):
            run_graph(comfy, model, GRAPH)
        lines.append([r.getMessage() for r in caplog.records if "LoRA set" in r.getMessage()])
    assert len(lines[0]) == 1 and "kept beside the base" in lines[0][0], lines
    assert len(lines[1]) == 1 and "base weights stayed" in lines[1][0], lines
    assert len(lines[2]) == 1 and "kept on the device since its first use" in lines[2][0], lines


def test_two_lora_nodes_chained(comfy, group_model, loras):  # noqa: F811
    first, second = loras
    native = run_graph(comfy, lora_node(lora_node(comfy.model, first, 0.8), second, -0.5), GRAPH)
    ours = run_graph(comfy, lora_node(lora_node(group_model, first, 0.8), second, -0.5), GRAPH)
    assert_close(ours, native, "two nodes")


def test_lora_node_after_the_loaders_lora(comfy, group_model, tiny, loras):  # noqa: F811
    """The loader's lora_name, then a LoraLoaderModelOnly: composed in that order, as two nodes natively."""
    from ltx2_mgpu.nodes.loader import load_model

    first, second = loras
    ranks = group_model.model.diffusion_model.call.recipe.world_size
    _, with_lora, _info = load_model(
        tiny.checkpoint.name, f"cpu:{ranks}", "float32", lora_name=first, lora_strength=0.8
    )
    native = run_graph(comfy, lora_node(lora_node(comfy.model, first, 0.8), second, 0.6), GRAPH)
    ours = run_graph(comfy, lora_node(with_lora, second, 0.6), GRAPH)
    assert_close(ours, native, "loader lora_name + node")


def test_a_restarted_group_gets_the_patch_set_again(comfy, group_model, loras):  # noqa: F811
    name, _ = loras
    model = lora_node(group_model, name, 0.8)
    first = run_graph(comfy, model, GRAPH)
    get_manager().unload("the test unloads")
    again = run_graph(comfy, model, GRAPH)
    assert all(torch.equal(a, b) for a, b in zip(first, again))


def test_weight_patches_with_a_function_are_refused(group_model):  # noqa: F811
    def scale(weight):
        return weight * 2

    key = next(iter(group_model.model.state_dict()))
    with pytest.raises(ValueError, match=r"with a function .*scale.*remove the node"):
        group_model.clone().add_patches({(key, None, scale): ("diff", (torch.zeros(1),))}, 1.0)
    with pytest.raises(ValueError, match="weight hooks"):
        group_model.clone().add_hook_patches(None, {}, 1.0)
