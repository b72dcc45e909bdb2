"""Distributed VAE Decode: the same frames as ltx-core's own decode, whatever the number of ranks.

Tolerance (issue 6): video max abs error at most 1e-5 of the IMAGE range (0..1) against ltx-core's
single-process decode of the same latent over the same tiles, fp32 on CPU (measured 1.2e-7: the
blend's rounding); N ranks give the same bits as one. Audio: bit-exact, against ltx-core and across
rank counts.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
import types

import pytest
import torch
from ltx_core.model.audio_vae import VocoderConfigurator, decode_audio
from ltx_core.model.video_vae import VideoDecoderConfigurator
from ltx_core.model.video_vae.tiling import SpatialTilingConfig, TemporalTilingConfig, Tile, TilingConfig

from conftest import NestedStandIn
from ltx2_mgpu.nodes.vae_decode import decode_latent
from ltx2_mgpu.workers.embedded.tiny_model import tiny_checkpoint_config
from ltx2_mgpu.workers.engine.ltxcore import checkpoint
from ltx2_mgpu.workers.engine.ltxcore.vae_tiling import ltxcore_plan as make_plan
from ltx2_mgpu.workers.group import preflight
from ltx2_mgpu.workers.group.client import output_slot
from ltx2_mgpu.workers.group.manager import MGPUModel
from ltx2_mgpu.workers.strategies.vae_tiles import MAX_AUTO_TILE_CELLS, TilePlan, TileSettings
from ltx2_mgpu.workers.wire import model_files
from ltx2_mgpu.workers.wire.errors import JobInputError
from ltx2_mgpu.workers.wire.vae_outputs import audio_output, image_shape

TOLERANCE = 1e-5
# 2 x 2 x 2 tiles on a [.., 4, 4, 6] latent: two causal temporal chunks, overlaps on every axis.
EXPLICIT = TileSettings(tile_px=128, overlap_px=32, temporal_frames=24, temporal_overlap_frames=8)


def ltx_config(settings: TileSettings) -> TilingConfig:
    spatial = SpatialTilingConfig(settings.tile_px, settings.overlap_px) if settings.tile_px else None
    temporal = (
        TemporalTilingConfig(settings.temporal_frames, settings.temporal_overlap_frames)
        if settings.temporal_frames
        else None
    )
    return TilingConfig(spatial_config=spatial, temporal_config=temporal)


def as_image(video: torch.Tensor) -> torch.Tensor:
    """ltx-core decoder output [B, 3, F, H, W] -> ComfyUI IMAGE [B*F, H, W, 3] (VAE.process_output)."""
    b, c, f, h, w = video.shape
    return torch.clamp((video + 1.0) / 2.0, 0.0, 1.0).permute(0, 2, 3, 4, 1).reshape(b * f, h, w, c)


def plan_as_ltx_tiles(plan: TilePlan) -> list[Tile]:
    """The plan's tiles in ltx-core's Tile form (weights as masks; ltx-core divides by their sum)."""
    tiles = []
    for i in range(plan.num_tiles):
        weights = [axis.weights[j] for axis, j in zip(plan.axes, plan.axis_indices(i))]
        whole = (slice(None), slice(None))
        tiles.append(
            Tile(whole + plan.latent_slices(i), whole + plan.pixel_slices(i), (None, None, *weights))
        )
    return tiles


def ltx_tiled_decode(decoder, latent: torch.Tensor, settings: TileSettings | None = None, plan=None):
    """ltx-core's own single-process tiled decode (its tile plan, or ours patched in)."""
    with torch.inference_mode():
        if plan is not None:
            decoder._prepare_tiles = lambda _latent, _config: plan_as_ltx_tiles(plan)
            chunks = list(decoder.tiled_decode(latent, TilingConfig()))
            del decoder._prepare_tiles
        else:
            chunks = list(decoder.tiled_decode(latent, ltx_config(settings)))
    return as_image(torch.cat(chunks, dim=2))


