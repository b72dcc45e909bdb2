"""Bad input at the MGPU Loader (issue 39): a header ComfyUI's own loader refuses, a component in the wrong
slot, a release mismatch ComfyUI's detection (or the file's own model_version) sees. Each is refused in
one line that names the file, what it is and what to pick, before any work: no job, no worker process.
What only a layout hints at is a warning, and the file loads. Files written here from key names and
shapes alone (zeros); no ComfyUI needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from conftest import needs_comfyui, worker_children
from ltx2_mgpu.nodes import jobs
from ltx2_mgpu.nodes.loader import load_model

P = "model.diffusion_model."
TRANSFORMER_CONFIG = {
    "num_attention_heads": 4,
    "attention_head_dim": 8,
    "audio_num_attention_heads": 2,
    "audio_attention_head_dim": 8,
}


@pytest.fixture
def no_jobs(monkeypatch) -> list:
    calls: list = []
    monkeypatch.setattr(jobs, "load", lambda *a, **k: calls.append(a))
    return calls


def write(path: Path, tensors: dict[str, torch.Tensor], metadata: dict | None = None) -> Path:
    save_file(tensors, str(path), metadata=metadata)
    return path


def transformer(path: Path, release: str = "2.5", metadata: dict | None = None) -> Path:
    z = torch.zeros
    tensors = {
        P + "adaln_single.emb.timestep_embedder.linear_1.bias": z(4),
        P + "audio_adaln_single.linear.weight": z(4, 4),
        P + "transformer_blocks.0.attn1.to_q.weight": z(32, 32),
        P + "transformer_blocks.0.attn2.to_k.weight": z(32, 32),
        P + "transformer_blocks.0.audio_attn1.to_q.weight": z(16, 16),
        P + "transformer_blocks.0.ff.net.0.proj.weight": z(4, 32),
    }
    if release != "2.5":
        tensors[P + "transformer_blocks.0.ff.net.0.proj.bias"] = z(4)
    if release == "2.3":
        tensors[P + "transformer_blocks.0.attn1.to_gate_logits.weight"] = z(4, 32)
    config = {"transformer": TRANSFORMER_CONFIG}
    return write(path, tensors, {"config": json.dumps(config)} if metadata is None else metadata)


def diffusion_vae(path: Path, metadata: dict | None = None) -> Path:
    return write(
        path, {"decoder.conv_in_x_t.weight": torch.zeros(8, 48)}, metadata or {"config": '{"vae": {}}'}
    )


def audio_vae(path: Path, bwe: bool = False, metadata: dict | None = None) -> Path:
    key = "vocoder.vocoder.resblocks.0.convs1.0.weight" if bwe else "vocoder.resblocks.0.convs1.0.weight"
    tensors = {key: torch.zeros(1)} | (
        {"vocoder.bwe_generator.conv_pre.weight": torch.zeros(1)} if bwe else {}
    )
    config = {"audio_vae": {}, "vocoder": {}}
    return write(path, tensors, {"config": json.dumps(config)} | (metadata or {}))


def refused(no_jobs, pattern: str, ckpt: Path, **vaes) -> str:
    with pytest.raises(ValueError, match=pattern) as caught:
        load_model(str(ckpt), "cpu:2", "float32", **{k: str(v) for k, v in vaes.items()})
    message = str(caught.value)
    assert "\n" not in message, message
    assert no_jobs == [] and worker_children() == []
    return message


# ----- headers ComfyUI's own loader refuses --------------------------------------------------------


def test_a_transformer_config_comfyui_cannot_parse(tmp_path, no_jobs):
    ckpt = transformer(tmp_path / "broken-config.safetensors", metadata={"config": "{'transformer': 1}"})
    refused(
        no_jobs, r"^broken-config\.safetensors: its metadata 'config' is not a JSON object.*re-download", ckpt
    )


def test_a_transformer_without_the_config_its_widths_need(tmp_path, no_jobs):
    ckpt = transformer(tmp_path / "no-config.safetensors", metadata={})
    message = refused(
        no_jobs, r"^no-config\.safetensors: ComfyUI 0\.33 builds its (video|audio) attention", ckpt
    )
    assert "ComfyUI's own loader refuses it too" in message and "re-download" in message


def test_a_vae_without_the_config_comfyui_builds_it_from(tmp_path, no_jobs):
    ckpt = transformer(tmp_path / "t.safetensors")
    video = diffusion_vae(tmp_path / "v.safetensors")
    audio = write(tmp_path / "a.safetensors", {"vocoder.resblocks.0.convs1.0.weight": torch.zeros(1)})
    refused(
        no_jobs, r"^a\.safetensors is an LTX audio VAE with no metadata config; ComfyUI builds",
        ckpt, video_vae_name=video, audio_vae_name=audio,
    )  # fmt: skip
    small = write(
        tmp_path / "v-small.safetensors",
        {"decoder.conv_in.weight": torch.zeros(64, 128), "decoder.conv_in_x_t.weight": torch.zeros(8, 48)},
    )
    refused(
        no_jobs, r"^v-small\.safetensors is an LTX video VAE without a 'vae' section.*2048 wide.*64-wide",
        ckpt, video_vae_name=small, audio_vae_name=audio_vae(tmp_path / "a2.safetensors"),
    )  # fmt: skip


# ----- a component in the wrong slot ----------------------------------------------------------------


def test_a_vae_or_text_encoder_picked_as_the_model(tmp_path, no_jobs):
    video = diffusion_vae(tmp_path / "video-vae.safetensors")
    refused(
        no_jobs,
        r"^video-vae\.safetensors is an LTX-2\.5 video VAE \(diffusion decoder\), not an LTX audio-video "
        r"transformer; pick .* in ckpt_name, and this file in video_vae_name or audio_vae_name$",
        video,
    )
    gemma = write(tmp_path / "gemma4.safetensors", {"model.layers.0.layer_scalar": torch.zeros(1)})
    refused(
        no_jobs,
        r"^gemma4\.safetensors is a Gemma 4 text encoder, not an LTX .*MGPU Text Encode's text_encoder$",
        gemma,
    )


def test_vaes_in_each_others_slots(tmp_path, no_jobs):
    ckpt = transformer(tmp_path / "t.safetensors")
    video, audio = diffusion_vae(tmp_path / "v.safetensors"), audio_vae(tmp_path / "a.safetensors")
    refused(no_jobs, r"^a\.safetensors is an audio VAE but was given as the video VAE of t\.safetensors; pick", ckpt,
            video_vae_name=audio, audio_vae_name=audio)  # fmt: skip
    refused(no_jobs, r"^v\.safetensors is a video VAE, not an audio VAE .*; pick", ckpt,
            video_vae_name=video, audio_vae_name=video)  # fmt: skip
    gemma = write(tmp_path / "g.safetensors", {"model.layers.0.self_attn.q_norm.weight": torch.zeros(1)})
    refused(no_jobs, r"^g\.safetensors is a Gemma 3 text encoder, not an LTX VAE.*pick the release's video or audio VAE",
            ckpt, video_vae_name=video, audio_vae_name=gemma)  # fmt: skip


# ----- release mismatches the file states or ComfyUI's detection sees --------------------------------


def test_ltx25s_diffusion_decoder_with_an_ltx23_transformer(tmp_path, no_jobs):
    ckpt = transformer(tmp_path / "t23.safetensors", "2.3")
    video = diffusion_vae(tmp_path / "v25.safetensors")
    refused(
        no_jobs,
        r"^v25\.safetensors is an LTX-2\.5 video VAE \(it has LTX-2\.5's diffusion decoder\) but t23\.safetensors "
        r"is an LTX-2\.3 transformer; .*use the video VAE that ships with LTX-2\.3",
        ckpt, video_vae_name=video,
    )  # fmt: skip


def test_a_vae_stating_another_release(tmp_path, no_jobs):
    ckpt = transformer(tmp_path / "t25.safetensors")
    video = diffusion_vae(tmp_path / "v.safetensors")
    audio = audio_vae(tmp_path / "a23.safetensors", bwe=True, metadata={"model_version": "2.3.0"})
    refused(
        no_jobs,
        r"^a23\.safetensors is an LTX-2\.3 audio VAE \(its model_version metadata names LTX-2\.3\) but "
        r"t25\.safetensors is an LTX-2\.5 transformer;.*pick LTX-2\.5's audio VAE file \(ltx-2\.5-audio-vae\)",
        ckpt, video_vae_name=video, audio_vae_name=audio,
    )  # fmt: skip


def test_a_layout_that_only_hints_at_another_release_warns_and_loads(tmp_path, no_jobs, caplog):
    """Issue 39: LTX-2.5's audio VAE with the bandwidth-extension vocoder (48 kHz) and model_version 2.5.0
    loads without a word; the same vocoder without a model_version loads with a console warning."""
    needs_comfyui("an LTX-2.5 transformer loads on ComfyUI's engine only")
    ckpt = transformer(tmp_path / "t25.safetensors")
    video = diffusion_vae(tmp_path / "v.safetensors")
    stated = audio_vae(tmp_path / "a25-bwe.safetensors", bwe=True, metadata={"model_version": "2.5.0"})
    unstated = audio_vae(tmp_path / "a-bwe.safetensors", bwe=True)
    with caplog.at_level("WARNING"):
        load_model(str(ckpt), "cpu:2", "float32", video_vae_name=str(video), audio_vae_name=str(stated))
        assert not [r for r in caplog.records if r.levelname == "WARNING"]
        load_model(str(ckpt), "cpu:2", "float32", video_vae_name=str(video), audio_vae_name=str(unstated))
    (warning,) = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert "a-bwe.safetensors may be an LTX-2.3 audio VAE" in warning and "used as given" in warning
    assert len(no_jobs) == 2  # both loaded
