"""Text-encoder LoRAs (workers/text/gemma_lora.py): which files are refused, and the patch arithmetic
(ComfyUI's: float32, W + strength x alpha / rank x B @ A, cast back). Parity with LoraLoader + CLIPTextEncode
is in tests/test_ltx23_nodes.py."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file, save_file

from ltx2_mgpu.workers.embedded.tiny_gemma import make_tiny_gemma
from ltx2_mgpu.workers.text.gemma_lora import TEXT_LORA_PREFIXES, apply_text_loras, text_lora_pairs
from ltx2_mgpu.workers.text.text_encoder import load_segment, open_gemma

KEY = "layers.3.self_attn.q_proj"


@pytest.fixture(scope="module")
def gemma(tmp_path_factory):
    return open_gemma(make_tiny_gemma(tmp_path_factory.mktemp("gemma")))


def write_lora(
    path, out_features: int, in_features: int, alpha: float | None = None, prefix=TEXT_LORA_PREFIXES[0]
):
    g = torch.Generator().manual_seed(0)
    tensors = {
        f"{prefix}{KEY}.lora_A.weight": torch.randn(2, in_features, generator=g),
        f"{prefix}{KEY}.lora_B.weight": torch.randn(out_features, 2, generator=g),
    }
    if alpha is not None:
        tensors[f"{prefix}{KEY}.alpha"] = torch.tensor(alpha)
    save_file(tensors, str(path))
    return path


def test_patch_is_comfyuis_arithmetic(gemma, tmp_path):
    out_features, in_features = gemma.shapes[f"{KEY}.weight"]
    lora = write_lora(tmp_path / "l.safetensors", out_features, in_features, alpha=1.0)
    segment = load_segment(gemma, 0, 6, torch.device("cpu"), torch.bfloat16)
    before = segment.get_parameter(f"{KEY}.weight").detach().clone()
    assert apply_text_loras(segment, [(str(lora), 0.7)], gemma.shapes) == 1
    t = load_file(str(lora))
    a, b = t[f"{TEXT_LORA_PREFIXES[0]}{KEY}.lora_A.weight"], t[f"{TEXT_LORA_PREFIXES[0]}{KEY}.lora_B.weight"]
    expected = (before.float() + (0.7 * 1.0 / 2) * torch.mm(b, a)).to(torch.bfloat16)
    assert torch.equal(segment.get_parameter(f"{KEY}.weight"), expected)
    # A rank holding other layers leaves them alone.
    later = load_segment(gemma, 6, 12, torch.device("cpu"), torch.bfloat16)
    assert apply_text_loras(later, [(str(lora), 0.7)], gemma.shapes) == 0


def test_refusals_name_the_file_and_what_fits(gemma, tmp_path):
    out_features, in_features = gemma.shapes[f"{KEY}.weight"]
    wrong = write_lora(tmp_path / "wrong-shape.safetensors", out_features + 1, in_features)
    with pytest.raises(
        ValueError, match=r"wrong-shape.safetensors changes layers.3.self_attn.q_proj.weight as"
    ):
        text_lora_pairs(wrong, gemma.shapes)
    model_lora = write_lora(tmp_path / "model.safetensors", 4, 4, prefix="diffusion_model.")
    with pytest.raises(ValueError, match=r"model.safetensors has no text-encoder weights.*MGPU Loader"):
        text_lora_pairs(model_lora, gemma.shapes)
