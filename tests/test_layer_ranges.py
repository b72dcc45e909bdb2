"""The blocks each rank holds under weights layers (workers/wire/layer_ranges.py NOTE [layer ranges]):
contiguous, at least one each, the largest share of the blocks' bytes as small as any contiguous split
allows (checked against every split of small random files), the count split for blocks of one size; and
the pre-flight plans each GPU with those ranges.

The 22B fp8 scaled file's layout, header only: 48 blocks, block 0 and the last five in bf16 (773,390,720
bytes each, as ComfyUI held them on an H200), the others fp8 (387,514,976; the per-worker figures of
bench/results/weights_22b_fp8_layers_h200_shared.json). Split by count on three GPUs: 6.13 / 5.77 / 7.57
GiB of blocks; balanced: 6.49 / 6.50 / 6.49.
"""

from __future__ import annotations

import itertools
import random

import pytest

from ltx2_mgpu.workers.wire.layer_ranges import balanced_ranges, range_bytes
from ltx2_mgpu.workers.wire.memory_plan import GIB, ModelSizes, layer_ranges, model_shares, plan

BF16_BLOCK, FP8_BLOCK = 773_390_720, 387_514_976
FP8_22B = (BF16_BLOCK,) + (FP8_BLOCK,) * 42 + (BF16_BLOCK,) * 5
OTHER = 4_887_000_000  # outside the blocks (the file's embeddings, connectors, output stage: about 4.6 GiB)


def count_split(num_blocks: int, world_size: int) -> list[range]:
    """The split by count the ranges replaced: counts differing by at most one, the first ranks larger."""
    base, extra = divmod(num_blocks, world_size)
    stops = list(itertools.accumulate(base + (rank < extra) for rank in range(world_size)))
    return [range(start, stop) for start, stop in zip([0, *stops], stops)]


def smallest_largest_share(block_bytes: list[int], world_size: int) -> int:
    """Every contiguous split, tried."""
    n = len(block_bytes)
    return min(
        max(sum(block_bytes[a:b]) for a, b in zip((0, *cuts), (*cuts, n)))
        for cuts in itertools.combinations(range(1, n), world_size - 1)
    )


def test_the_largest_share_is_the_smallest_any_contiguous_split_gives():
    rng = random.Random(0)
    for _ in range(400):
        n = rng.randint(1, 9)
        world = rng.randint(1, n)
        block_bytes = [rng.choice((1, 2, 3, 5, 8, 100)) for _ in range(n)]
        ranges = balanced_ranges(block_bytes, world)
        assert len(ranges) == world and ranges[0].start == 0 and ranges[-1].stop == n
        assert all(len(r) >= 1 for r in ranges) and all(
            a.stop == b.start for a, b in itertools.pairwise(ranges)
        )
        assert max(range_bytes(block_bytes, ranges)) == smallest_largest_share(block_bytes, world), (
            block_bytes,
            world,
            ranges,
        )


def test_blocks_of_one_size_keep_the_count_split():
    for n in range(1, 50):
        for world in range(1, min(n, 8) + 1):
            assert list(balanced_ranges([896 << 20] * n, world)) == count_split(n, world), (n, world)


def test_fewer_blocks_than_ranks_is_refused_naming_both():
    with pytest.raises(
        ValueError, match="each of the 5 workers at least one of the model's 4 transformer blocks"
    ):
        balanced_ranges([1, 2, 3, 4], 5)


def test_the_22b_fp8_file_is_balanced_by_bytes_not_by_count():
    ranges = balanced_ranges(FP8_22B, 3)
    assert ranges == (range(0, 17), range(17, 35), range(35, 48))
    balanced = range_bytes(FP8_22B, ranges)
    by_count = range_bytes(FP8_22B, count_split(48, 3))
    assert [round(b / GIB, 2) for b in by_count] == [6.13, 5.77, 7.57]
    assert [round(b / GIB, 2) for b in balanced] == [6.49, 6.5, 6.49]
    assert max(balanced) < max(by_count) - GIB  # the last GPU holds over 1 GiB less
    assert max(balanced) - min(balanced) <= FP8_BLOCK  # within one fp8 block of each other
    for world in (2, 4, 8):
        assert max(range_bytes(FP8_22B, balanced_ranges(FP8_22B, world))) < max(
            range_bytes(FP8_22B, count_split(48, world))
        )


def test_the_pre_flight_plans_each_gpu_with_the_ranks_ranges():
    """plan()'s per-GPU model under layers is the outside layers plus that GPU's range, the ranges the
    ranks hold (memory_plan.layer_ranges, which engine/comfy/layer_split.place_layers is given the same
    header bytes for), and the console names them."""
    sizes = ModelSizes(sum(FP8_22B), BF16_BLOCK, OTHER, 4096, num_blocks=48, per_block_bytes=FP8_22B)
    found = plan(sizes, ["cuda:0"] * 3, [16 * GIB] * 3, "layers", 6_144, "bfloat16")
    ranges = layer_ranges(sizes, 3)
    assert found.layer_ranges == ranges == balanced_ranges(FP8_22B, 3)
    models = [n.model_bytes for n in found.needs["layers"]]
    assert models == list(model_shares(sizes, "layers", 3))
    assert models == [OTHER + b for b in range_bytes(FP8_22B, ranges)]
    assert "blocks 0-16, 17-34, 35-47, split to balance their bytes" in found.console_block()
    # other options hold the same on every GPU; layers is not offered with more GPUs than blocks
    assert len(set(model_shares(sizes, "offloaded", 3))) == 1
    few = ModelSizes(2 * FP8_BLOCK, FP8_BLOCK, OTHER, 4096, num_blocks=2, per_block_bytes=(FP8_BLOCK,) * 2)
    crowded = plan(few, ["cuda:0"] * 3, [80 * GIB] * 3, "replicated", 6_144, "bfloat16")
    assert "layers" not in crowded.available and crowded.layer_ranges == ()
    assert "(2 blocks for 3 workers)" in crowded.console_block()
