"""The embedded tiny LTX-2 (workers/embedded/tiny_model.py) and the checkpoint loaders (workers/engine/ltxcore/checkpoint.py). CPU."""

from __future__ import annotations

import dataclasses
import filecmp
from pathlib import Path

import pytest
import torch
from ltx_core.components.patchifiers import AudioPatchifier, VideoLatentPatchifier, get_pixel_coords
from ltx_core.guidance.perturbations import BatchedPerturbationConfig
from ltx_core.loader import SafetensorsModelStateDictLoader
from ltx_core.model.transformer import Modality
from ltx_core.model.upsampler import upsample_video
from ltx_core.types import AudioLatentShape, SpatioTemporalScaleFactors, VideoLatentShape
from safetensors.torch import load_file, save_file

from ltx2_mgpu.workers.embedded.tiny_model import (
    CAPTION_CHANNELS,
    GEMMA_HIDDEN_SIZE,
    GEMMA_NUM_HIDDEN_STATES,
    STORAGE_DTYPE,
    TinyModelFiles,
    make_tiny,
    tiny_checkpoint_config,
    tiny_upsampler_config,
)
from ltx2_mgpu.workers.engine.ltxcore import checkpoint
from ltx2_mgpu.workers.wire import model_files

# "A few MB": the audio VAE alone is 2.7 M parameters because ltx-core ties its width to 128.
MAX_TOTAL_BYTES = 12_000_000
FULL_CHECKPOINT_PREFIXES = (
    "model.diffusion_model.",
    "vae.",
    "audio_vae.",
    "vocoder.",
    "text_embedding_projection.",
)
# A 9-frame 64x96 video: latent [1, 128, 2, 2, 3] (12 tokens); its audio at 25 latent frames/s.
VIDEO_SHAPE = VideoLatentShape(batch=1, channels=128, frames=2, height=2, width=3)
AUDIO_SHAPE = AudioLatentShape(batch=1, channels=8, frames=9, mel_bins=16)
FPS = 24.0


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> TinyModelFiles:
    return make_tiny(tmp_path_factory.mktemp("tiny"), seed=0)


@pytest.fixture(scope="module")
def transformer(tiny: TinyModelFiles) -> torch.nn.Module:
    return checkpoint.load_transformer(tiny.checkpoint, "cpu", torch.float32)


def _randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def _rewrite(src: Path, dst: Path, edit: dict[str, torch.Tensor | None], keep_config: bool = True) -> Path:
    """Copy a checkpoint with some tensors replaced (None: removed)."""
    tensors = load_file(str(src))
    for key, value in edit.items():
        if value is None:
            del tensors[key]
        else:
            tensors[key] = value
    metadata = (
        {"config": model_files.read_safetensors_header(src).metadata["config"]} if keep_config else None
    )
    save_file(tensors, str(dst), metadata=metadata)
    return dst


def test_files_are_a_few_megabytes(tiny: TinyModelFiles) -> None:
    sizes = [tiny.checkpoint.stat().st_size, tiny.spatial_upscaler.stat().st_size]
    assert all(size > 100_000 for size in sizes)
    assert sum(sizes) < MAX_TOTAL_BYTES


def test_same_seed_writes_the_same_files(tiny: TinyModelFiles, tmp_path: Path) -> None:
    again = make_tiny(tmp_path, seed=0)
    for first, second in (
        (tiny.checkpoint, again.checkpoint),
        (tiny.spatial_upscaler, again.spatial_upscaler),
    ):
        a, b = load_file(str(first)), load_file(str(second))
        assert a.keys() == b.keys()
        assert all(torch.equal(a[key], b[key]) for key in a)
        assert filecmp.cmp(first, second, shallow=False), "same tensors but different bytes"


def test_other_seed_changes_every_tensor(tiny: TinyModelFiles, tmp_path: Path) -> None:
    other = make_tiny(tmp_path, seed=1)
    for first, second in (
        (tiny.checkpoint, other.checkpoint),
        (tiny.spatial_upscaler, other.spatial_upscaler),
    ):
        a, b = load_file(str(first)), load_file(str(second))
        assert a.keys() == b.keys()
        same = [key for key in a if torch.equal(a[key], b[key])]
        assert not same


