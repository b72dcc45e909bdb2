"""MGPU LoRA on the comfy backend: ComfyUI's ModelPatcher applies the LoRAs in every rank (issue 17).

Claims, on the tiny checkpoint and the shared LoRA files, CPU workers:
- after every switch of a sequence (A, B, none, A then B at -0.5, A), every rank's diffusion-model
  weights are bit-equal to native ComfyUI's CheckpointLoaderSimple + a chain of LoraLoaderModelOnly
  on the same files (so its forward is native's); the base is loaded once;
- switching never drifts: A -> B -> none -> A gives the bits of a fresh load with A, and none the bits
  of the fresh base (bf16 weights, where ComfyUI rounds the patched sum stochastically);
- a LoRA file that fits nothing is refused with its name before any weight changes.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from comfyui_harness import comfyui_in_process, comfyui_root
from safetensors.torch import save_file

from ltx2_mgpu.workers.rank.ops_lora import weights_fingerprint
from ltx2_mgpu.workers.wire.errors import JobInputError

pytestmark = pytest.mark.comfyui


@pytest.fixture(scope="module")
def native(lora_files) -> Iterator:
    """fingerprint(((lora, strength), ...)) of native ComfyUI's weights for that LoRA chain."""
    with comfyui_in_process(comfyui_root()) as mm:
        import folder_paths

        import nodes  # ComfyUI's nodes.py, not our package

        folder_paths.add_model_folder_path("checkpoints", str(lora_files["checkpoint"].parent))
        for name in ("lora", "alpha"):
            folder_paths.add_model_folder_path("loras", str(lora_files[name].parent))

        @functools.cache  # one native load per chain for the whole module
        def fingerprint(chain: tuple[tuple[Path, float], ...]) -> str:
            (model,) = nodes.CheckpointLoaderSimple().load_checkpoint(lora_files["checkpoint"].name)[:1]
            for path, strength in chain:
                (model,) = nodes.LoraLoaderModelOnly().load_lora_model_only(model, path.name, strength)
            mm.load_models_gpu([model], force_full_load=True)
            return weights_fingerprint([model.model.diffusion_model])

        yield fingerprint


def load(group, checkpoint: Path, dtype: str) -> None:
    group.run(
        "load_model",
        {
            "checkpoint": str(checkpoint),
            "dtype": dtype,
            "backend": "comfy",
            "comfyui_root": str(comfyui_root()),
        },
    )


def state(group) -> tuple[list, str]:
    """(the active set, the weights' fingerprint), checked alike on every rank."""
    results = group.run("lora_state")
    assert all(r == results[0] for r in results), "ranks disagree on their weights"
    return results[0]["active"], results[0]["fingerprint"]


def set_loras(group, chain: tuple[tuple[Path, float], ...]) -> dict:
    reports = group.run("set_loras", {"loras": [[str(path), strength] for path, strength in chain]})
    return reports[0]


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_each_lora_set_is_native_lora_loader_bit_for_bit(make_group, lora_files, native, workers):
    a, b = lora_files["lora"], lora_files["alpha"]  # rank 4; rank 8 with alpha 4
    group = make_group(f"cpu:{workers}")
    load(group, lora_files["checkpoint"], "float32")  # what CheckpointLoaderSimple picks on the CPU
    assert state(group) == ([], native(()))
    sequence = [((a, 1.0),), ((b, 0.7),), (), ((a, 1.0), (b, -0.5)), ((a, 0.0), (b, 0.0)), ((a, 1.0),)]
    for chain in sequence:
        report = set_loras(group, chain)
        active = [[str(p), s] for p, s in chain if s != 0.0]
        assert state(group) == (active, native(tuple((p, s) for p, s in chain if s != 0.0))), chain
        assert report["fused"] == (56 if active else 0)  # every block Linear of the tiny model
    assert set_loras(group, ((a, 1.0),)) == {**set_loras(group, ((a, 1.0),)), "changed": False}


def test_switching_lora_sets_gives_the_bits_of_fresh_loads(make_group, lora_files):
    a, b = lora_files["lora"], lora_files["alpha"]
    group = make_group("cpu:1")
    load(group, lora_files["checkpoint"], "bfloat16")
    _, base = state(group)
    set_loras(group, ((a, 1.0),))
    _, with_a = state(group)
    for chain in (((b, 1.0),), (), ((a, 1.0),)):
        set_loras(group, chain)
    assert state(group) == ([[str(a), 1.0]], with_a)
    set_loras(group, ())
    assert state(group) == ([], base)
    group.run("unload_model")
    load(group, lora_files["checkpoint"], "bfloat16")
    set_loras(group, ((a, 1.0),))
    assert state(group)[1] == with_a and with_a != base


def test_a_lora_that_fits_nothing_is_refused_and_the_set_stays(make_group, lora_files, tmp_path):
    stray = tmp_path / "for-another-model.safetensors"
    save_file({"lora_unet_down_blocks_0.lora_down.weight": torch.zeros(4, 8)}, str(stray))
    group = make_group("cpu:1")
    load(group, lora_files["checkpoint"], "float32")
    set_loras(group, ((lora_files["lora"], 1.0),))
    before = state(group)
    with pytest.raises(JobInputError, match=r"for-another-model\.safetensors changes no weight"):
        set_loras(group, ((stray, 1.0),))
    with pytest.raises(JobInputError, match=r"missing\.safetensors does not exist"):
        set_loras(group, ((tmp_path / "missing.safetensors", 1.0),))
    assert state(group) == before
