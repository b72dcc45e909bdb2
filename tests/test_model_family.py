"""The MGPU Loader's family and weight-format detection (workers/wire/model_family.py), and its refusal of
LTX-2.3 files on the ltx-core backend before any worker starts."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

from conftest import worker_children
from ltx2_mgpu.workers.wire.model_family import LTX2, LTX23, LTX25, UNKNOWN, detect_model_family
from ltx2_mgpu.workers.wire.model_files import read_safetensors_header

P = "model.diffusion_model."


def header_of(path):
    header = read_safetensors_header(path)
    return detect_model_family(header.shapes, header.dtypes, header.metadata)


def write(path, keys: dict[str, torch.Tensor], transformer_config: dict | None = None):
    metadata = (
        None if transformer_config is None else {"config": json.dumps({"transformer": transformer_config})}
    )
    save_file(keys, str(path), metadata=metadata)
    return path


def ltx2_keys(dtype=torch.bfloat16) -> dict[str, torch.Tensor]:
    return {
        f"{P}adaln_single.linear.weight": torch.zeros(6, 4, dtype=torch.bfloat16),
        f"{P}audio_adaln_single.linear.weight": torch.zeros(6, 4, dtype=torch.bfloat16),
        f"{P}transformer_blocks.0.attn1.to_q.weight": torch.zeros(4, 4, dtype=dtype),
        f"{P}transformer_blocks.0.attn1.to_q.bias": torch.zeros(4, dtype=torch.bfloat16),
        "vae.decoder.conv_in.conv.weight": torch.zeros(1, 1, 1, 1, 1),
    }


def test_the_tiny_ltx2_is_ltx2_bf16(tiny):
    found = header_of(tiny.checkpoint)
    assert (found.family, found.weight_format, found.has_vae) == (LTX2, "bf16", True)
    assert found.describe() == "LTX-2, weights bf16, with its VAE"


def test_ltx23_by_its_config_flags_or_its_keys(tmp_path):
    by_flags = write(tmp_path / "flags.safetensors", ltx2_keys(), {"apply_gated_attention": True})
    keys = ltx2_keys() | {f"{P}transformer_blocks.0.attn1.to_gate_logits.weight": torch.zeros(2, 4)}
    by_keys = write(tmp_path / "keys.safetensors", keys)
    assert header_of(by_flags).family == header_of(by_keys).family == LTX23
    off = write(tmp_path / "off.safetensors", ltx2_keys(), {"apply_gated_attention": False})
    assert header_of(off).family == LTX2


def test_ltx25_without_the_keyframe_embedding_by_its_bias_free_feed_forward_or_config(tmp_path):
    """Only keyframe-trained LTX-2.5 files carry the keyframe embedding; every 2.5 transformer drops the
    video feed-forward's bias. Read as 2.3, Gemma 4 (2.5's encoder) would be refused for it."""
    gated = ltx2_keys() | {f"{P}transformer_blocks.0.attn1.to_gate_logits.weight": torch.zeros(2, 4)}
    ff = f"{P}transformer_blocks.0.ff.net.0.proj."
    with_bias = gated | {f"{ff}weight": torch.zeros(4, 4), f"{ff}bias": torch.zeros(4)}
    no_bias = gated | {f"{ff}weight": torch.zeros(4, 4)}
    assert header_of(write(tmp_path / "23.safetensors", with_bias)).family == LTX23
    assert header_of(write(tmp_path / "25.safetensors", no_bias)).family == LTX25
    by_config = write(tmp_path / "25c.safetensors", gated, {"apply_gated_attention": True, "ff_bias": False})
    assert header_of(by_config).family == LTX25


def test_ltx25_split_transformer_and_unknown_files(tmp_path):
    keys = {k[len(P) :]: v for k, v in ltx2_keys().items() if k.startswith(P)}
    keys["keyframes_abs_pos_embedding"] = torch.zeros(1, 4)
    found = header_of(write(tmp_path / "t.safetensors", keys))
    assert (found.family, found.has_vae) == (LTX25, False)
    other = header_of(write(tmp_path / "o.safetensors", {"x.weight": torch.zeros(2, 2)}))
    assert (other.family, other.weight_format) == (UNKNOWN, UNKNOWN)


def test_weight_formats(tmp_path):
    fp8 = ltx2_keys(torch.float8_e4m3fn) | {
        f"{P}transformer_blocks.0.attn1.to_q.weight_scale": torch.ones(())
    }
    assert header_of(write(tmp_path / "fp8.safetensors", fp8)).weight_format == "fp8 e4m3 scaled"
    mixed = fp8 | {f"{P}transformer_blocks.0.attn1.to_k.weight": torch.zeros(4, 4, dtype=torch.bfloat16)}
    mixed[f"{P}transformer_blocks.0.attn1.to_v.weight"] = torch.zeros(4, 4, dtype=torch.bfloat16)
    assert (
        header_of(write(tmp_path / "mixed.safetensors", mixed)).weight_format
        == "bf16 + fp8 e4m3 scaled (mixed)"
    )


def test_loader_refuses_ltx23_on_the_ltxcore_backend_before_any_worker(tmp_path, monkeypatch):
    from ltx2_mgpu.nodes.loader import load_model

    path = write(tmp_path / "ltx-2.3-22b-dev.safetensors", ltx2_keys(), {"cross_attention_adaln": True})
    monkeypatch.setenv("LTX2_MGPU_BACKEND", "ltxcore")
    with pytest.raises(ValueError, match=r"ltx-2.3-22b-dev.safetensors is LTX-2.3; .*inside ComfyUI"):
        load_model(str(path), "cpu:1", "float32")
    assert worker_children() == []


def test_tdp_upscaled_shape_for_the_x2_x15_and_temporal_upscalers():
    """What the TDP Upscaler plans its tiles on: 2H x 2W for x2, ceil(3H/2) for LTX-2.3's x1.5 (what
    ComfyUI's rational resampler gives: up 3, 5-tap blur with stride 2), 2F - 1 frames for a temporal x2;
    others refused by name."""
    from ltx2_mgpu.workers.strategies.tiled import upscaled_latent_shape

    x2 = {"spatial_scale": 2.0}
    x15 = {"spatial_scale": 1.5, "rational_resampler": True}
    assert upscaled_latent_shape((1, 128, 3, 4, 6), x2) == (1, 128, 3, 8, 12)
    assert upscaled_latent_shape((1, 128, 3, 4, 6), x15) == (1, 128, 3, 6, 9)
    assert upscaled_latent_shape((1, 128, 3, 3, 5), x15) == (1, 128, 3, 5, 8)
    temporal = {"temporal_upsample": True, "spatial_upsample": False, "dims": 3}
    assert upscaled_latent_shape((1, 128, 3, 4, 6), temporal) == (1, 128, 5, 4, 6)
    assert upscaled_latent_shape((1, 128, 3, 4, 6), temporal | {"spatial_upsample": True}) == (
        1,
        128,
        5,
        8,
        12,
    )
    with pytest.raises(ValueError, match=r"temporal_upsample=True.*temporal x2 ones"):
        upscaled_latent_shape((1, 128, 3, 4, 6), temporal | {"dims": 2})  # ComfyUI's model needs 3-D there
    with pytest.raises(ValueError, match=r"spatial_upsample=False, temporal_upsample=False"):
        upscaled_latent_shape((1, 128, 3, 4, 6), {"spatial_upsample": False})
    with pytest.raises(ValueError, match=r"spatial_scale=1.5, rational_resampler=False"):
        upscaled_latent_shape((1, 128, 3, 4, 6), {"spatial_scale": 1.5})