def test_layout_and_config_metadata(tiny: TinyModelFiles) -> None:
    header = model_files.read_safetensors_header(tiny.checkpoint)
    assert set(header.metadata) == {"config"}
    for prefix in FULL_CHECKPOINT_PREFIXES:
        assert any(key.startswith(prefix) for key in header.shapes), prefix
    assert all(key.startswith(FULL_CHECKPOINT_PREFIXES) for key in header.shapes)
    assert any(key.startswith("model.diffusion_model.video_embeddings_connector.") for key in header.shapes)
    assert any(key.startswith("model.diffusion_model.audio_embeddings_connector.") for key in header.shapes)
    for part in ("vae.encoder.", "vae.decoder.", "audio_vae.encoder.", "audio_vae.decoder."):
        assert any(key.startswith(part) for key in header.shapes), part
    stored = {"BF16": torch.bfloat16, "F32": torch.float32}
    assert {stored[dtype] for dtype in header.dtypes.values()} == {STORAGE_DTYPE}

    config = model_files.read_checkpoint_config(tiny.checkpoint)
    assert config == tiny_checkpoint_config()
    assert {"transformer", "vae", "audio_vae", "vocoder"} <= config.keys()
    assert model_files.read_checkpoint_config(tiny.spatial_upscaler) == tiny_upsampler_config()


def test_description_keeps_the_real_latent_interface(tiny: TinyModelFiles) -> None:
    d = model_files.describe_checkpoint(tiny.checkpoint)
    assert (d.num_layers, d.video_num_heads, d.audio_num_heads) == (2, 8, 8)
    assert d.video_inner_dim == d.cross_attention_dim and d.audio_inner_dim == d.audio_cross_attention_dim
    assert d.caption_channels == CAPTION_CHANNELS
    assert d.rope_type == "split"  # as the 19B config
    assert (d.video_in_channels, d.audio_in_channels, d.video_latent_channels) == (128, 128, 128)
    assert (d.spatial_compression, d.temporal_compression) == (32, 8)
    assert (d.audio_latent_channels, d.audio_latent_mel_bins) == (8, 16)
    assert (d.audio_sample_rate_hz, d.audio_hop_length, d.audio_latent_rate_hz) == (16000, 160, 25.0)


COMPONENTS = [
    ("transformer", checkpoint.load_transformer, checkpoint.TRANSFORMER),
    ("video encoder", checkpoint.load_video_encoder, checkpoint.VIDEO_ENCODER),
    ("video decoder", checkpoint.load_video_decoder, checkpoint.VIDEO_DECODER),
    ("audio encoder", checkpoint.load_audio_encoder, checkpoint.AUDIO_ENCODER),
    ("audio decoder", checkpoint.load_audio_decoder, checkpoint.AUDIO_DECODER),
    ("vocoder", checkpoint.load_vocoder, checkpoint.VOCODER),
    ("embeddings processor", checkpoint.load_embeddings_processor, None),
    ("spatial upsampler", checkpoint.load_upsampler, checkpoint.UPSAMPLER),
]


@pytest.mark.parametrize(("name", "loader", "spec"), COMPONENTS, ids=[c[0] for c in COMPONENTS])
def test_component_loads_with_exactly_its_keys(tiny: TinyModelFiles, name: str, loader, spec) -> None:
    path = tiny.spatial_upscaler if name == "spatial upsampler" else tiny.checkpoint
    spec = spec or checkpoint.embeddings_processor_spec()
    model = loader(path, "cpu", torch.float32)
    assert not model.training
    # What ltx-core's own state-dict loader selects from the file with the ledger's SDOps ...
    selected = SafetensorsModelStateDictLoader().load(str(path), sd_ops=spec.sd_ops).sd
    # ... minus what the component leaves to another one (the transformer's text connectors).
    selected = {k: v for k, v in selected.items() if not k.startswith(spec.ignored_prefixes)}
    state = model.state_dict()
    assert state.keys() == selected.keys()
    for key, value in state.items():
        assert value.dtype == torch.float32 and not value.is_meta, key
        assert torch.equal(value, selected[key].float()), key


