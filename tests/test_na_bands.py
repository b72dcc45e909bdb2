"""The band plan of the diffusion decoder (workers/strategies/na_bands.py), without ComfyUI.

na_window is checked against comfy_kitchen's own eager neighbourhood attention windows (what ComfyUI's
NADiffusionDecoder runs on the CPU); transfers must give every rank exactly the rows of its window,
each from the rank that owns it; query_chunks must cover the band and respect the byte budget.
"""

from __future__ import annotations

import itertools

import pytest

from ltx2_mgpu.workers.strategies.na_bands import band_plan, na_window, query_chunks, transfers
from ltx2_mgpu.workers.strategies.vae_encode_plan import HEIGHT, WIDTH


@pytest.mark.parametrize("kernel", [3, 5, 7, 11])
@pytest.mark.parametrize("length", [1, 2, 5, 7, 11, 16, 40])
def test_window_is_the_union_of_the_kernels_windows(length, kernel):
    # comfy_kitchen comes with ComfyUI's requirements, not with ours: a fresh clone skips this one.
    kitchen_na = pytest.importorskip(
        "comfy_kitchen.backends.eager.na", reason="needs comfy_kitchen (ComfyUI's requirements)"
    )
    starts, ends = kitchen_na._window_bounds(length, min(kernel, length), False)
    for start in range(length):
        for stop in range(start + 1, length + 1):
            expected = (min(starts[start:stop]), max(ends[start:stop]))
            assert na_window(length, kernel, start, stop) == expected, (start, stop)


@pytest.mark.parametrize("world_size", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("scale,kernel", [(1, 7), (2, 7), (2, 5), (4, 5), (8, 11)])
def test_transfers_bring_each_rank_exactly_its_window(world_size, scale, kernel):
    plan = band_plan((3, 6, 4), world_size)
    moves = transfers(plan, scale, kernel)
    for rank in range(plan.active_ranks):
        start, stop = plan.band(rank, scale)
        rows = set(range(start, stop))
        for move in moves:
            if move.target == rank:
                assert set(range(move.start, move.stop)) <= set(range(*plan.band(move.source, scale)))
                assert rows.isdisjoint(range(move.start, move.stop))
                rows |= set(range(move.start, move.stop))
        lo, hi = na_window(plan.cells * scale, kernel, start, stop)
        assert rows == set(range(lo, hi))


def test_bands_cut_the_longer_side_and_idle_ranks_past_its_cells():
    assert band_plan((2, 34, 60), 4).axis == WIDTH
    plan = band_plan((2, 3, 2), 5)
    assert (plan.axis, plan.bands) == (HEIGHT, ((0, 1), (1, 2), (2, 3)))
    assert not plan.is_active(3)
    with pytest.raises(ValueError, match="chunk_bytes is -1"):
        band_plan((2, 3, 2), 1, -1)


@pytest.mark.parametrize("chunk_bytes", [0, 1, 4 * 100 * 14, 4 * 100 * 40, 10**9])
def test_query_chunks_cover_the_band_within_the_budget(chunk_bytes):
    plan = band_plan((2, 6, 4), 2, chunk_bytes)
    runs = query_chunks(plan, 1, 8, 11, row_bytes=100)
    start, stop = plan.band(1, 8)
    assert runs[0][0] == start and runs[-1][1] == stop
    assert all(a[1] == b[0] for a, b in itertools.pairwise(runs))
    if chunk_bytes == 0:
        assert runs == ((start, stop),)
        return
    for first, last in runs:  # a run and its window's 10 extra rows, 4 tensors of 100 bytes a row
        assert last - first == 1 or 4 * 100 * (last - first + 10) <= chunk_bytes
