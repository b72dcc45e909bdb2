"""How tokens and attention heads are split over the ranks of a sequence-parallel group.

NOTE [partition]: both splits are contiguous and in rank order. Rank r owns tokens
[token_offsets[r], token_offsets[r] + token_counts[r]) and heads
[head_offsets[r], head_offsets[r] + head_counts[r]). Heads are split as evenly as possible with the
larger shares first (32 heads over 3 ranks -> 11, 11, 10), so any rank count up to the head count works.
Every exchange in this package (kernel and fallback) follows this layout.
"""

from __future__ import annotations

from itertools import accumulate


def even_split(total: int, parts: int) -> tuple[int, ...]:
    """Split `total` items into `parts` contiguous shares differing by at most one, larger first."""
    if parts <= 0:
        raise ValueError(f"cannot split over {parts} ranks; need at least 1")
    if total < 0:
        raise ValueError(f"cannot split a negative count ({total})")
    base, extra = divmod(total, parts)
    return tuple(base + (1 if r < extra else 0) for r in range(parts))


def offsets(counts: tuple[int, ...] | list[int]) -> tuple[int, ...]:
    """Start offset of each share: (0, c0, c0 + c1, ...)."""
    return (0, *accumulate(counts))[: len(counts)]


def head_split(num_heads: int, world_size: int) -> tuple[int, ...]:
    """Heads per rank. Raises ValueError when a rank would get none."""
    if world_size > num_heads:
        raise ValueError(
            f"{world_size} ranks cannot share {num_heads} attention heads: each rank needs at least one. "
            f"Use at most {num_heads} GPUs for sequence parallelism."
        )
    return even_split(num_heads, world_size)


def padded_token_split(num_tokens: int, world_size: int) -> tuple[tuple[int, ...], int]:
    """Pad the token count up to a multiple of world_size and split it evenly.

    Returns (token_counts, num_padding). Padding tokens sit at the end of the sequence (on the last
    ranks) and must be masked as attention keys wherever they are seen.
    """
    pad = (-num_tokens) % world_size
    per_rank = (num_tokens + pad) // world_size
    return tuple([per_rank] * world_size), pad