def _modalities(positions_fps: float = FPS, sigma: float = 0.7) -> tuple[Modality, Modality]:
    """Video + audio inputs of a 9-frame 64x96 clip, patchified as ltx-core's pipelines do."""
    video_coords = VideoLatentPatchifier(patch_size=1).get_patch_grid_bounds(VIDEO_SHAPE)
    video_positions = get_pixel_coords(
        video_coords, SpatioTemporalScaleFactors.default(), causal_fix=True
    ).float()
    video_positions[:, 0] = video_positions[:, 0] / positions_fps
    audio_patchifier = AudioPatchifier(patch_size=1)
    sigmas = torch.tensor([sigma])
    video_latent = _randn(*VIDEO_SHAPE.to_torch_shape(), seed=1)
    audio_latent = _randn(*AUDIO_SHAPE.to_torch_shape(), seed=2)
    video = Modality(
        latent=VideoLatentPatchifier(patch_size=1).patchify(video_latent),
        sigma=sigmas,
        timesteps=sigmas.expand(1, VIDEO_SHAPE.token_count()),
        positions=video_positions,
        context=_randn(1, 16, CAPTION_CHANNELS, seed=3),
    )
    audio = Modality(
        latent=audio_patchifier.patchify(audio_latent),
        sigma=sigmas,
        timesteps=sigmas.expand(1, AUDIO_SHAPE.token_count()),
        positions=audio_patchifier.get_patch_grid_bounds(AUDIO_SHAPE),
        context=_randn(1, 16, CAPTION_CHANNELS, seed=4),
    )
    return video, audio


def _relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).norm() / b.norm()).item()


@torch.no_grad()
def test_transformer_forward_is_finite_and_positions_matter(transformer: torch.nn.Module) -> None:
    video, audio = _modalities()
    assert video.latent.shape == (1, 12, 128) and audio.latent.shape == (1, 9, 128)
    vx, ax = transformer(video, audio, BatchedPerturbationConfig.empty(1))
    assert vx.shape == video.latent.shape and ax.shape == audio.latent.shape
    for out in (vx, ax):
        assert torch.isfinite(out).all()
        assert 0.3 < out.std().item() < 30.0
    # Weights large enough that a position mistake shows (unlike ltx-core's std-0.02 init).
    vx_fps, ax_fps = transformer(*_modalities(positions_fps=25.0), BatchedPerturbationConfig.empty(1))
    assert _relative(vx_fps, vx) > 0.01 and _relative(ax_fps, ax) > 0.005
    shuffled = video.positions[:, :, torch.randperm(12, generator=torch.Generator().manual_seed(0))]
    vx_shuffled, _ = transformer(
        dataclasses.replace(video, positions=shuffled), audio, BatchedPerturbationConfig.empty(1)
    )
    assert _relative(vx_shuffled, vx) > 0.05


@torch.no_grad()
def test_video_vae_round_trip_shapes_and_ranges(tiny: TinyModelFiles) -> None:
    decoder = checkpoint.load_video_decoder(tiny.checkpoint, "cpu", torch.float32)
    encoder = checkpoint.load_video_encoder(tiny.checkpoint, "cpu", torch.float32)
    for latent_frames in (1, 2, 3):
        frames = decoder(_randn(1, 128, latent_frames, 2, 3))
        assert frames.shape == (1, 3, 8 * (latent_frames - 1) + 1, 64, 96)
    frames = decoder(_randn(*VIDEO_SHAPE.to_torch_shape()))
    assert torch.isfinite(frames).all()
    assert 0.1 < frames.std().item() < 1.0
    assert (frames.abs() > 1).float().mean().item() < 0.1  # mostly inside [-1, 1], not saturated
    video = torch.rand(1, 3, 9, 64, 96, generator=torch.Generator().manual_seed(5)) * 2 - 1
    assert encoder(video).shape == VIDEO_SHAPE.to_torch_shape()
    # The statistics are far from identity, so a missing (un)normalisation shows.
    stats = decoder.per_channel_statistics
    assert stats.get_buffer("mean-of-means").abs().mean() > 0.2
    assert (stats.get_buffer("std-of-means").log().abs() > 0.1).float().mean() > 0.5
    assert torch.equal(
        stats.get_buffer("std-of-means"), encoder.per_channel_statistics.get_buffer("std-of-means")
    )


