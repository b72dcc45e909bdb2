"""The contract every head-exchange backend satisfies (the CUDA-IPC kernel and the torch.distributed fallback).

Shapes follow NOTE [partition] in partition.py: `token_counts[r]` tokens and `head_counts[r]` heads per
rank, contiguous and in rank order. All calls are collective over the backend's group: every rank calls
the same method with the same `token_counts` / `head_counts`, in the same order. Inputs are never
modified; outputs are new tensors on the input's device and dtype.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import torch


@runtime_checkable
class HeadExchange(Protocol):
    """Moves attention heads and tokens between the ranks of one sequence-parallel group."""

    name: str  # "ipc-kernel" or "torch.distributed"
    rank: int
    world_size: int

    def send_recv_heads(
        self, x: torch.Tensor, token_counts: Sequence[int], head_counts: Sequence[int]
    ) -> torch.Tensor:
        """[B, T_rank, H, D] (this rank's tokens, all heads) -> [B, T_total, H_rank, D] (all tokens, own heads)."""
        ...

    def gather_heads(
        self, y: torch.Tensor, token_counts: Sequence[int], head_counts: Sequence[int]
    ) -> torch.Tensor:
        """The inverse of send_recv_heads: [B, T_total, H_rank, D] -> [B, T_rank, H, D]."""
        ...

    def all_gather_tokens(self, x: torch.Tensor, token_counts: Sequence[int]) -> torch.Tensor:
        """[B, T_rank, C] -> [B, T_total, C], tokens in rank order."""
        ...

    def all_gather_heads(self, x: torch.Tensor, head_counts: Sequence[int]) -> torch.Tensor:
        """[B, T, H_rank, D] -> [B, T, H, D], heads in rank order (every rank holds the same T tokens)."""
        ...
