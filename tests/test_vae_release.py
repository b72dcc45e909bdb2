"""An LTX-2.3 VAE file given with an LTX-2.5 transformer, on real tiny files (opt-in: COMFYUI_PATH):
refused before any work when the file states its release (model_version, issue 18), used with a console
warning when only its layout hints at LTX-2.3 (ComfyUI runs it; issue 39).

The tiny LTX-2.3 checkpoint's VAEs split into separate files as ComfyUI's VAELoader reads them (the
video VAE's `vae.*` weights with the metadata "vae" config; the audio VAE's `audio_vae.*` and
`vocoder.*` with its "audio_vae" and "vocoder" config, as LTX-2.5's audio VAE file is laid out), and
stating model_version 2.3.0. ComfyUI decodes with them exactly as with the checkpoint's own VAEs.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file
from test_tiny_ltx25 import native25  # noqa: F401

from ltx2_mgpu.workers.embedded.split_vaes import split_vaes
from ltx2_mgpu.workers.group.manager import get_manager

pytestmark = pytest.mark.comfyui


@pytest.fixture(scope="module")
def ltx23(native25, tiny23, tmp_path_factory) -> SimpleNamespace:  # noqa: F811
    """The session's tiny 2.3 checkpoint and its split VAE files, in the folders ComfyUI's loaders and
    the MGPU Loader look in."""
    import folder_paths

    out = tmp_path_factory.mktemp("tiny23split")
    (out / "vae").mkdir()
    checkpoint = tiny23.checkpoint
    files = SimpleNamespace(
        video=out / "vae" / "ltx-2.3-tiny-video-vae.safetensors",
        audio=out / "vae" / "ltx-2.3-tiny-audio-vae.safetensors",
    )
    split_vaes(checkpoint, files.video, files.audio, "2.3.0")
    folder_paths.add_model_folder_path("checkpoints", str(checkpoint.parent))
    folder_paths.add_model_folder_path("vae", str(out / "vae"))
    return SimpleNamespace(checkpoint=checkpoint, video_vae=files.video, audio_vae=files.audio)


def test_the_split_files_are_the_ltx23_vaes_as_comfyui_reads_them(native25, ltx23):  # noqa: F811
    n, lt_audio = native25.nodes, native25.lt_audio
    gen = torch.Generator().manual_seed(0)
    video, audio = torch.randn(1, 128, 2, 2, 2, generator=gen), torch.randn(1, 8, 9, 16, generator=gen)
    with torch.inference_mode():
        _, _, own_video = n.CheckpointLoaderSimple().load_checkpoint(ltx23.checkpoint.name)
        (own_audio,) = lt_audio.LTXVAudioVAELoader.execute(ltx23.checkpoint.name)
        (split_video,) = n.VAELoader().load_vae(ltx23.video_vae.name)
        (split_audio,) = n.VAELoader().load_vae(ltx23.audio_vae.name)
        frames = [n.VAEDecode().decode(v, {"samples": video})[0] for v in (own_video, split_video)]
        sounds = [
            lt_audio.LTXVAudioVAEDecode.execute({"samples": audio, "type": "audio"}, v)[0]
            for v in (own_audio, split_audio)
        ]
    assert torch.equal(frames[0], frames[1])
    assert torch.equal(sounds[0]["waveform"], sounds[1]["waveform"])
    # 2.3's 48 kHz bandwidth-extended audio, not LTX-2.5's plain vocoder rate.
    assert sounds[1]["sample_rate"] == sounds[0]["sample_rate"] != native25.audio_vae.audio_sample_rate_output


def _load(tiny25, vaes: dict[str, str]):
    from ltx2_mgpu.nodes.loader import load_model

    return load_model(
        tiny25.transformer.name,
        "cpu:1",
        "float32",
        video_vae_name=vaes["video"],
        audio_vae_name=vaes["audio"],
    )


@pytest.mark.parametrize("role", ["video", "audio"])
def test_an_ltx23_vae_with_the_ltx25_transformer_is_refused_before_any_work(native25, tiny25, ltx23, role):  # noqa: F811
    vaes = {"video": tiny25.video_vae.name, "audio": tiny25.audio_vae.name}
    vaes[role] = getattr(ltx23, f"{role}_vae").name
    before = get_manager().group
    pattern = (
        rf"ltx-2\.3-tiny-{role}-vae\.safetensors is an LTX-2\.3 {role} VAE \(its model_version metadata names "
        rf"LTX-2\.3\) but ltx-2\.5-tiny-transformer-bf16\.safetensors is an LTX-2\.5 transformer.*ltx-2\.5-{role}-vae"
    )
    with pytest.raises(ValueError, match=pattern):
        _load(tiny25, vaes)
    assert get_manager().group is before  # refused before the group was touched


def test_an_unstated_ltx23_audio_vae_warns_and_is_used(native25, tiny25, ltx23, tmp_path, caplog):  # noqa: F811
    """The same audio file without its model_version: only its BWE vocoder hints at LTX-2.3, and ComfyUI
    runs it with the 2.5 transformer; the loader says so on the console and loads."""
    import folder_paths

    with safe_open(str(ltx23.audio_vae), framework="pt") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys()}
        metadata = {k: v for k, v in f.metadata().items() if k != "model_version"}
    unstated = tmp_path / "vae" / "bwe-audio-vae-unstated.safetensors"
    unstated.parent.mkdir()
    save_file(tensors, str(unstated), metadata=metadata)
    folder_paths.add_model_folder_path("vae", str(unstated.parent))
    with caplog.at_level("WARNING"):
        _mgpu, _model, info = _load(tiny25, {"video": tiny25.video_vae.name, "audio": unstated.name})
    get_manager().unload()
    assert "audio VAE bwe-audio-vae-unstated.safetensors" in info
    assert any(
        "bwe-audio-vae-unstated.safetensors may be an LTX-2.3 audio VAE" in r.getMessage()
        for r in caplog.records
    )
