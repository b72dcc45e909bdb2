"""The two attentions that see every video token under sequence parallelism, for either backend.

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


class VideoSelfAttention:
    """Video self-attention under SP: tokens->heads, attention over all tokens on local heads, heads->tokens."""

    def __init__(
        self, inner: AttentionFn | None, exchange: HeadExchange, state: SplitState, num_heads: int
    ) -> None:
        self.inner = inner
        self.exchange = exchange
        self.state = state
        self.head_counts = head_split(num_heads, exchange.world_size)

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
        """q, k, v: this rank's tokens [B, T_local, heads * D] -> the attention output for them."""
        if mask is not None:
            raise NotImplementedError(
                "a video self-attention mask is not supported under sequence parallelism"
            )
        split = self.state.current()
        b, t_local, width = q.shape
        d = width // heads
        # One exchange for q, k and v together: 3x fewer collectives.
        qkv = torch.stack((q, k, v)).view(3 * b, t_local, heads, d)
        qkv = self.exchange.send_recv_heads(qkv, split.token_counts, self.head_counts)
        h_local = self.head_counts[self.exchange.rank]
        q_h, k_h, v_h = qkv.view(3, b, split.total, h_local * d).unbind(0)
        out = inner(q_h, k_h, v_h, h_local, None)  # [B, T_total, H_local * D]
        out = self.exchange.gather_heads(
            out.reshape(b, split.total, h_local, d), split.token_counts, self.head_counts
        )
        return out.reshape(b, t_local, heads * d)


class VideoToAudioAttention:
    """Video->audio attention under SP: replicated audio queries, video keys/values spread over ranks."""

    def __init__(
        self, inner: AttentionFn | None, exchange: HeadExchange, state: SplitState, num_heads: int
    ) -> None:
        self.inner = inner
        self.exchange = exchange
        self.state = state
        self.head_counts = head_split(num_heads, exchange.world_size)
        self.head_offsets = offsets(self.head_counts)

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
        """q: all audio tokens [B, T_audio, heads * D]; k, v: this rank's video tokens -> [B, T_audio, heads * D]."""
        if mask is not None:
            raise NotImplementedError(
                "a video->audio attention mask is not supported under sequence parallelism"
            )
        split = self.state.current()
        b, t_audio, width = q.shape
        d = width // heads
        t_local = k.shape[1]
        rank = self.exchange.rank
        h_local, h_start = self.head_counts[rank], self.head_offsets[rank]
        kv = torch.stack((k, v)).view(2 * b, t_local, heads, d)
        kv = self.exchange.send_recv_heads(kv, split.token_counts, self.head_counts)
        k_h, v_h = kv.view(2, b, split.total, h_local * d).unbind(0)
        q_h = q.view(b, t_audio, heads, d)[:, :, h_start : h_start + h_local].reshape(b, t_audio, h_local * d)
        out = inner(q_h, k_h, v_h, h_local, None)
        out = self.exchange.all_gather_heads(out.reshape(b, t_audio, h_local, d), self.head_counts)
        return out.reshape(b, t_audio, heads * d)