@torch.no_grad()
def test_audio_decoder_and_vocoder_make_a_waveform(tiny: TinyModelFiles) -> None:
    decoder = checkpoint.load_audio_decoder(tiny.checkpoint, "cpu", torch.float32)
    encoder = checkpoint.load_audio_encoder(tiny.checkpoint, "cpu", torch.float32)
    vocoder = checkpoint.load_vocoder(tiny.checkpoint, "cpu", torch.float32)
    mel = decoder(_randn(*AUDIO_SHAPE.to_torch_shape()))
    assert mel.shape == (1, 2, 4 * AUDIO_SHAPE.frames - 3, 64)
    assert encoder(mel).shape == AUDIO_SHAPE.to_torch_shape()
    waveform = vocoder(mel)
    assert vocoder.output_sampling_rate == 24000
    assert waveform.shape == (1, 2, mel.shape[2] * 240)  # 100 mel frames/s -> 24 kHz
    assert torch.isfinite(waveform).all()
    assert waveform.std().item() > 0.05
    assert (waveform.abs() > 0.99).float().mean().item() < 0.05  # the final tanh is not saturated


@torch.no_grad()
def test_upsampler_doubles_height_and_width(tiny: TinyModelFiles) -> None:
    encoder = checkpoint.load_video_encoder(tiny.checkpoint, "cpu", torch.float32)
    upsampler = checkpoint.load_upsampler(tiny.spatial_upscaler, "cpu", torch.float32)
    latent = _randn(*VIDEO_SHAPE.to_torch_shape())
    upsampled = upsample_video(latent, encoder, upsampler)
    assert upsampled.shape == (1, 128, 2, 4, 6)
    assert torch.isfinite(upsampled).all()


@torch.no_grad()
def test_embeddings_processor_turns_hidden_states_into_context(tiny: TinyModelFiles) -> None:
    processor = checkpoint.load_embeddings_processor(tiny.checkpoint, "cpu", torch.float32)
    # The connectors' 128 learnable registers need the padded text length to be a multiple of 128.
    hidden_states = tuple(_randn(1, 128, GEMMA_HIDDEN_SIZE, seed=i) for i in range(GEMMA_NUM_HIDDEN_STATES))
    mask = torch.zeros(1, 128, dtype=torch.int64)
    mask[:, -20:] = 1  # left padding, as the Gemma tokenizer pads
    out = processor.process_hidden_states(hidden_states, mask)
    assert out.video_encoding.shape == out.audio_encoding.shape == (1, 128, CAPTION_CHANNELS)
    assert torch.isfinite(out.video_encoding).all() and torch.isfinite(out.audio_encoding).all()


def test_loaders_refuse_pickle_and_garbage(tmp_path: Path) -> None:
    pickled = tmp_path / "model.ckpt"
    torch.save({"model.diffusion_model.patchify_proj.weight": torch.zeros(2, 2)}, pickled)
    with pytest.raises(ValueError, match=r"model\.ckpt is a pickle / torch\.save checkpoint"):
        checkpoint.load_transformer(pickled, "cpu")
    garbage = tmp_path / "garbage.safetensors"
    garbage.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00not json at all!")
    with pytest.raises(ValueError, match=r"garbage\.safetensors is not a safetensors file"):
        checkpoint.load_video_decoder(garbage, "cpu")
    with pytest.raises(ValueError, match="does not exist"):
        checkpoint.load_vocoder(tmp_path / "absent.safetensors", "cpu")


