"""The attentions that see every video token under sequence parallelism, for either backend.

Each rank holds a contiguous share of the video tokens (NOTE [partition] in kernels/partition.py).
  - video self-attention: q, k, v go tokens->heads (send_recv_heads), attention runs over all tokens
    for this rank's heads, the output goes heads->tokens (gather_heads);
  - video->audio attention: the audio queries (replicated) are sliced to this rank's heads, the video
    keys/values go tokens->heads, and the outputs are all-gathered over heads, so every rank holds the
    identical audio stream.
The attention itself is the backend's: `inner(q, k, v, heads, mask)` with q/k/v [B, T, heads * D]
returns [B, T, heads * D]. ltx-core installs these objects as its modules' attention function; the
comfy backend calls `run` from ComfyUI's optimized_attention_override with ComfyUI's own function.
No engine import here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ...kernels import HeadExchange, head_split, offsets

# inner(q, k, v, heads, mask) -> out, all [B, T, heads * D]
AttentionFn = Callable[..., torch.Tensor]


@dataclass(frozen=True)
class SequenceSplit:
    """This forward's token partition (set per call; identical on every rank)."""

    token_counts: tuple[int, ...]

    @property
    def total(self) -> int:
        return sum(self.token_counts)


class SplitState:
    """Mutable holder shared by the attention objects of one model: the split of the running forward."""

    def __init__(self) -> None:
        self.split: SequenceSplit | None = None

    def current(self) -> SequenceSplit:
        if self.split is None:
            raise RuntimeError("sequence-parallel attention called outside a sequence-parallel forward")
        return self.split


class SplitAttention:
    """One attention under SP whose keys and values are this rank's video tokens; its queries are
    either this rank's video tokens too (video self-attention) or the replicated audio tokens
    (video->audio attention, `replicated_queries`). Build it with `video_self` or `video_to_audio`.

    Keys and values (and local queries) go tokens->heads in one exchange; attention runs over all
    video tokens for this rank's heads; the output goes back heads->tokens (local queries) or is
    all-gathered over heads (replicated queries), so every rank holds the identical audio stream.
    """

    def __init__(
        self,
        inner: AttentionFn | None,
        exchange: HeadExchange,
        state: SplitState,
        num_heads: int,
        *,
        replicated_queries: bool,
    ) -> None:
        self.inner = inner
        self.exchange = exchange
        self.state = state
        self.replicated_queries = replicated_queries
        self.head_counts = head_split(num_heads, exchange.world_size)
        self.head_offsets = offsets(self.head_counts)

    @classmethod
    def video_self(
        cls, inner: AttentionFn | None, exchange: HeadExchange, state: SplitState, num_heads: int
    ) -> SplitAttention:
        return cls(inner, exchange, state, num_heads, replicated_queries=False)

    @classmethod
    def video_to_audio(
        cls, inner: AttentionFn | None, exchange: HeadExchange, state: SplitState, num_heads: int
    ) -> SplitAttention:
        return cls(inner, exchange, state, num_heads, replicated_queries=True)

    @property
    def name(self) -> str:
        return "video->audio attention" if self.replicated_queries else "video self-attention"

    def __call__(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, heads: int, mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        return self.run(self.inner, q, k, v, heads, mask)

    def run(
        self,
        inner: AttentionFn,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        heads: int,
        mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """k, v: this rank's video tokens [B, T_local, heads * D]; q: the same tokens, or all audio
        tokens [B, T_audio, heads * D] (replicated) -> the attention output for q's tokens."""
        if mask is not None:
            raise NotImplementedError(f"a {self.name} mask is not supported under sequence parallelism")
        split = self.state.current()
        b, t_q, width = q.shape
        d = width // heads
        rank = self.exchange.rank
        h_local = self.head_counts[rank]
        # One exchange for everything that is split by tokens: 3x (or 2x) fewer collectives.
        split_by_tokens = (k, v) if self.replicated_queries else (q, k, v)
        n = len(split_by_tokens)
        moved = torch.stack(split_by_tokens).view(n * b, k.shape[1], heads, d)
        moved = self.exchange.send_recv_heads(moved, split.token_counts, self.head_counts)
        *q_moved, k_h, v_h = moved.view(n, b, split.total, h_local * d).unbind(0)
        if self.replicated_queries:
            start = self.head_offsets[rank]
            q_h = q.view(b, t_q, heads, d)[:, :, start : start + h_local].reshape(b, t_q, h_local * d)
        else:
            (q_h,) = q_moved
        out = inner(q_h, k_h, v_h, h_local, None)  # [B, T_q or T_total, H_local * D]
        if self.replicated_queries:
            out = self.exchange.all_gather_heads(out.reshape(b, t_q, h_local, d), self.head_counts)
        else:
            out = self.exchange.gather_heads(
                out.reshape(b, split.total, h_local, d), split.token_counts, self.head_counts
            )
        return out.reshape(b, t_q, heads * d)
