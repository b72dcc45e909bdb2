"""NOTE [layer ranges]: which contiguous range of the transformer blocks each rank holds under the
loader's `weights layers` (workers/engine/comfy/layer_split.py NOTE [layers]).

The blocks of one file are not all the same size: the fp8 scaled files keep block 0 and the last five
in bf16, two bytes a weight where the others hold one. Split by count, the last of three workers held
7.6 GiB of LTX-2.3 22B fp8's blocks against 5.8 and 6.1 GiB on the others and ran out of a 16 GiB cap
at 14,080 video tokens while they had room (bench/results/weights_22b_fp8_layers_h200_shared.json). So
the ranges balance bytes: they minimise the largest rank's share of the blocks' bytes; among the
splits that reach that, the most even one (smallest sum of squared shares), ties going to the earlier
ranks holding more. Blocks of one size thus keep the count split (the first ranks one block more).
Only the blocks count: every rank also holds everything outside them, the same bytes on each.

Both sides call balanced_ranges with the same bytes, the file header's (memory_plan.layer_ranges): the
UI's pre-flight, and every rank as it drops the ranges of the others, so the plan is what they hold.
Pure arithmetic, importable anywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate


def balanced_ranges(block_bytes: Sequence[int], world_size: int) -> tuple[range, ...]:
    """Contiguous ranges of the blocks in rank order, each at least one block, whose largest share of
    `block_bytes` (each block's bytes, in block order) is as small as it can be (NOTE [layer ranges]).
    ValueError when there are fewer blocks than ranks. Exact: O(world_size x blocks^2) steps."""
    num_blocks = len(block_bytes)
    if world_size < 1:
        raise ValueError(f"weights layers needs at least one worker, got world_size {world_size}")
    if num_blocks < world_size:
        raise ValueError(
            f"weights layers gives each of the {world_size} workers at least one of the model's {num_blocks} "
            f"transformer blocks; use at most {num_blocks} GPUs, or another weights option"
        )
    prefix = list(accumulate(block_bytes, initial=0))
    largest = _smallest_largest_share(prefix, world_size)
    # even[r][i]: the smallest sum of squared shares of r ranges over blocks [0, i), none above `largest`.
    even: list[list[int | None]] = [[None] * (num_blocks + 1) for _ in range(world_size + 1)]
    even[0][0] = 0
    for r in range(1, world_size + 1):
        for i in range(r, num_blocks - (world_size - r) + 1):
            costs = [
                cost + (prefix[i] - prefix[j]) ** 2
                for j in range(r - 1, i)
                if (cost := even[r - 1][j]) is not None and prefix[i] - prefix[j] <= largest
            ]
            even[r][i] = min(costs, default=None)
    stops, stop = [], num_blocks
    for r in range(world_size, 0, -1):  # from the last range back; a tie takes the shortest last range
        stops.append(stop)
        stop = max(
            j
            for j in range(r - 1, stop)
            if (cost := even[r - 1][j]) is not None
            and prefix[stop] - prefix[j] <= largest
            and cost + (prefix[stop] - prefix[j]) ** 2 == even[r][stop]
        )
    starts = [0, *reversed(stops[1:])]
    return tuple(range(start, stop) for start, stop in zip(starts, reversed(stops)))


def _smallest_largest_share(prefix: Sequence[int], world_size: int) -> int:
    """The smallest possible largest share over contiguous splits of the blocks into `world_size`
    non-empty ranges; `prefix`: the blocks' cumulative bytes (prefix[i]: blocks [0, i))."""
    num_blocks = len(prefix) - 1
    best = [prefix[i] if i >= 1 else None for i in range(num_blocks + 1)]  # one range over [0, i)
    for r in range(2, world_size + 1):
        best = [
            None
            if i < r
            else min(
                max(best[j], prefix[i] - prefix[j])  # type: ignore[type-var]
                for j in range(r - 1, i)
                if best[j] is not None
            )
            for i in range(num_blocks + 1)
        ]
    result = best[num_blocks]
    assert result is not None, "a split exists: at least as many blocks as ranks"
    return result


def range_bytes(block_bytes: Sequence[int], ranges: Sequence[range]) -> tuple[int, ...]:
    """Each range's share of `block_bytes`."""
    return tuple(sum(block_bytes[i] for i in held) for held in ranges)
