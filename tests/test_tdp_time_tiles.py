"""The TDP Upscaler's spans of frames for long clips (NOTE [time tiles] in workers/strategies/tiled.py):
geometry, blend weights, the audio each span hears, the auto rule, and the refusals. Pure; one check
against ComfyUI's own mapping when COMFYUI_PATH is set. The stage itself against native ComfyUI is in
tests/test_comfy_tdp.py (time cases).
"""

from __future__ import annotations

import itertools
import json

import pytest
import torch

from ltx2_mgpu.nodes.tdp_upscaler import run_line
from ltx2_mgpu.workers.strategies import tiled
from ltx2_mgpu.workers.strategies.tdp_plan import plan_tdp
from ltx2_mgpu.workers.wire.capabilities import COMFY, LTXCORE, check_tdp_time_tiles


def blended_sum(grid: tiled.TileGrid) -> torch.Tensor:
    total = torch.zeros(grid.frames, *grid.extent)
    for tile in grid.tiles:
        tile.cut(total[None, None])[0, 0].add_(
            tile.blend_mask().expand(tile.shape((1, 1, grid.frames, 0, 0))[2:])
        )
    return total


@pytest.mark.parametrize(
    "frames, extent, counts, time_tiles, overlap",
    [
        (80, (32, 48), (2, 2), 2, 5),  # a 25 s clip at the template's stage-2 size
        (61, (22, 40), (1, 2), 3, 4),  # uneven spans
        (9, (8, 8), (3, 3), 4, 2),  # spans shorter than twice the overlap: frames under three spans
        (4, (6, 6), (1, 1), 4, 0),  # one frame per span
    ],
)
def test_blend_weights_over_space_and_time_sum_to_exactly_one(frames, extent, counts, time_tiles, overlap):
    grid = tiled.make_grid(extent, counts, overlap, frames, time_tiles)
    assert len(grid.tiles) == counts[0] * counts[1] * time_tiles
    assert [t.index for t in grid.tiles] == list(range(len(grid.tiles)))
    assert torch.equal(blended_sum(grid), torch.ones(frames, *extent))  # exact, not allclose
    for tile in grid.tiles:
        mask = tile.blend_mask()
        assert mask.shape == (tile.t.size, tile.h.size, tile.w.size)
        assert (mask > 0).all() and (mask <= 1).all()
        assert torch.equal(tile.interior(), mask == 1)
    # Neighbouring spans share exactly `overlap` frames; the spans are row-major before space.
    spans = sorted({(t.t.start, t.t.end) for t in grid.tiles})
    assert all(a[1] - b[0] == overlap for a, b in itertools.pairwise(spans))
    assert grid.tiles[0].t.start == 0 and grid.tiles[-1].t.end == frames


def test_one_span_is_the_spatial_grid_unchanged():
    """Time untiled keeps the spatial grid's weights bit for bit (12 bits per axis): a short clip's
    video does not change with this feature."""
    with_time = tiled.make_grid((32, 48), (2, 2), 5, frames=16, time_tiles=1)
    spatial = tiled.make_grid((32, 48), (2, 2), 5)
    for a, b in zip(with_time.tiles, spatial.tiles):
        assert a.t is None and torch.equal(a.blend_mask(), b.blend_mask())
    assert with_time.describe() == "2x2 tiles"


def test_auto_cuts_only_clips_longer_than_the_model_generates():
    assert tiled.resolve_time_tiles(tiled.AUTO, 16, 5) == 1  # 5 s at 25 fps (121 frames)
    assert tiled.resolve_time_tiles(tiled.AUTO, 61, 5) == 1  # 10 s through the temporal x2 upscaler
    assert tiled.resolve_time_tiles(tiled.AUTO, 64, 5) == 1  # 20 s (505 frames)
    assert tiled.resolve_time_tiles(tiled.AUTO, 65, 5) == 2
    assert tiled.resolve_time_tiles(tiled.AUTO, 200, 5) == 4
    assert tiled.resolve_time_tiles(3, 16, 5) == 3
    with pytest.raises(ValueError, match=r"time tiles must be 0 \(auto\) or at least 1"):
        tiled.resolve_time_tiles(-1, 16, 5)


def test_too_many_spans_names_time_frames_and_overlap():
    with pytest.raises(
        ValueError,
        match=r"4 tiles along time do not fit: .* 8 latent frames along time, .* overlap of 5 frames .* at most 3",
    ):
        tiled.make_grid((8, 8), (1, 1), 5, frames=8, time_tiles=4)


