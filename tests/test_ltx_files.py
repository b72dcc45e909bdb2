"""Family, weight format and VAE pairing read from safetensors headers (workers/wire/ltx_files.py),
on small files with the key names of each release; no ComfyUI needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from ltx2_mgpu.workers.wire.ltx_files import (
    AUDIO_VAE,
    VIDEO_VAE_CONV,
    VIDEO_VAE_DIFFUSION,
    check_vae_files,
    is_gemma4_file,
    read_model_file_info,
    read_vae_kind,
)
from ltx2_mgpu.workers.wire.model_family import LTX2, LTX23, LTX25

P = "model.diffusion_model."


def write(path: Path, tensors: dict[str, torch.Tensor], metadata: dict | None = None) -> Path:
    save_file({k: v.clone().contiguous() for k, v in tensors.items()}, str(path), metadata=metadata)
    return path


def transformer(family: str, dtype: torch.dtype = torch.bfloat16) -> dict[str, torch.Tensor]:
    w = torch.zeros(4, 4, dtype=dtype)
    out = {P + "audio_adaln_single.linear.weight": w, P + "transformer_blocks.0.ff.net.0.proj.weight": w}
    if family != LTX25:
        out[P + "transformer_blocks.0.ff.net.0.proj.bias"] = torch.zeros(4, dtype=dtype)
    if family in (LTX23, LTX25):
        out[P + "transformer_blocks.0.attn1.to_gate_logits.weight"] = w
    if family == LTX25:
        out[P + "keyframes_abs_pos_embedding"] = torch.zeros(1, 4, dtype=dtype)
    return out


@pytest.mark.parametrize("family", [LTX2, LTX23, LTX25])
def test_family_is_read_from_the_transformer_keys(tmp_path, family):
    info = read_model_file_info(write(tmp_path / "m.safetensors", transformer(family)))
    assert (info.family, info.weight_format, info.video_vae, info.audio_vae) == (family, "bf16", False, False)
    assert "diffusion model only" in info.describe()


def test_int8_convrot_and_fp8_scaled_and_metadata_quantization(tmp_path):
    conf = {"format": "int8_tensorwise", "convrot": True, "convrot_groupsize": 16}
    int8 = transformer(LTX25) | {
        P + "transformer_blocks.0.attn1.to_q.weight": torch.zeros(4, 4, dtype=torch.int8),
        P + "transformer_blocks.0.attn1.to_q.comfy_quant": torch.frombuffer(
            bytearray(json.dumps(conf).encode()), dtype=torch.uint8
        ),
    }
    assert read_model_file_info(write(tmp_path / "a.safetensors", int8)).weight_format == "int8 convrot"
    fp8 = transformer(LTX23, torch.float8_e4m3fn) | {
        P + "transformer_blocks.0.attn1.to_q.weight_scale": torch.ones(()),
        "vae.decoder.conv_in.conv.weight": torch.zeros(1),
    }
    info = read_model_file_info(write(tmp_path / "b.safetensors", fp8))
    assert (info.weight_format, info.video_vae) == ("fp8 scaled", True)
    layers = {"layers": {"transformer_blocks.0.attn1.to_q": {"format": "nvfp4"}}}
    meta = {"_quantization_metadata": json.dumps(layers)}
    nvfp4 = read_model_file_info(write(tmp_path / "c.safetensors", transformer(LTX2), meta))
    assert nvfp4.weight_format == "nvfp4 mixed"


def test_a_file_without_an_ltx_transformer_is_refused_by_name(tmp_path):
    path = write(tmp_path / "other.safetensors", {"foo.weight": torch.zeros(2)})
    with pytest.raises(ValueError, match=r"other\.safetensors holds no LTX audio-video transformer"):
        read_model_file_info(path)
    (tmp_path / "pickle.ckpt").write_bytes(b"\x80\x04junk")
    with pytest.raises(ValueError, match="not a safetensors file"):
        read_model_file_info(tmp_path / "pickle.ckpt")


@pytest.fixture
def vaes(tmp_path) -> dict[str, Path]:
    z = torch.zeros(1)
    return {
        VIDEO_VAE_DIFFUSION: write(tmp_path / "v25.safetensors", {"decoder.conv_in_x_t.weight": z}),
        VIDEO_VAE_CONV: write(
            tmp_path / "v2.safetensors", {"decoder.up_blocks.0.res_blocks.0.conv1.conv.weight": z}
        ),
        AUDIO_VAE: write(tmp_path / "a.safetensors", {"vocoder.resblocks.0.convs1.0.weight": z}),
    }


def test_vae_kinds(vaes):
    assert {kind: read_vae_kind(path) for kind, path in vaes.items()} == {k: k for k in vaes}


def test_vae_files_that_do_not_fit_are_refused_naming_both(tmp_path, vaes):
    t25 = read_model_file_info(write(tmp_path / "t25.safetensors", transformer(LTX25)))
    t2 = read_model_file_info(write(tmp_path / "t2.safetensors", transformer(LTX2)))
    check_vae_files(t25, str(vaes[VIDEO_VAE_DIFFUSION]), str(vaes[AUDIO_VAE]))  # the template's set
    with pytest.raises(ValueError, match=r"a\.safetensors is an audio VAE.*video VAE of t25\.safetensors"):
        check_vae_files(t25, str(vaes[AUDIO_VAE]), "")
    with pytest.raises(ValueError, match=r"v25\.safetensors is an LTX-2\.5 video VAE but t2\.safetensors"):
        check_vae_files(t2, str(vaes[VIDEO_VAE_DIFFUSION]), "")
    with pytest.raises(ValueError, match=r"v2\.safetensors is not an audio VAE.*t25\.safetensors"):
        check_vae_files(t25, str(vaes[VIDEO_VAE_DIFFUSION]), str(vaes[VIDEO_VAE_CONV]))
    with pytest.raises(
        ValueError, match=r"t25\.safetensors is an LTX-2\.5 diffusion model without a video VAE"
    ):
        check_vae_files(t25, "", str(vaes[AUDIO_VAE]))


def test_gemma4_is_told_from_gemma3(tmp_path):
    z = torch.zeros(1)
    gemma4 = write(tmp_path / "g4.safetensors", {"model.layers.0.layer_scalar": z, "model.norm.weight": z})
    gemma3 = write(tmp_path / "g3.safetensors", {"model.layers.0.input_layernorm.weight": z})
    assert is_gemma4_file(gemma4) and not is_gemma4_file(gemma3)
