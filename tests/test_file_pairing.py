"""Bad input refused at the node that picked it, from headers alone (workers/wire/file_pairing.py): an
LTX-2 LoRA on an LTX-2.3 model, a text encoder without the projection the model needs, Gemma 4 on an
LTX-2.3 model, a GGUF / bitsandbytes / unknown-quantization file. Each message names both files (or
the file and its format) and what would fit; no worker process is started and no job runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from conftest import worker_children
from ltx2_mgpu.nodes import jobs, text_encode
from ltx2_mgpu.nodes.loader import load_model
from ltx2_mgpu.nodes.mgpu_lora import add_lora
from ltx2_mgpu.nodes.text_encode import encode_prompt
from ltx2_mgpu.workers.group.manager import MGPUModel
from ltx2_mgpu.workers.wire.model_files import read_safetensors_header


@pytest.fixture
def no_jobs(monkeypatch) -> list:
    """Calls that would reach the worker group (load or a job); the tests assert there are none."""
    calls: list = []
    monkeypatch.setattr(jobs, "load", lambda *a, **k: calls.append(("load", a)))
    monkeypatch.setattr(text_encode, "run_job", lambda *a, **k: calls.append(("run_job", a)))
    return calls


def ltx2_lora(checkpoint: Path, path: Path) -> Path:
    """A rank-2 LoRA on LTX-2's caption projection and one attention, with the LTX-2 model's shapes
    (as LTX-2's full-transformer LoRAs, e.g. the distilled LoRA, change the caption projection)."""
    shapes = read_safetensors_header(checkpoint).shapes
    tensors = {}
    for layer in ("caption_projection.linear_1", "transformer_blocks.0.attn1.to_q"):
        out_dim, in_dim = shapes[f"model.diffusion_model.{layer}.weight"]
        tensors[f"diffusion_model.{layer}.lora_A.weight"] = torch.zeros(2, in_dim)
        tensors[f"diffusion_model.{layer}.lora_B.weight"] = torch.zeros(out_dim, 2)
    save_file(tensors, str(path))
    return path


def test_ltx2_lora_on_ltx23_model_is_refused_naming_both(tiny, tiny23, tmp_path, no_jobs):
    lora = ltx2_lora(tiny.checkpoint, tmp_path / "ltx2-style-lora.safetensors")
    add_lora(MGPUModel(checkpoint=str(tiny.checkpoint)), str(lora), 1.0)  # fits its own release
    with pytest.raises(ValueError) as refused:
        add_lora(MGPUModel(checkpoint=str(tiny23.checkpoint)), str(lora), 1.0)
    message = str(refused.value)
    assert (
        "LoRA ltx2-style-lora.safetensors is for LTX-2 but the model ltx-2.3-22b-dev-fp8.safetensors is LTX-2.3"
        in message
    )
    assert "pick a LoRA trained for LTX-2.3" in message
    assert no_jobs == [] and worker_children() == []


def test_ltx25_lora_on_ltx23_model_is_refused_by_its_metadata(tiny25, tiny23, no_jobs):
    with pytest.raises(
        ValueError,
        match=r"ltx-2\.5-tiny-lora\.safetensors is for LTX-2\.5 but the model ltx-2\.3-22b-dev-fp8",
    ):
        add_lora(MGPUModel(checkpoint=str(tiny23.checkpoint)), str(tiny25.lora), 1.0)
    assert no_jobs == [] and worker_children() == []


def test_text_encoder_without_the_projection_ltx25_needs_is_refused(tiny, tiny25, tmp_path, no_jobs):
    model = MGPUModel(checkpoint=str(tiny25.transformer), backend="comfy")
    gemma3 = tmp_path / "gemma3.safetensors"
    save_file({"model.layers.0.input_layernorm.weight": torch.zeros(4)}, str(gemma3))
    with pytest.raises(ValueError) as refused:
        encode_prompt(model, str(gemma3), "a cat")
    assert "gemma3.safetensors is not Gemma 4" in str(refused.value)
    assert "ltx-2.5-tiny-transformer-bf16.safetensors (LTX-2.5" in str(refused.value)
    assert "gemma4-12b-with-proj-ltx-2.5" in str(refused.value)
    # Gemma 4 without the projection (the plain Gemma 4 file): the with-proj file would fit.
    entries = read_safetensors_header(tiny25.text_encoder).shapes
    no_proj = {
        k: torch.zeros(s) for k, s in entries.items() if "text_embedding_projection" not in k and len(s) < 2
    }
    save_file(no_proj, str(tmp_path / "gemma4-no-proj.safetensors"))
    with pytest.raises(ValueError, match=r"gemma4-no-proj\.safetensors is Gemma 4 without the LTX projection.*"
                       r"ltx-2\.5-tiny-transformer-bf16\.safetensors \(LTX-2\.5\).*with-proj"):  # fmt: skip
        encode_prompt(model, str(tmp_path / "gemma4-no-proj.safetensors"), "a cat")
    assert no_jobs == [] and worker_children() == []


def test_gemma4_on_an_ltx23_model_is_refused(tiny25, tiny23, no_jobs):
    with pytest.raises(ValueError) as refused:
        encode_prompt(MGPUModel(checkpoint=str(tiny23.checkpoint)), str(tiny25.text_encoder), "a cat")
    message = str(refused.value)
    assert "gemma4-tiny-with-proj-ltx-2.5.safetensors is Gemma 4" in message
    assert "the model ltx-2.3-22b-dev-fp8.safetensors is LTX-2.3; pick Gemma 3 12B" in message
    assert no_jobs == [] and worker_children() == []


def quantized_header_file(path: Path, metadata: dict[str, str], extra: dict[str, torch.Tensor]) -> Path:
    tensors = {"model.diffusion_model.adaln_single.linear.weight": torch.zeros(4, 4)} | extra
    save_file(tensors, str(path), metadata=metadata)
    return path


def test_formats_comfyui_cannot_read_are_refused_by_the_loader(tmp_path, no_jobs):
    gguf = tmp_path / "ltx-2.3-22b-Q4_K_M.gguf"  # GGUF's magic, then nothing ComfyUI-GGUF reads
    gguf.write_bytes(b"GGUF" + bytes(60))
    layers = {"layers": {"transformer_blocks.0.attn1.to_q": {"format": "hqq_int3"}}}
    cases = {
        gguf: r"ltx-2\.3-22b-Q4_K_M\.gguf is a GGUF file of version 0; ComfyUI-GGUF reads versions 2, 3",
        quantized_header_file(
            tmp_path / "bnb.safetensors",
            {},
            {"model.diffusion_model.transformer_blocks.0.attn1.to_q.weight.absmax": torch.zeros(2)},
        ): r"bnb\.safetensors is a bitsandbytes 4-bit file",
        quantized_header_file(
            tmp_path / "hqq.safetensors", {"_quantization_metadata": json.dumps(layers)}, {}
        ): r"hqq\.safetensors is quantized as hqq_int3, a format ComfyUI 0\.33 cannot read",
    }
    for path, message in cases.items():
        with pytest.raises(ValueError, match=message):
            load_model(str(path), "cpu", "bfloat16")
    assert no_jobs == [] and worker_children() == []


def test_ltx23_checkpoint_as_the_vae_of_an_ltx25_transformer_is_refused(tiny25, tiny23, no_jobs):
    with pytest.raises(ValueError) as refused:
        load_model(str(tiny25.transformer), "cpu", "bfloat16", video_vae_name=str(tiny23.checkpoint))
    message = str(refused.value)
    assert "ltx-2.3-22b-dev-fp8.safetensors is an LTX-2.3 checkpoint, not a VAE file" in message
    assert "the LTX-2.5 model ltx-2.5-tiny-transformer-bf16.safetensors" in message
    assert "pick the LTX-2.5 video VAE (ltx-2.5-video-vae) in video_vae_name" in message
    assert no_jobs == [] and worker_children() == []