# ----- the plan (pure) ---------------------------------------------------------------------------
SHAPES = [(4, 6, 8), (5, 3, 9), (1, 6, 8), (16, 32, 48), (17, 11, 20)]
SETTINGS = [
    TileSettings(128, 32, 16, 8),
    TileSettings(512, 64, 64, 24),
    TileSettings(64, 0, 24, 8),
    TileSettings(256, 64, 0, 24),
    EXPLICIT,
]


def test_plan_has_ltx_cores_tiles_and_blend():
    with torch.device("meta"):
        decoder = VideoDecoderConfigurator.from_config(tiny_checkpoint_config())
    for fhw, settings in itertools.product(SHAPES, SETTINGS):
        ref = decoder._prepare_tiles(torch.empty(1, 128, *fhw, device="meta"), ltx_config(settings))
        plan = make_plan(fhw, settings, 3)
        assert plan.num_tiles == len(ref), (fhw, settings)
        for i, tile in enumerate(ref):
            assert tile.in_coords[2:] == plan.latent_slices(i)
            assert all(
                (o.start or 0, full if o.stop is None else o.stop) == (s.start, s.stop)
                for o, s, full in zip(tile.out_coords[2:], plan.pixel_slices(i), plan.pixel_shape)
            )
        if max(fhw) > 9:
            continue  # dense weight checks on the small shapes only
        summed = torch.zeros(plan.pixel_shape, dtype=torch.float64)
        for tile in ref:
            summed[tile.out_coords[2:]] += tile.blend_mask[0, 0].double()
        for i, tile in enumerate(ref):
            box = plan.pixel_slices(i)
            ours = torch.zeros(tuple(s.stop - s.start for s in box), dtype=torch.float64)
            for region in plan.regions_of(i):
                ours[plan.local_slices(region, i)] = plan.weight(region, i).double()
            theirs = tile.blend_mask[0, 0].double() / summed[box]
            assert float((ours - theirs).abs().max()) < 1e-6, (fhw, settings, i)


@pytest.mark.parametrize("world_size", [1, 2, 3, 5])
def test_regions_partition_the_output_and_weights_sum_to_one(world_size):
    for fhw, settings in itertools.product(SHAPES[:3], [*SETTINGS[:3], TileSettings()]):
        plan = make_plan(fhw, settings, world_size)
        count = torch.zeros(plan.pixel_shape, dtype=torch.int32)
        total = torch.zeros(plan.pixel_shape, dtype=torch.float64)
        for region in plan.regions:
            (t0, t1), (h0, h1), (w0, w1) = region.pixels
            count[t0:t1, h0:h1, w0:w1] += 1
            for tile in region.tiles:
                total[t0:t1, h0:h1, w0:w1] += plan.weight(region, tile).double()
            assert region.finalizer == plan.owner(region.tiles[0])
            if not region.is_shared:
                assert torch.equal(
                    plan.weight(region, region.tiles[0]), torch.ones(t1 - t0, h1 - h0, w1 - w0)
                )
        assert bool((count == 1).all()), "every output value is written exactly once"
        assert float((total - 1).abs().max()) < 1e-6
        moved = set()
        for round_, source, target in itertools.product(
            range(plan.rounds), range(world_size), range(world_size)
        ):
            items = plan.transfers(source, target, round_)
            assert all(plan.owner(tile) == source for _, tile in items)
            assert all(plan.regions[r].finalizer == target != source for r, _ in items)
            assert all(max(plan.regions[r].tiles) < (round_ + 1) * world_size for r, _ in items)
            moved.update(items)
        remote = {
            (r.index, t)
            for r in plan.regions
            for t in r.tiles
            if r.is_shared and plan.owner(t) != r.finalizer
        }
        assert moved == remote, "every remote contribution travels exactly once"


