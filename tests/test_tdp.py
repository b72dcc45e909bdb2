"""Tiled data parallelism (TDP Upscaler): tile geometry, blend weights, positions, and the stage itself.

Claims tested: the blend weights are a partition of unity bit for bit; one tile without overlap is
the untiled stage bit for bit; a grid gives the same result on 1, 2 and 4 ranks (up to the order
of the sum); the stage-1 audio comes out unchanged; user mistakes are refused with what to change
and leave the group usable.
"""

from __future__ import annotations

import itertools
import time

import pytest
import torch
from tdp_helpers import (
    make_stage,
    node_inputs,
    run_tiled,
)

from ltx2_mgpu.nodes.sp_sampler import sample_latent
from ltx2_mgpu.nodes.tdp_upscaler import GRIDS, parse_tiles, tdp_upscale
from ltx2_mgpu.workers.engine.ltxcore import latents, tdp_job, tdp_upsample
from ltx2_mgpu.workers.group.manager import MGPUModel
from ltx2_mgpu.workers.strategies import tiled

# Ranks sum their tiles in another order than one rank does: float32 rounding, relative to the max.
RANKS_TOLERANCE = 1e-5
STAGE1 = (1, 128, 2, 4, 5)  # upscaled: 8 x 10 cells, 2 frames -> 160 tokens; a 2x2 tile 2 x 5 x 6


# ---- geometry (pure) -------------------------------------------------------------------------


def blended_sum(grid: tiled.TileGrid) -> torch.Tensor:
    total = torch.zeros(grid.extent)
    for tile in grid.tiles:
        total[tile.h.slice, tile.w.slice] += tile.blend_mask()
    return total


@pytest.mark.parametrize(
    "extent, counts, overlap",
    [
        ((32, 48), (2, 2), 5),  # the 1024x1536 stage 2
        ((32, 48), (2, 4), 5),
        ((33, 47), (3, 3), 5),  # uneven sizes (remainders)
        ((17, 9), (4, 1), 2),
        ((10, 12), (3, 4), 4),  # tiles shorter than twice the overlap: cells under three tiles
        ((8, 8), (3, 3), 5),  # the most tiles that fit: every cell under up to three tiles
        ((12, 16), (2, 3), 0),
        ((12, 16), (1, 1), 0),
    ],
)
def test_blend_masks_sum_to_exactly_one(extent, counts, overlap):
    grid = tiled.make_grid(extent, counts, overlap)
    assert len(grid.tiles) == counts[0] * counts[1]
    assert torch.equal(blended_sum(grid), torch.ones(extent))  # exact, not allclose
    for tile in grid.tiles:
        mask = tile.blend_mask()
        assert (mask > 0).all() and (mask <= 1).all()


def test_axis_split_counts_overlap_and_ramps():
    spans = tiled.split_axis(32, 2, 5, "height")
    assert [(s.start, s.end) for s in spans] == [(0, 19), (14, 32)]  # (32 + 5) // 2 = 18, one extra
    spans = tiled.split_axis(10, 3, 2, "width")
    assert [(s.start, s.end) for s in spans] == [(0, 5), (3, 8), (6, 10)]
    for a, b in itertools.pairwise(spans):
        assert a.end - b.start == 2
    # Ramps k / (overlap + 1) into the shared cells, 1 elsewhere (quantised to 1/4096).
    weights = tiled.axis_weights(tiled.split_axis(20, 2, 2, "height"), 20, 2)
    assert weights[0][-3:].tolist() == [4096, 2731, 1365] and weights[1][:3].tolist() == [1365, 2731, 4096]


def test_impossible_split_names_axis_extent_and_overlap():
    with pytest.raises(
        ValueError, match=r"4 tiles along height do not fit: .* 8 cells \(256 px\) .* overlap of 5"
    ):
        tiled.make_grid((8, 20), (4, 1), 5)
    with pytest.raises(ValueError, match=r"allows at most 3 tiles\. Use fewer tiles along width"):
        tiled.make_grid((20, 8), (1, 4), 5)
    with pytest.raises(ValueError, match=r"allows at most 1 tile\. Use fewer tiles along height"):
        tiled.make_grid((6, 8), (2, 1), 5)


