"""`ltx2-mgpu make-tiny DIR` writes what the example workflows need on the tiny model, the stage-2
LoRA included (issue 20 item 8), under the released names in ComfyUI's model folders (issue 39), and
that LoRA loads in our MGPU LoRA and in ComfyUI's LoraLoader."""

from __future__ import annotations

from pathlib import Path

import pytest
from safetensors import safe_open

from ltx2_mgpu.cli import main
from ltx2_mgpu.workers.embedded.released import RELEASED_LTX2
from ltx2_mgpu.workers.engine.ltxcore.checkpoint import read_safetensors_header
from ltx2_mgpu.workers.engine.ltxcore.lora import read_lora


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("make-tiny")
    assert main(["make-tiny", str(folder)]) == 0
    return folder


CHECKPOINT = Path("checkpoints", "ltx-2-19b-dev.safetensors")
LORA = Path("loras", "ltx-2-19b-distilled-lora-384.safetensors")


def lora_pairs(path: Path) -> int:
    with safe_open(str(path), framework="pt") as f:
        return sum(1 for key in f.keys() if key.endswith(".lora_A.weight"))


def test_make_tiny_writes_the_released_names_the_example_workflows_load(made):
    written = {str(p.relative_to(made)) for p in made.rglob("*") if p.is_file()}
    assert written == {f"{folder}/{name}" for folder, name in RELEASED_LTX2}
    example = (
        Path(__file__).parent.parent / "example_workflows" / "ltx2_mgpu_t2v_two_stage.json"
    ).read_text()
    assert all(name in example for _, name in RELEASED_LTX2 if not name.startswith("gemma"))


def test_make_tiny_writes_a_lora_that_mgpu_lora_takes(made):
    lora = read_lora(made / LORA, read_safetensors_header(made / CHECKPOINT))
    assert len(lora.targets) == lora_pairs(made / LORA) > 0, "a LoRA pair changes nothing"


@pytest.mark.comfyui
def test_the_tiny_lora_loads_in_comfyuis_lora_loader(made):
    from comfyui_harness import comfyui_in_process, comfyui_root

    with comfyui_in_process(comfyui_root()):
        import folder_paths

        import nodes  # ComfyUI's nodes.py

        folder_paths.add_model_folder_path("checkpoints", str(made / CHECKPOINT.parent))
        folder_paths.add_model_folder_path("loras", str(made / LORA.parent))
        model, _clip, _vae = nodes.CheckpointLoaderSimple().load_checkpoint(CHECKPOINT.name)
        (patched,) = nodes.LoraLoaderModelOnly().load_lora_model_only(model, LORA.name, 1.0)
    # ComfyUI only logs keys it cannot place; every pair must have become a patch of a weight.
    assert len(patched.patches) == lora_pairs(made / LORA) > 0


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
    assert not list(tmp_path.rglob("*.safetensors"))
