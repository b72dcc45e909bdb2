"""torch custom ops `ltx2_mgpu::*` over the IPC exchange, with fake implementations for torch.compile.

Each op names its exchange by an integer id (see `register`), so the graph holds only tensors, ints and
int lists and Dynamo traces through without a graph break. The real implementation looks the exchange
up and runs it; the fake one only computes the output shape from the partition (NOTE [partition]).
Importing this module needs no GPU and no compiled extension.
"""

from __future__ import annotations

import itertools
import weakref
from typing import Protocol

import torch

__all__ = ["all_gather_heads", "all_gather_tokens", "gather_heads", "lookup", "register", "send_recv_heads"]


class _Runner(Protocol):
    def run_op(self, op: str, x: torch.Tensor, *counts: list[int]) -> torch.Tensor: ...


# Weak values: an exchange that nobody holds is collected (and its buffers freed), registry or not.
_EXCHANGES: weakref.WeakValueDictionary[int, _Runner] = weakref.WeakValueDictionary()
_NEXT_ID = itertools.count(1)


def register(exchange: _Runner) -> int:
    """Give `exchange` an id the ops can carry; the registry does not keep it alive."""
    exchange_id = next(_NEXT_ID)
    _EXCHANGES[exchange_id] = exchange
    return exchange_id


def lookup(exchange_id: int) -> _Runner:
    exchange = _EXCHANGES.get(exchange_id)
    if exchange is None:
        raise RuntimeError(f"ltx2_mgpu IPC exchange #{exchange_id} is closed or was garbage-collected")
    return exchange


@torch.library.custom_op("ltx2_mgpu::send_recv_heads", mutates_args=(), device_types="cuda")
def send_recv_heads(
    x: torch.Tensor, exchange_id: int, rank: int, token_counts: list[int], head_counts: list[int]
) -> torch.Tensor:
    return lookup(exchange_id).run_op("send_recv_heads", x, token_counts, head_counts)


@send_recv_heads.register_fake
def _(
    x: torch.Tensor, exchange_id: int, rank: int, token_counts: list[int], head_counts: list[int]
) -> torch.Tensor:
    return x.new_empty((x.shape[0], sum(token_counts), head_counts[rank], x.shape[3]))


@torch.library.custom_op("ltx2_mgpu::gather_heads", mutates_args=(), device_types="cuda")
def gather_heads(
    y: torch.Tensor, exchange_id: int, rank: int, token_counts: list[int], head_counts: list[int]
) -> torch.Tensor:
    return lookup(exchange_id).run_op("gather_heads", y, token_counts, head_counts)


@gather_heads.register_fake
def _(
    y: torch.Tensor, exchange_id: int, rank: int, token_counts: list[int], head_counts: list[int]
) -> torch.Tensor:
    return y.new_empty((y.shape[0], token_counts[rank], sum(head_counts), y.shape[3]))


@torch.library.custom_op("ltx2_mgpu::all_gather_tokens", mutates_args=(), device_types="cuda")
def all_gather_tokens(x: torch.Tensor, exchange_id: int, rank: int, token_counts: list[int]) -> torch.Tensor:
    return lookup(exchange_id).run_op("all_gather_tokens", x, token_counts)


@all_gather_tokens.register_fake
def _(x: torch.Tensor, exchange_id: int, rank: int, token_counts: list[int]) -> torch.Tensor:
    return x.new_empty((x.shape[0], sum(token_counts), x.shape[2]))


@torch.library.custom_op("ltx2_mgpu::all_gather_heads", mutates_args=(), device_types="cuda")
def all_gather_heads(x: torch.Tensor, exchange_id: int, rank: int, head_counts: list[int]) -> torch.Tensor:
    return lookup(exchange_id).run_op("all_gather_heads", x, head_counts)


@all_gather_heads.register_fake
def _(x: torch.Tensor, exchange_id: int, rank: int, head_counts: list[int]) -> torch.Tensor:
    return x.new_empty((x.shape[0], x.shape[1], sum(head_counts), x.shape[3]))