def test_a_truncated_file_is_refused_with_its_name_before_any_worker_starts(
    tiny: TinyModelFiles, tmp_path: Path
) -> None:
    """Issue 20 item 4: a checkpoint cut short (an interrupted download) reached the user as
    safetensors' "incomplete metadata, file not fully covered", without the file's name."""
    from ltx2_mgpu.workers.group.manager import GroupManager, MGPUModel
    from ltx2_mgpu.workers.wire.model_files import describe_checkpoint

    data = tiny.checkpoint.read_bytes()
    truncated = tmp_path / "ltx-2-truncated.safetensors"
    truncated.write_bytes(data[: len(data) // 2])
    expected = (
        rf"ltx-2-truncated\.safetensors is incomplete: its header describes {len(data):,} bytes but the file has "
        rf"{len(data) // 2:,} .* download the file again"
    )
    with pytest.raises(ValueError, match=expected):
        describe_checkpoint(truncated)
    with pytest.raises(ValueError, match=expected):
        checkpoint.load_video_decoder(truncated, "cpu")
    manager = GroupManager()
    with pytest.raises(ValueError, match=expected):
        manager.acquire(MGPUModel.create(truncated, devices="cpu:2", dtype="float32"))
    assert manager.group is None, "refused before any worker started"
    describe_checkpoint(tiny.checkpoint)  # a complete file passes


def test_loader_names_a_missing_tensor(tiny: TinyModelFiles, tmp_path: Path) -> None:
    removed = "model.diffusion_model.transformer_blocks.1.audio_to_video_attn.to_k.weight"
    broken = _rewrite(tiny.checkpoint, tmp_path / "broken.safetensors", {removed: None})
    with pytest.raises(ValueError) as info:
        checkpoint.load_transformer(broken, "cpu", torch.float32)
    message = str(info.value)
    assert "broken.safetensors" in message and "1 tensors missing" in message
    assert "transformer_blocks.1.audio_to_video_attn.to_k.weight" in message
    # The other components of the same file are untouched and still load.
    checkpoint.load_video_decoder(broken, "cpu", torch.float32)


def test_loader_names_a_misshaped_tensor(tiny: TinyModelFiles, tmp_path: Path) -> None:
    key = "vae.decoder.conv_out.conv.weight"
    shape = model_files.read_safetensors_header(tiny.checkpoint).shapes[key]
    wrong = torch.zeros(shape[0] + 1, *shape[1:], dtype=STORAGE_DTYPE)
    broken = _rewrite(tiny.checkpoint, tmp_path / "misshaped.safetensors", {key: wrong})
    with pytest.raises(ValueError, match=rf"wrong shape: {key} \[{shape[0] + 1}, "):
        checkpoint.load_video_decoder(broken, "cpu")


def test_loader_requires_the_config(tiny: TinyModelFiles, tmp_path: Path) -> None:
    bare = _rewrite(tiny.checkpoint, tmp_path / "bare.safetensors", {}, keep_config=False)
    with pytest.raises(ValueError, match="no 'config' in its safetensors metadata"):
        checkpoint.load_audio_decoder(bare, "cpu")
    with pytest.raises(ValueError, match="is a full LTX-2 checkpoint, not a spatial upsampler file"):
        checkpoint.load_upsampler(tiny.checkpoint, "cpu")


def test_extra_statistics_are_ignored_but_unknown_tensors_refused(
    tiny: TinyModelFiles, tmp_path: Path
) -> None:
    extras = {"vae.per_channel_statistics.channel": torch.arange(128, dtype=STORAGE_DTYPE)}
    tolerated = _rewrite(tiny.checkpoint, tmp_path / "extras.safetensors", extras)
    checkpoint.load_video_decoder(tolerated, "cpu")
    unknown = _rewrite(
        tiny.checkpoint, tmp_path / "unknown.safetensors", {"vae.decoder.bogus": torch.zeros(1)}
    )
    with pytest.raises(ValueError, match=r"1 tensors the model has no slot for: vae\.decoder\.bogus"):
        checkpoint.load_video_decoder(unknown, "cpu")