def test_auto_grid_depends_on_the_latent_only_and_fits():
    assert tiled.resolve_counts(0, 0, (32, 48), 5) == (2, 2)  # 1024x1536: the template's stage 2
    assert tiled.resolve_counts(0, 0, (34, 60), 5) == (2, 3)  # 1088x1920
    assert tiled.resolve_counts(0, 0, (60, 34), 5) == (3, 2)  # portrait
    assert tiled.resolve_counts(0, 0, (16, 24), 5) == (1, 1)  # 512x768: one tile, the untiled stage
    assert tiled.resolve_counts(0, 0, (4, 100), 5) == (1, 5)
    assert tiled.resolve_counts(0, 0, (8, 30), 29) == (1, 1)  # 2 tiles cannot share 29 of 30 cells: lowered
    assert tiled.resolve_counts(3, 1, (32, 48), 5) == (3, 1)


def test_round_robin_allows_more_tiles_than_ranks():
    grid = tiled.make_grid((32, 48), (3, 3), 5)
    owned = [[t.index for t in grid.for_rank(r, 4)] for r in range(4)]
    assert owned == [[0, 4, 8], [1, 5], [2, 6], [3, 7]]
    assert [t.index for t in tiled.make_grid((32, 48), (1, 2), 5).for_rank(3, 4)] == []


def test_tile_positions_start_at_zero_and_keep_widths():
    shape = (1, 128, 3, 12, 16)
    full = latents.video_positions(shape, 24.0, causal_fix=True)
    tile = tiled.make_grid((12, 16), (2, 2), 3).tiles[3]  # bottom-right: rows [5, 12), columns [7, 16)
    cut = tiled.tile_positions(full, shape, tile)
    shifted = tiled.shift_to_origin(cut, num_generated=cut.shape[2])
    assert cut[0, 1:, :, 0].amin(dim=1).tolist() == [5 * 32, 7 * 32]
    assert shifted[0, :, :, 0].amin(dim=1).tolist() == [0.0, 0.0, 0.0]
    assert torch.equal(shifted[..., 1] - shifted[..., 0], cut[..., 1] - cut[..., 0])
    # ... which is what the model sees for a latent of the tile's own size, bit for bit.
    own = latents.video_positions(tile.shape(shape), 24.0, causal_fix=True)
    assert torch.equal(shifted, own)


def test_appended_tokens_kept_by_overlapping_tiles_and_references_by_all():
    shape = (1, 128, 2, 8, 8)
    full = latents.video_positions(shape, 25.0, causal_fix=False)
    grid = tiled.make_grid((8, 8), (2, 2), 2)  # rows [0, 5) and [3, 8) in cells
    extra = torch.tensor(
        [
            [[0.0, 0.04], [0.0, 32.0], [0.0, 32.0]],  # top-left corner: tile 0 only
            [[0.0, 0.04], [128.0, 160.0], [0.0, 32.0]],  # row 4 lies in both rows of tiles, column 0
            [[-1.0, -0.96], [0.0, 256.0], [0.0, 256.0]],  # negative time: a reference token
            [[0.0, 0.04], [900.0, 932.0], [0.0, 32.0]],  # outside every tile: shared too
        ]
    ).permute(1, 0, 2)[None]  # [B, 3, M, 2]
    weights = tiled.extra_token_weights(tiled.tile_bounds(full, shape, grid), extra)
    assert weights[:, 0].tolist() == [1.0, 0.0, 0.0, 0.0]
    assert weights[:, 1].tolist() == [0.5, 0.0, 0.5, 0.0]
    assert weights[:, 2].tolist() == [0.25] * 4 and weights[:, 3].tolist() == [0.25] * 4
    assert torch.equal(weights.sum(dim=0), torch.ones(4))
    # Shifting a tile moves its appended tokens by the same offset (gaps kept).
    positions = torch.cat([tiled.tile_positions(full, shape, grid.tiles[3]), extra], dim=2)
    shifted = tiled.shift_to_origin(positions, num_generated=2 * 5 * 5)
    assert torch.equal(shifted[:, :, -4:], extra - torch.tensor([0.0, 96.0, 96.0]).view(1, 3, 1, 1))