def test_auto_tiles_follow_the_group_size():
    fhw = (16, 32, 48)  # 1024 x 1536 x 121 frames
    areas = {}
    for world_size in range(1, 9):
        plan = make_plan(fhw, TileSettings(), world_size)
        sizes = [[b - a for a, b in axis.latent] for axis in plan.axes]
        assert plan.grid[0] == 1, "auto never splits time"
        assert max(sizes[1]) <= MAX_AUTO_TILE_CELLS and max(sizes[2]) <= MAX_AUTO_TILE_CELLS
        assert plan.num_tiles >= world_size
        areas[world_size] = max(sizes[1]) * max(sizes[2])
        if plan.num_tiles % world_size == 0 and world_size <= 4:
            assert plan.num_tiles == 12, "1-4 ranks share the 512 px grid evenly"
    assert max(areas.values()) == areas[1], "more ranks never make a tile larger than one rank's"
    assert areas[8] < areas[1]
    assert make_plan((2, 2, 3), TileSettings(), 4).num_tiles == 1  # too small to split: one tile


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tile_px": 100}, "tile_size 100 is not allowed"),
        ({"tile_px": 32}, "from 64 to 4096"),
        ({"tile_px": 4128}, "tile_size 4128 is not allowed"),
        ({"overlap_px": 48}, "overlap 48 is not allowed: use 0 or a multiple of 32"),
        ({"temporal_frames": 4}, "temporal_size 4 is not allowed"),
        ({"temporal_frames": 14}, "multiple of 4 frames"),
        ({"temporal_overlap_frames": 6}, "temporal_overlap 6 is not allowed"),
    ],
)
def test_tile_settings_say_what_is_allowed(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TileSettings(**kwargs)


def test_tile_settings_take_vaedecodetiled_ranges():
    # The LTX-2.3 templates' VAEDecodeTiled: 4-frame temporal overlap; VAEDecodeTiled also takes
    # chunks of 12 frames and overlaps as large as the tile (it shrinks them itself).
    for kwargs in [
        {"tile_px": 512, "overlap_px": 64, "temporal_frames": 4096, "temporal_overlap_frames": 4},
        {"tile_px": 64, "overlap_px": 64, "temporal_frames": 12, "temporal_overlap_frames": 12},
        {"tile_px": 4096, "overlap_px": 4096, "temporal_frames": 8, "temporal_overlap_frames": 4096},
    ]:
        assert dataclasses.asdict(TileSettings(**kwargs)) == kwargs


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tile_px": 128, "overlap_px": 128}, "smaller than tile_size 128"),
        ({"temporal_frames": 12}, "temporal_size 12 / temporal_overlap 24 are not whole latent frames"),
        ({"temporal_frames": 8, "temporal_overlap_frames": 0}, "at least 16"),
        ({"temporal_frames": 32, "temporal_overlap_frames": 4}, "multiples of 8 frames"),
        ({"temporal_frames": 16, "temporal_overlap_frames": 16}, "smaller than temporal_size 16"),
    ],
)
def test_ltxcore_tiles_say_what_they_take(kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_plan((4, 8, 8), TileSettings(**kwargs), 2)


def test_waveform_length_from_config_equals_the_decoders(tiny_path):
    config = model_files.read_checkpoint_config(tiny_path)
    decoder = checkpoint.load_audio_decoder(tiny_path, "cpu", torch.float32)
    vocoder = checkpoint.load_vocoder(tiny_path, "cpu", torch.float32)
    with torch.inference_mode():
        for frames in (1, 2, 9):
            wave = vocoder(decoder(torch.randn(1, 8, frames, 16)))
            expected = audio_output(config, frames)
            assert tuple(wave.shape) == expected.shape(1)
            assert expected.sample_rate == vocoder.output_sampling_rate
    # LTX-2.3's vocoder with bandwidth extension (narrow widths, its real rates and kernels).
    amp = {"resblock": "AMP1", "stereo": True, "activation": "snakebeta", "resblock_kernel_sizes": [3]}
    amp["resblock_dilation_sizes"] = [[1, 3, 5]]
    bwe_config = {
        "vocoder": {
            "vocoder": {
                **amp,
                "upsample_rates": [5, 2, 2, 2, 2, 2],
                "upsample_kernel_sizes": [11, 4, 4, 4, 4, 4],
            }
            | {"upsample_initial_channel": 128},
            "bwe": {**amp, "upsample_rates": [6, 5, 2, 2, 2], "upsample_kernel_sizes": [12, 11, 4, 4, 4]}
            | {"upsample_initial_channel": 64, "n_fft": 512, "hop_length": 80, "num_mels": 64}
            | {"input_sampling_rate": 16000, "output_sampling_rate": 48000},
        }
    }
    bwe = VocoderConfigurator.from_config(bwe_config).eval()
    with torch.inference_mode():
        for frames in (1, 7):
            mel = torch.randn(1, 2, 4 * frames - 3, 64)
            expected = audio_output(bwe_config, frames)
            assert tuple(bwe(mel).shape) == expected.shape(1) and expected.sample_rate == 48000


# ----- through the worker group ------------------------------------------------------------------
def check_image(image: torch.Tensor, shape: tuple[int, ...]) -> None:
    """What ComfyUI's IMAGE consumers (CreateVideo, SaveImage, previews) take."""
    assert tuple(image.shape) == shape and image.dtype == torch.float32 and image.device.type == "cpu"
    assert image.is_contiguous() and float(image.min()) >= 0.0 and float(image.max()) <= 1.0


def test_decode_equals_ltx_core_for_1_2_3_ranks(manager, tiny_path):
    g = torch.Generator().manual_seed(7)
    video = torch.randn(1, 128, 4, 4, 6, generator=g)
    av_video = torch.randn(2, 128, 3, 4, 6, generator=g)
    av_audio = torch.randn(2, 8, 9, 16, generator=g)
    decoder = checkpoint.load_video_decoder(tiny_path, "cpu", torch.float32)
    ref_explicit = ltx_tiled_decode(decoder, video, EXPLICIT)
    with torch.inference_mode():
        ref_whole = as_image(decoder(video))
        audio_decoder = checkpoint.load_audio_decoder(tiny_path, "cpu", torch.float32)
        vocoder = checkpoint.load_vocoder(tiny_path, "cpu", torch.float32)
        ref_audio = decode_audio(av_audio, audio_decoder, vocoder)
    images, waves, errors = {}, {}, {}
    for ranks in (1, 2, 3):
        model = MGPUModel.create(tiny_path, devices=f"cpu:{ranks}", dtype="float32")
        image, audio = decode_latent(model, {"samples": video}, *dataclasses.astuple(EXPLICIT))
        check_image(image, image_shape(tuple(video.shape)))
        assert audio is None
        errors[(ranks, "video")] = float((image - ref_explicit).abs().max())
        images[ranks] = image.clone()

        whole, _ = decode_latent(
            model, {"samples": video}, 4096, 64, 0, 24
        )  # one tile: ltx-core's plain decode
        errors[(ranks, "whole")] = float((whole - ref_whole).abs().max())

        av = {"samples": NestedStandIn([av_video, av_audio]), "type": "audio"}
        image, audio = decode_latent(model, av)  # auto tiles from the group size
        plan = make_plan(tuple(av_video.shape[2:]), TileSettings(), ranks)
        check_image(image, image_shape(tuple(av_video.shape)))
        errors[(ranks, "av video")] = float(
            (image - ltx_tiled_decode(decoder, av_video, plan=plan)).abs().max()
        )
        assert set(audio) == {"waveform", "sample_rate"} and audio["sample_rate"] == ref_audio.sampling_rate
        wave = audio["waveform"]
        assert (
            wave.dtype == torch.float32
            and wave.device.type == "cpu"
            and wave.shape == ref_audio.waveform.shape
        )
        waves[ranks] = wave.clone()
    print("max abs error vs ltx-core:", {k: f"{v:.1e}" for k, v in errors.items()})
    # A worker and this process run the same convolutions, but oneDNN picks its kernels (and with
    # them the summation order) by thread count and buffer alignment: bit for bit on AVX2 machines,
    # a few float32 roundings apart on AVX-512/AMX ones.
    assert max(errors.values()) <= TOLERANCE, errors
    for ranks in (2, 3):
        spread = float((images[ranks] - images[1]).abs().max())
        assert spread <= TOLERANCE, f"{ranks} ranks decode {spread:.1e} off one rank's"
    # The audio is decoded whole by one rank, so only its CPU thread count (cores / ranks) separates it
    # from the in-process decode: 1 vs 2 threads moves the last bit (6e-8 measured), nothing more.
    scale = float(ref_audio.waveform.abs().max())
    for ranks in (1, 2, 3):
        error = float((waves[ranks] - ref_audio.waveform).abs().max())
        assert error <= 1e-6 * scale, f"audio of {ranks} ranks is {error:.1e} off ltx-core's"


def test_errors_say_what_to_change_and_cancel_keeps_the_group(manager, tiny_path, fake_comfy, monkeypatch):
    model = MGPUModel.create(tiny_path, devices="cpu:2", dtype="float32")
    with pytest.raises(ValueError, match="holds only audio; decode it with LTXV Audio VAE Decode"):
        decode_latent(model, {"samples": torch.zeros(1, 8, 5, 16), "type": "audio"})
    with pytest.raises(ValueError, match="has 64 channels"):
        decode_latent(model, {"samples": torch.zeros(1, 64, 2, 2, 2)})
    with pytest.raises(ValueError, match="tile_size 100 is not allowed"):
        decode_latent(model, {"samples": torch.zeros(1, 128, 2, 2, 2)}, 100)
    with monkeypatch.context() as patch:  # a small /dev/shm (Docker's default is 64 MiB)
        patch.setattr(preflight.os, "statvfs", lambda _: types.SimpleNamespace(f_bavail=16, f_frsize=2**20))
        with pytest.raises(
            ValueError, match=r"needs 0\.1 GiB of shared memory \(/dev/shm\) but 0\.0 GiB is free"
        ):
            decode_latent(model, {"samples": torch.zeros(1, 128, 4, 16, 16)})
    assert manager.group is None, "input errors are caught before any worker starts"
    video = torch.randn(1, 128, 4, 4, 6)
    decode_latent(model, {"samples": video}, 64, 0, 16, 8)  # starts the group, loads the decoder
    nan = video.clone()
    nan[0, 0, 0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        decode_latent(model, {"samples": nan})
    state, interrupted = fake_comfy
    state["interrupt"] = True  # Cancel pressed: the client passes it on within one poll (50 ms)
    with pytest.raises(interrupted):  # 36 tiles in 18 rounds: every rank stops at a round boundary
        decode_latent(model, {"samples": torch.randn(1, 128, 7, 4, 6)}, 64, 0, 16, 8)
    assert manager.group is not None and manager.group.is_alive
    image, _ = decode_latent(model, {"samples": video}, 64, 0, 16, 8)
    assert torch.isfinite(image).all()


def test_a_latent_too_small_to_decode_is_refused_at_once_and_the_group_keeps_its_model(manager, tiny_path):
    """Issue 20 item 3: a 1 x 1-cell latent failed inside the one rank that got its tile; the other
    waited, so the group was stopped after 10 s and the model reloaded. Now the node refuses it before
    any work (strategies/decode_limits.py); the ranks refuse it alike when the node's check is bypassed,
    and a tiling whose last tile is one cell wide: recoverable within 1 s, same workers, no reload."""
    model = MGPUModel.create(tiny_path, devices="cpu:2", dtype="float32")
    decode_latent(model, {"samples": torch.randn(1, 128, 2, 2, 2)})  # starts the group, loads the decoder
    group = manager.group
    pids = group.pids
    ops: list[str] = []
    real_run = group.run

    def recording_run(op, *args, **kwargs):
        ops.append(op)
        return real_run(op, *args, **kwargs)

    group.run = recording_run
    smallest = r"the smallest latent that decodes is \[B, 128, F, 2, 2\] \(64 x 64 px\)"
    for shape in ((1, 128, 1, 1, 1), (1, 128, 2, 1, 3)):
        t0 = time.monotonic()
        with pytest.raises(ValueError, match=smallest):
            decode_latent(model, {"samples": torch.randn(*shape)})
        assert time.monotonic() - t0 < 1.0
    assert ops == [], "refused by the node before any job"
    video = torch.randn(1, 128, 1, 1, 1)
    args = {
        "video": video,
        "audio": None,
        "tiles": dataclasses.asdict(TileSettings()),
        "out_image": output_slot(image_shape(tuple(video.shape)), torch.float32),
        "out_audio": None,
    }
    t0 = time.monotonic()
    with pytest.raises(JobInputError, match=smallest):
        manager.run(model, "vae_decode", args)
    error_s = time.monotonic() - t0
    t0 = time.monotonic()
    with pytest.raises(
        ValueError, match=r"the tiles leave one 1 cell along height \(32 px\); .* Set tile_size to 0"
    ):
        decode_latent(model, {"samples": torch.randn(1, 128, 1, 3, 3)}, 64, 0)  # tiles of 2 and 1 cells
    tile_error_s = time.monotonic() - t0
    print(f"rank-side refusals on 2 ranks: 1 x 1 latent {error_s:.3f} s, 1-cell tile {tile_error_s:.3f} s")
    assert error_s < 1.0 and tile_error_s < 1.0
    image, _ = decode_latent(model, {"samples": torch.randn(1, 128, 2, 2, 2)})
    assert manager.group is group and group.pids == pids, "the workers were restarted"
    assert ops == ["vae_decode"] * 3, f"the model was loaded again: {ops}"
    check_image(image, (9, 64, 64, 3))


# ----- on the device machine ---------------------------------------------------------------------
# cuDNN convolutions may run in TF32 and pick other algorithms per process: GPU results are close to
# the CPU reference, not equal.
GPU_TOLERANCE = 3e-2


@pytest.mark.gpu
@pytest.mark.parametrize(
    "devices",
    [
        "cuda:0,cuda:0",  # ranks sharing a GPU: gloo, strips exchanged through host memory
        pytest.param("cuda:0,cuda:1", marks=pytest.mark.multigpu),  # NCCL, strips stay on the GPUs
    ],
)
def test_gpu_decode_matches_cpu_reference(manager, tiny_path, devices):
    g = torch.Generator().manual_seed(3)
    video = torch.randn(1, 128, 4, 4, 6, generator=g)
    audio = torch.randn(1, 8, 9, 16, generator=g)
    reference = ltx_tiled_decode(
        checkpoint.load_video_decoder(tiny_path, "cpu", torch.float32), video, EXPLICIT
    )
    latent = {"samples": NestedStandIn([video, audio])}
    one, one_audio = decode_latent(
        MGPUModel.create(tiny_path, devices="cuda:0", dtype="float32"), latent, *dataclasses.astuple(EXPLICIT)
    )
    many, many_audio = decode_latent(
        MGPUModel.create(tiny_path, devices=devices, dtype="float32"), latent, *dataclasses.astuple(EXPLICIT)
    )
    check_image(many, image_shape(tuple(video.shape)))
    assert float((many - one).abs().max()) <= 1e-4
    assert float((one - reference).abs().max()) <= GPU_TOLERANCE
    assert many_audio["waveform"].shape == one_audio["waveform"].shape
    assert float((many_audio["waveform"] - one_audio["waveform"]).abs().max()) <= 1e-4
