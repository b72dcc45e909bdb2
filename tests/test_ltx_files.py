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
    with pytest.raises(
        ValueError, match=r"other\.safetensors is a file none of ComfyUI's LTX loaders recognises"
    ):
        read_model_file_info(path)
    vae = write(tmp_path / "v.safetensors", {"decoder.conv_in_x_t.weight": torch.zeros(1)})
    with pytest.raises(
        ValueError,
        match=r"v\.safetensors is an LTX-2\.5 video VAE \(diffusion decoder\), not an LTX .*video_vae_name",
    ):
        read_model_file_info(vae)
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
    with pytest.raises(
        ValueError,
        match=r"v25\.safetensors is an LTX-2\.5 video VAE \(it has LTX-2\.5.s diffusion decoder\) but t2\.safetensors",
    ):
        check_vae_files(t2, str(vaes[VIDEO_VAE_DIFFUSION]), "")
    with pytest.raises(
        ValueError, match=r"v2\.safetensors is a video VAE, not an audio VAE.*t25\.safetensors"
    ):
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


def with_version(path: Path, version: str) -> Path:
    """A copy of `path` whose metadata states `model_version`."""
    from safetensors import safe_open
    from safetensors.torch import load_file

    with safe_open(str(path), framework="pt") as f:
        metadata = dict(f.metadata() or {})
    out = path.with_name(f"{path.stem}-v{version}.safetensors")
    return write(out, load_file(str(path)), metadata | {"model_version": version})


def test_the_release_of_a_vae_file(tmp_path, vaes):
    """What a file states (model_version) or ComfyUI's detection sees (the diffusion decoder) is its
    release; LTX-2.3's layouts (BWE vocoder, separate space / time decoder blocks) are hints only."""
    v23 = ltx23_vaes(tmp_path)
    found = {k: read_vae_release(p) for k, p in {**vaes, **v23}.items()}
    assert {k: (f.release, f.hint) for k, f in found.items()} == {
        VIDEO_VAE_DIFFUSION: (LTX25, None),
        VIDEO_VAE_CONV: (None, None),
        AUDIO_VAE: (None, None),
        "video": (None, LTX23),
        "audio": (None, LTX23),
    }
    # The file's own statement wins over its layout: LTX-2.5 keeps the 48 kHz vocoder.
    stated = read_vae_release(with_version(v23["audio"], "2.5.0"))
    assert (stated.release, stated.hint) == (LTX25, LTX23) and "model_version" in stated.reason
    assert read_vae_release(with_version(vaes[AUDIO_VAE], "2.3")).release == LTX23


def test_vae_layouts_of_another_release_warn_and_are_used(tmp_path, vaes):
    """ComfyUI runs LTX-2.3-style VAE files with an LTX-2.5 (or LTX-2) transformer: a warning naming
    both files, never a refusal; a file that states another release is refused naming both."""
    v23 = ltx23_vaes(tmp_path)
    t25 = read_model_file_info(write(tmp_path / "t25.safetensors", transformer(LTX25)))
    t23 = read_model_file_info(write(tmp_path / "t23.safetensors", transformer(LTX23)))
    t2 = read_model_file_info(write(tmp_path / "t2.safetensors", transformer(LTX2)))
    (warning,) = check_vae_files(t25, str(vaes[VIDEO_VAE_DIFFUSION]), str(v23["audio"]))
    assert warning.startswith("a23.safetensors may be an LTX-2.3 audio VAE") and "t25.safetensors" in warning
    assert "ltx-2.5-audio-vae" in warning
    assert len(check_vae_files(t25, str(v23["video"]), str(vaes[AUDIO_VAE]))) == 1
    assert len(check_vae_files(t2, "", str(v23["audio"]))) == 1
    assert check_vae_files(t23, str(v23["video"]), str(v23["audio"])) == []  # 2.3's own split VAEs
    assert check_vae_files(t25, str(vaes[VIDEO_VAE_CONV]), str(vaes[AUDIO_VAE])) == []  # 2.5's conv option
    # LTX-2.5's audio VAE with the bandwidth-extension vocoder, stating its release: no warning.
    bwe25 = str(with_version(v23["audio"], "2.5.0"))
    assert check_vae_files(t25, str(vaes[VIDEO_VAE_DIFFUSION]), bwe25) == []
    with pytest.raises(
        ValueError,
        match=r"a23-v2\.3\.0\.safetensors is an LTX-2\.3 audio VAE \(its model_version metadata names LTX-2\.3\) but "
        r"t25\.safetensors is an LTX-2\.5 transformer.*ltx-2\.5-audio-vae",
    ):
        check_vae_files(t25, str(vaes[VIDEO_VAE_DIFFUSION]), str(with_version(v23["audio"], "2.3.0")))
    with pytest.raises(
        ValueError, match=r"v23-v2\.3\.safetensors is an LTX-2\.3 video VAE.*t2\.safetensors is an LTX-2 "
    ):
        check_vae_files(t2, str(with_version(v23["video"], "2.3")), "")


def test_gemma4_is_told_from_gemma3(tmp_path):
    z = torch.zeros(1)
    gemma4 = write(tmp_path / "g4.safetensors", {"model.layers.0.layer_scalar": z, "model.norm.weight": z})
    gemma3 = write(tmp_path / "g3.safetensors", {"model.layers.0.input_layernorm.weight": z})
    assert is_gemma4_file(gemma4) and not is_gemma4_file(gemma3)