def test_node_grid_choices_parse():
    assert parse_tiles("auto") == (tiled.AUTO, tiled.AUTO)
    assert [parse_tiles(g) for g in ("1x2", "2x1", "4x4")] == [(1, 2), (2, 1), (4, 4)]
    assert GRIDS[:4] == ("1x1", "1x2", "2x1", "1x3")
    with pytest.raises(ValueError, match="rows x columns"):
        parse_tiles("2 by 2")


# ---- the stage, in this process ----------------------------------------------------------------


@pytest.fixture(scope="module")
def stage(tiny):
    return make_stage(tiny, STAGE1)


def test_upsampler_doubles_space_between_the_vae_statistics(stage):
    assert stage.video.shape == (1, 128, 2, 8, 10)
    stats = tdp_upsample.video_statistics(stage.model, torch.device("cpu"))
    upsampler = next(v for k, v in stage.model.extras.items() if k.startswith("spatial_upsampler:"))
    with torch.inference_mode():
        by_hand = stats.normalize(upsampler(stats.un_normalize(stage.stage1)))
    assert torch.equal(stage.video, by_hand)


def test_one_tile_without_overlap_is_the_untiled_stage_bit_for_bit(stage):
    cpu = torch.device("cpu")
    untiled_start = time.perf_counter()
    untiled = tdp_job.denoise_untiled(
        stage.model, stage.video, stage.audio, *stage.contexts, stage.job, device=cpu
    )
    untiled_s = time.perf_counter() - untiled_start
    one = run_tiled(stage, tiled.make_grid((8, 10), (1, 1), 0), stage.audio)
    assert torch.equal(one, untiled)
    tiled_start = time.perf_counter()
    grid = run_tiled(stage, tiled.make_grid((8, 10), (2, 2), 2), stage.audio)
    tiled_s = time.perf_counter() - tiled_start
    diff = float((grid - untiled).abs().max())
    print(f"2x2 overlap 2 vs untiled: max abs diff {diff:.3g} (of {float(untiled.abs().max()):.3g}); "
          f"time ratio {tiled_s / untiled_s:.2f}")  # fmt: skip
    assert 0 < diff < float(untiled.abs().max())


def test_stage1_audio_is_context_for_the_video(stage):
    """The audio is held (never output) but the tiles see it: other audio, other video."""
    grid = tiled.make_grid((8, 10), (2, 2), 2)
    with_audio = run_tiled(stage, grid, stage.audio)
    other_audio = run_tiled(stage, grid, torch.zeros_like(stage.audio))
    assert not torch.allclose(with_audio, other_audio, atol=1e-4)


# ---- the node over worker groups ----------------------------------------------------------------


@pytest.mark.usefixtures("fake_comfy")
def test_four_tiles_agree_on_1_2_and_4_ranks_and_audio_is_stage1(manager, tiny, stage):
    results = {}
    for ranks in (1, 2, 4):
        kwargs, audio = node_inputs(stage, tiny)
        model = MGPUModel.create(tiny.checkpoint, devices=f"cpu:{ranks}", dtype="float32")
        (out,) = tdp_upscale(model, **kwargs)
        video_out, audio_out = out["samples"].tensors
        assert audio_out is audio and torch.equal(audio_out, stage.audio)  # stage-1 audio, bit for bit
        assert "noise_mask" not in out and out["downscale_ratio_spacial"] == 32
        results[ranks] = video_out.clone()
    reference = run_tiled(stage, tiled.make_grid((8, 10), (2, 2), 2), stage.audio)
    scale = float(reference.abs().max())
    for ranks, video in results.items():
        err = float((video - reference).abs().max()) / scale
        print(f"{ranks} ranks vs in-process 2x2: relative max error {err:.2e}")
        assert err <= RANKS_TOLERANCE, (ranks, err)
    assert float((results[4] - results[2]).abs().max()) / scale <= RANKS_TOLERANCE


