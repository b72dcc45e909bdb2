"""HeadExchange over torch.distributed collectives: the reference the IPC kernel is tested against.

Works on NCCL and on gloo (CPU workers in CI; several ranks sharing one GPU). gloo has no uneven list
all_to_all, so every exchange is one `all_to_all_single` over flattened pieces with explicit split sizes.
CUDA tensors on a gloo group are staged through host memory.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.distributed as dist

from .partition import offsets


class TorchDistHeadExchange:
    """HeadExchange (see protocol.py) built on torch.distributed. Collective over `group`."""

    name = "torch.distributed"

    def __init__(self, group: dist.ProcessGroup | None = None) -> None:
        self.group = group
        self.rank = dist.get_rank(group)
        self.world_size = dist.get_world_size(group)
        self._stage_on_host = dist.get_backend(group) == "gloo"

    def _exchange(
        self, pieces: list[torch.Tensor], recv_numel: list[int], like: torch.Tensor
    ) -> torch.Tensor:
        """Send pieces[j] to rank j; return the flat concatenation of what each rank sent here."""
        send = torch.cat([p.reshape(-1) for p in pieces])
        device = torch.device("cpu") if self._stage_on_host else like.device
        send = send.to(device)
        recv = torch.empty(sum(recv_numel), dtype=like.dtype, device=device)
        dist.all_to_all_single(
            recv,
            send,
            output_split_sizes=recv_numel,
            input_split_sizes=[p.numel() for p in pieces],
            group=self.group,
        )
        return recv.to(like.device)

    def send_recv_heads(
        self, x: torch.Tensor, token_counts: Sequence[int], head_counts: Sequence[int]
    ) -> torch.Tensor:
        b, t_rank, h, d = x.shape
        _check(
            t_rank == token_counts[self.rank],
            f"input holds {t_rank} tokens, partition says {token_counts[self.rank]}",
        )
        _check(h == sum(head_counts), f"input holds {h} heads, partition says {sum(head_counts)}")
        h_off = offsets(head_counts)
        pieces = [x[:, :, h_off[j] : h_off[j] + head_counts[j]] for j in range(self.world_size)]
        h_mine = head_counts[self.rank]
        recv = self._exchange(pieces, [b * t * h_mine * d for t in token_counts], x)
        chunks = recv.split([b * t * h_mine * d for t in token_counts])
        return torch.cat([c.view(b, t, h_mine, d) for c, t in zip(chunks, token_counts)], dim=1)

    def gather_heads(
        self, y: torch.Tensor, token_counts: Sequence[int], head_counts: Sequence[int]
    ) -> torch.Tensor:
        b, t_total, h_mine, d = y.shape
        _check(
            t_total == sum(token_counts), f"input holds {t_total} tokens, partition says {sum(token_counts)}"
        )
        _check(
            h_mine == head_counts[self.rank],
            f"input holds {h_mine} heads, partition says {head_counts[self.rank]}",
        )
        t_off = offsets(token_counts)
        pieces = [y[:, t_off[j] : t_off[j] + token_counts[j]] for j in range(self.world_size)]
        t_mine = token_counts[self.rank]
        sizes = [b * t_mine * h * d for h in head_counts]
        recv = self._exchange(pieces, sizes, y)
        chunks = recv.split(sizes)
        return torch.cat([c.view(b, t_mine, h, d) for c, h in zip(chunks, head_counts)], dim=2)

    def all_gather_tokens(self, x: torch.Tensor, token_counts: Sequence[int]) -> torch.Tensor:
        b, t_rank, c = x.shape
        _check(
            t_rank == token_counts[self.rank],
            f"input holds {t_rank} tokens, partition says {token_counts[self.rank]}",
        )
        sizes = [b * t * c for t in token_counts]
        recv = self._exchange([x] * self.world_size, sizes, x)
        chunks = recv.split(sizes)
        return torch.cat([ch.view(b, t, c) for ch, t in zip(chunks, token_counts)], dim=1)

    def all_gather_heads(self, x: torch.Tensor, head_counts: Sequence[int]) -> torch.Tensor:
        b, t, h_mine, d = x.shape
        _check(
            h_mine == head_counts[self.rank],
            f"input holds {h_mine} heads, partition says {head_counts[self.rank]}",
        )
        sizes = [b * t * h * d for h in head_counts]
        recv = self._exchange([x] * self.world_size, sizes, x)
        chunks = recv.split(sizes)
        return torch.cat([ch.view(b, t, h, d) for ch, h in zip(chunks, head_counts)], dim=2)


def _check(ok: bool, message: str) -> None:
    # Internal invariant: callers derive shapes from the same partition on every rank.
    if not ok:
        raise RuntimeError(f"head exchange called with inconsistent shapes: {message}")
