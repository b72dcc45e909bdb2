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
    read_vae_release,
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


def ltx23_vaes(tmp_path) -> dict[str, Path]:
    """Separate LTX-2.3 VAE files as the 2.3 checkpoint's VAEs split out: the conv decoder with 2.3's
    space / time blocks in its config, the audio VAE with the bandwidth-extension vocoder."""
    z = torch.zeros(1)
    decoder = [
        ["compress_space", {"multiplier": 2}],
        ["compress_time", {"multiplier": 2}],
        ["compress_all", {}],
    ]
    video = write(
        tmp_path / "v23.safetensors",
        {"decoder.up_blocks.0.res_blocks.0.conv1.conv.weight": z},
        {"config": json.dumps({"vae": {"decoder_blocks": decoder}})},
    )
    audio = {"vocoder.vocoder.resblocks.0.convs1.0.weight": z, "vocoder.bwe_generator.conv_pre.weight": z}
    return {"video": video, "audio": write(tmp_path / "a23.safetensors", audio)}


def test_the_release_of_a_vae_file(tmp_path, vaes):
    found = {k: read_vae_release(p) for k, p in {**vaes, **ltx23_vaes(tmp_path)}.items()}
    # LTX-2's conv decoder and plain vocoder are LTX-2.5's too: not told apart, never refused.
    assert found == {
        VIDEO_VAE_DIFFUSION: LTX25,
        VIDEO_VAE_CONV: None,
        AUDIO_VAE: None,
        "video": LTX23,
        "audio": LTX23,
    }


def test_ltx23_vae_files_with_an_ltx25_transformer_are_refused_naming_both(tmp_path, vaes):
    v23 = ltx23_vaes(tmp_path)
    t25 = read_model_file_info(write(tmp_path / "t25.safetensors", transformer(LTX25)))
    t23 = read_model_file_info(write(tmp_path / "t23.safetensors", transformer(LTX23)))
    t2 = read_model_file_info(write(tmp_path / "t2.safetensors", transformer(LTX2)))
    with pytest.raises(
        ValueError,
        match=r"v23\.safetensors is an LTX-2\.3 video VAE but t25\.safetensors is an LTX-2\.5 transformer.*"
        r"ltx-2\.5-video-vae",
    ):
        check_vae_files(t25, str(v23["video"]), str(vaes[AUDIO_VAE]))
    with pytest.raises(
        ValueError,
        match=r"a23\.safetensors is an LTX-2\.3 audio VAE but t25\.safetensors is an LTX-2\.5 transformer.*"
        r"ltx-2\.5-audio-vae",
    ):
        check_vae_files(t25, str(vaes[VIDEO_VAE_DIFFUSION]), str(v23["audio"]))
    with pytest.raises(
        ValueError, match=r"a23\.safetensors is an LTX-2\.3 audio VAE but t2\.safetensors is an LTX-2 "
    ):
        check_vae_files(t2, "", str(v23["audio"]))
    check_vae_files(t23, str(v23["video"]), str(v23["audio"]))  # 2.3's own split VAEs fit
    check_vae_files(t25, str(vaes[VIDEO_VAE_CONV]), str(vaes[AUDIO_VAE]))  # 2.5's conv-decoder option


def test_gemma4_is_told_from_gemma3(tmp_path):
    z = torch.zeros(1)
    gemma4 = write(tmp_path / "g4.safetensors", {"model.layers.0.layer_scalar": z, "model.norm.weight": z})
    gemma3 = write(tmp_path / "g3.safetensors", {"model.layers.0.input_layernorm.weight": z})
    assert is_gemma4_file(gemma4) and not is_gemma4_file(gemma3)