@pytest.mark.usefixtures("fake_comfy")
def test_auto_tiles_give_the_same_video_on_1_2_and_3_workers(manager, tiny):
    """Issue 20 item 6: `auto` (the default of every example workflow) was one tile per worker, so
    the video changed with the GPU count (1.5e-2 between 1 and 2 workers). Now the grid follows the
    latent only: 26 cells wide -> 1x2 tiles on any group, the ranks differ only in summing order."""
    wide = make_stage(tiny, (1, 128, 2, 4, 13))  # upscaled: 8 x 26 cells
    assert tiled.resolve_counts(0, 0, (8, 26), 2) == (1, 2)
    results = {}
    for ranks in (1, 2, 3):
        kwargs, _ = node_inputs(wide, tiny)
        model = MGPUModel.create(tiny.checkpoint, devices=f"cpu:{ranks}", dtype="float32")
        (out,) = tdp_upscale(model, **{**kwargs, "tiles": "auto"})
        results[ranks] = out["samples"].tensors[0].clone()
    scale = float(results[1].abs().max())
    errors = {r: float((results[r] - results[1]).abs().max()) / scale for r in (2, 3)}
    print(f"auto tiles, relative max difference to 1 worker: {errors}")
    assert max(errors.values()) <= RANKS_TOLERANCE, errors


@pytest.mark.usefixtures("fake_comfy")
def test_refusals_say_what_to_change_and_group_keeps_working(manager, tiny, stage):
    model = MGPUModel.create(tiny.checkpoint, devices="cpu:2", dtype="float32")
    kwargs, _ = node_inputs(stage, tiny)
    sp_args = (
        kwargs["positive"],
        kwargs["negative"],
        {"samples": stage.video},
        torch.tensor([0.6, 0.3, 0.0]),
    )
    (sp_before,) = sample_latent(model, *sp_args, "euler", 3.0, 3.0, seed=3)
    with pytest.raises(ValueError, match=r"first sigma is 1: .* from pure noise .* invent unrelated content"):
        tdp_upscale(model, **{**kwargs, "sigmas": torch.tensor([1.0, 0.5, 0.0])})
    with pytest.raises(ValueError, match=r"4 tiles along height do not fit: .* 8 cells .* overlap of 5"):
        tdp_upscale(model, **{**kwargs, "tiles": "4x1", "overlap": 5})
    with pytest.raises(ValueError, match=r"preview 'centre' is not one of 'off', 'centre tile'"):
        tdp_upscale(model, **{**kwargs, "preview": "centre"})
    small = MGPUModel.create(tiny.checkpoint, devices="cpu:2", dtype="float32", max_video_tokens=40)
    with pytest.raises(
        ValueError, match=r"largest tile has 60 video tokens .* over the limit of 40\. Use more tiles"
    ):
        tdp_upscale(small, **kwargs)
    video_only = {"samples": stage.stage1.clone()}
    (out,) = tdp_upscale(model, **{**kwargs, "latent": video_only, "tiles": "auto", "sigmas": None})  # 1x1
    assert out["samples"].shape == (1, 128, 2, 8, 10) and torch.isfinite(out["samples"]).all()
    # TDP ran the transformer unsharded on each rank; sequence parallelism is back afterwards.
    (sp_after,) = sample_latent(model, *sp_args, "euler", 3.0, 3.0, seed=3)
    assert torch.equal(sp_after["samples"], sp_before["samples"])
