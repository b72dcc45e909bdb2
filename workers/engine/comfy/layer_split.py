"""NOTE [layers]: the loader's `weights layers`: each rank holds a contiguous range of the transformer blocks.

Rank r of N keeps blocks [start_r, stop_r) (split_blocks: contiguous, in rank order, counts differing by at
most one; LTX's blocks are all the same size) and everything outside the blocks (embeddings, connectors,
output stage: a few percent of the model). Every rank runs ComfyUI's forward in lockstep on the whole
input, as one GPU would: a block this rank does not hold is a `HandOver` stand-in without weights that
passes its input on, and at the last block of each range the range's owner broadcasts the video and audio
hidden states to every rank (torch.distributed broadcast on the default group: NCCL between GPUs, gloo on
CPU workers or workers sharing a GPU; no peer access needed). So activations hand over once per range, N
times a forward; after the last range every rank holds the blocks' output and runs the output stage
itself, so each returns the full result, as under SP. Ranks not holding the running range wait in the
broadcast: a step takes one GPU's time plus N hand-overs (no overlap between ranges; memory, not speed).

The hidden states keep their shapes through a block, so a waiting rank receives into buffers shaped as its
own input. The blocks are removed before the model is made resident (ComfyModel.load's `place`), so a
GPU only ever holds its range: any weight format ComfyUI or the ComfyUI-GGUF pack loads (bf16, fp8, int8,
nvfp4, GGUF), LoRAs on the blocks a rank holds applied as ComfyUI applies them.

Combined with the group's other parallelism: sequence parallelism is off (every rank runs all tokens of
its blocks: the exchange the model uses is SoloExchange) and guidance groups are not formed (every rank
must run every forward: requested_groups gives 1); the TDP Upscaler, which deals tiles to ranks, is
refused. Collective per forward. Import only after bootstrap.import_comfyui.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist

# Attribute on the patcher's BaseModel: (start, stop) of the blocks this rank holds under weights layers.
LAYERS_ATTR = "ltx2_mgpu_layer_range"


def split_blocks(num_blocks: int, world_size: int) -> list[range]:
    """Contiguous ranges of `num_blocks` blocks in rank order, sizes differing by at most one (the first
    ranks take the extra ones). ValueError when there are fewer blocks than ranks."""
    if num_blocks < world_size:
        raise ValueError(
            f"weights layers gives each of the {world_size} workers at least one of the model's {num_blocks} "
            f"transformer blocks; use at most {num_blocks} GPUs, or another weights option"
        )
    base, extra = divmod(num_blocks, world_size)
    ranges, start = [], 0
    for rank in range(world_size):
        stop = start + base + (1 if rank < extra else 0)
        ranges.append(range(start, stop))
        start = stop
    return ranges


class SoloExchange:
    """A head exchange over this rank alone (kernels/protocol.py HeadExchange with world_size 1): the
    model's forwards are never token-split (SequenceParallel on one rank runs ComfyUI's forward)."""

    name = "none (weights layers)"
    rank = 0
    world_size = 1

    def send_recv_heads(
        self, x: torch.Tensor, token_counts: Sequence[int], head_counts: Sequence[int]
    ) -> torch.Tensor:
        return x

    def gather_heads(
        self, y: torch.Tensor, token_counts: Sequence[int], head_counts: Sequence[int]
    ) -> torch.Tensor:
        return y

    def all_gather_tokens(self, x: torch.Tensor, token_counts: Sequence[int]) -> torch.Tensor:
        return x

    def all_gather_heads(self, x: torch.Tensor, head_counts: Sequence[int]) -> torch.Tensor:
        return x


def broadcast_hidden(hidden: tuple[torch.Tensor, ...], src: int) -> tuple[torch.Tensor, ...]:
    """Every rank gets rank `src`'s `hidden` (the others pass tensors of the same shapes). Collective.
    Over gloo a GPU tensor goes through host memory (gloo broadcasts host buffers)."""
    staged = dist.get_backend() == "gloo"
    out = []
    for tensor in hidden:
        buffer = tensor.detach().contiguous()
        if dist.get_rank() != src:
            buffer = torch.empty_like(buffer)
        moved = buffer.cpu() if staged and buffer.is_cuda else buffer
        dist.broadcast(moved, src=src)
        out.append(moved.to(tensor.device) if moved is not buffer else buffer)
    return tuple(out)


class HandOver(torch.nn.Module):
    """Stands for a block another rank holds: passes its input on; at the end of that rank's range
    (`owner` set) returns what the owner broadcasts. Holds no weights."""

    def __init__(self, index: int, owner: int | None) -> None:
        super().__init__()
        self.index = index
        self.owner = owner  # the range's owner when this is its last block, else None

    def forward(self, x: tuple[torch.Tensor, ...], *args: Any, **kwargs: Any) -> tuple[torch.Tensor, ...]:
        return x if self.owner is None else broadcast_hidden(tuple(x), self.owner)


def _broadcasting_forward(block: torch.nn.Module, rank: int) -> Any:
    """`block`'s own forward, its output then broadcast from this rank (the last block of its range).
    Set on the instance, so the block keeps its name and weights (LoRA keys, ComfyUI's accounting)."""
    forward = block.forward

    def run(*args: Any, **kwargs: Any) -> tuple[torch.Tensor, ...]:
        return broadcast_hidden(tuple(forward(*args, **kwargs)), rank)

    return run


def place_layers(patcher: Any, rank: int, world_size: int) -> range:
    """NOTE [layers]: keep this rank's range of `patcher`'s transformer blocks (the others become
    HandOver stand-ins, their weights dropped) before the model is made resident. Returns the range."""
    blocks = patcher.model.diffusion_model.transformer_blocks
    ranges = split_blocks(len(blocks), world_size)
    mine = ranges[rank]
    for owner, held in enumerate(ranges):
        for index in held:
            last = index == held.stop - 1
            if owner != rank:
                blocks[index] = HandOver(index, owner if last else None)
            elif last:
                blocks[index].forward = _broadcasting_forward(blocks[index], rank)
    setattr(patcher.model, LAYERS_ATTR, (mine.start, mine.stop))
    return mine


def layer_range(model: Any) -> tuple[int, int] | None:
    """(start, stop) of the blocks a ComfyUI BaseModel's rank holds under weights layers, else None."""
    return getattr(model, LAYERS_ATTR, None)