def test_each_span_hears_the_audio_of_its_frames_and_every_audio_frame_sums_to_one():
    grid = tiled.make_grid((4, 6), (1, 2), 1, frames=9, time_tiles=3)  # spans [0,4) [3,7) [6,9)
    shares = tiled.audio_shares(grid, 37)
    spans = [(span.start, span.end) for span, _ in shares]
    assert (
        spans[:2] == [(0, 16), (0, 16)] and spans[2:4] == [(12, 29), (12, 29)] and spans[4:] == [(25, 37)] * 2
    )
    total = torch.zeros(37)
    for span, share in shares:
        total[span.slice] += share
    assert torch.allclose(total, torch.ones(37), rtol=0, atol=1e-6)
    assert tiled.audio_shares(tiled.make_grid((4, 6), (1, 2), 1), 37) is None  # untiled: all hear all
    # Fewer audio frames than video frames: each span still hears at least one.
    assert all(s.size >= 1 for s, _ in tiled.audio_shares(tiled.make_grid((2, 2), (1, 1), 0, 4, 4), 2))


@pytest.mark.comfyui
def test_audio_span_is_comfyuis_context_window_mapping():
    """tiled.audio_span equals what ComfyUI's LTXAV gives its context windows (LTXAV.
    map_context_window_to_modalities) for the span's frames, on sizes of real clips."""
    from comfyui_harness import comfyui_in_process, comfyui_root

    with comfyui_in_process(comfyui_root()):
        from comfy.model_base import LTXAV

        for frames, audio_frames in ((16, 126), (31, 251), (9, 37), (65, 506), (4, 2)):
            for count, overlap in ((2, 0), (3, 2), (4, 1)):
                if count > tiled.max_tiles(frames, overlap):
                    continue
                for span in tiled.split_axis(frames, count, overlap, "time"):
                    native = LTXAV.map_context_window_to_modalities(
                        None, list(range(span.start, span.end)), [(1, 128, frames), (1, 8, audio_frames)], 2
                    )[1]
                    ours = tiled.audio_span(span, frames, audio_frames)
                    assert list(range(ours.start, ours.end)) == native, (frames, audio_frames, span)


def test_ltx_core_engine_refuses_spans_and_says_what_to_change():
    check_tdp_time_tiles(COMFY, 3, 80)
    check_tdp_time_tiles(LTXCORE, 1, 80)
    with pytest.raises(
        ValueError, match=r"80 latent frames would be cut into 3 spans .* set time_tiles to 1"
    ):
        check_tdp_time_tiles(LTXCORE, 3, 80)


def test_plan_tiles_time_for_the_full_run_and_not_for_a_preview(tmp_path):
    from safetensors.torch import save_file

    from ltx2_mgpu.workers.embedded.tiny_ltx23 import tiny_ltx23_temporal_upsampler_config
    from ltx2_mgpu.workers.wire.requests import TdpUpscale

    # The plan reads only the file's config metadata: a stand-in tensor, no ComfyUI needed.
    upscaler = tmp_path / "temporal.safetensors"
    config = json.dumps(tiny_ltx23_temporal_upsampler_config())
    save_file({"stand_in": torch.zeros(1)}, str(upscaler), metadata={"config": config})
    args = {
        "video": torch.zeros(1, 128, 40, 2, 3), "sigmas": torch.tensor([0.6, 0.0]),
        "positive": {"tensor": torch.zeros(1, 3, 8), "unprocessed": True}, "upscaler": str(upscaler),
        "overlap": 2,
    }  # fmt: skip
    plan = plan_tdp(TdpUpscale.from_wire(args))  # temporal x2: 79 latent frames -> 2 auto spans
    assert plan.up_shape[2] == 79 and plan.grid.time_tiles == 2
    assert [(t.t.start, t.t.end) for t in plan.grid.tiles] == [(0, 41), (39, 79)]
    preview = plan_tdp(TdpUpscale.from_wire(args | {"preview": "first frames", "preview_frames": 17}))
    assert preview.grid.time_tiles == 1 and preview.out_shape[2] == 3
    with pytest.raises(
        ValueError, match=r"largest tile has 246 video tokens \(41 frames x 6 cells\).* 1x1 tiles x 2"
    ):
        plan_tdp(TdpUpscale.from_wire(args | {"max_video_tokens": 200}))
    # A centre-tile preview runs one span over every frame: too long, it names the preview that fits.
    with pytest.raises(
        ValueError, match=r"474 video tokens \(79 frames x 6 cells\).* Use preview 'centre tile, first"
    ):
        plan_tdp(TdpUpscale.from_wire(args | {"max_video_tokens": 200, "preview": "centre tile"}))


def test_console_line_names_the_spans():
    reply = {"tiles": [2, 2], "time_tiles": 3, "steps": 3, "preview_tile": None, "reused": {}}
    assert "2x2 tiles x 3 spans of frames on 2 workers" in run_line("up.safetensors", "x2", [reply] * 2, 1.0)
