"""Head exchange for sequence parallelism: the CUDA-IPC all2all kernel, or torch.distributed as fallback.

`make_head_exchange` is the one entry point the worker runtime uses; it is collective over the group.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from .fallback import TorchDistHeadExchange
from .partition import even_split, head_split, offsets, padded_token_split
from .protocol import HeadExchange

__all__ = [
    "HeadExchange",
    "TorchDistHeadExchange",
    "even_split",
    "head_split",
    "make_head_exchange",
    "offsets",
    "padded_token_split",
]


def make_head_exchange(group: dist.ProcessGroup | None, device: torch.device) -> HeadExchange:
    """Pick the backend for this group. Collective: every rank of `group` must call it."""
    return TorchDistHeadExchange(group)
