"""`ltx2-mgpu make-tiny DIR` writes what the example workflows need on the tiny model, the stage-2
LoRA included (issue 20 item 8), and that LoRA loads in our MGPU LoRA and in ComfyUI's LoraLoader."""

from __future__ import annotations

from pathlib import Path

import pytest
from safetensors import safe_open

from ltx2_mgpu.cli import main
from ltx2_mgpu.workers.embedded.tiny_model import CHECKPOINT_FILE_NAME, LORA_FILE_NAME, UPSCALER_FILE_NAME
from ltx2_mgpu.workers.engine.ltxcore.checkpoint import read_safetensors_header
from ltx2_mgpu.workers.engine.ltxcore.lora import read_lora


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("make-tiny")
    assert main(["make-tiny", str(folder)]) == 0
    return folder


def lora_pairs(path: Path) -> int:
    with safe_open(str(path), framework="pt") as f:
        return sum(1 for key in f.keys() if key.endswith(".lora_A.weight"))


def test_make_tiny_writes_a_lora_that_mgpu_lora_takes(made):
    for name in (CHECKPOINT_FILE_NAME, UPSCALER_FILE_NAME, LORA_FILE_NAME):
        assert (made / name).is_file(), f"make-tiny did not write {name}"
    lora = read_lora(made / LORA_FILE_NAME, read_safetensors_header(made / CHECKPOINT_FILE_NAME))
    assert len(lora.targets) == lora_pairs(made / LORA_FILE_NAME) > 0, "a LoRA pair changes nothing"


@pytest.mark.comfyui
def test_the_tiny_lora_loads_in_comfyuis_lora_loader(made):
    from comfyui_harness import comfyui_in_process, comfyui_root

    with comfyui_in_process(comfyui_root()):
        import folder_paths

        import nodes  # ComfyUI's nodes.py

        folder_paths.add_model_folder_path("checkpoints", str(made))
        folder_paths.add_model_folder_path("loras", str(made))
        model, _clip, _vae = nodes.CheckpointLoaderSimple().load_checkpoint(CHECKPOINT_FILE_NAME)
        (patched,) = nodes.LoraLoaderModelOnly().load_lora_model_only(model, LORA_FILE_NAME, 1.0)
    # ComfyUI only logs keys it cannot place; every pair must have become a patch of a weight.
    assert len(patched.patches) == lora_pairs(made / LORA_FILE_NAME) > 0


def test_make_tiny_families(tmp_path, monkeypatch, capsys):
    """--family picks the release; an unknown one is refused by name, and 2.3 without any ComfyUI says
    how to point at one (it builds ComfyUI's own classes)."""
    import sys

    assert main(["make-tiny", "--family", "9", str(tmp_path)]) == 2
    assert "--family '9' is not one of 2, 2.3" in capsys.readouterr().err
    if "comfy.model_management" in sys.modules:
        pytest.skip("ComfyUI is imported in this process; make-tiny --family 2.3 would use it")
    monkeypatch.delenv("COMFYUI_PATH", raising=False)
    assert main(["make-tiny", "--family", "2.3", str(tmp_path)]) == 1
    assert "found no ComfyUI: set COMFYUI_PATH" in capsys.readouterr().err
    assert not list(tmp_path.glob("*.safetensors"))
