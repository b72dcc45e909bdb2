"""NOTE [layers]: the loader's `weights layers`: each rank holds a contiguous range of the transformer blocks.

Rank r of N keeps blocks [start_r, stop_r) (contiguous, in rank order, split to balance the blocks' bytes:
an fp8 scaled file keeps some blocks in bf16; wire/layer_ranges.py NOTE [layer ranges], the same ranges the
loader's pre-flight plans with) and everything outside the blocks (embeddings, connectors, output stage: a
few percent of the model). Every rank runs ComfyUI's forward in lockstep on the whole
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
must run every forward: requested_groups gives 1); the TDP Upscaler runs every tile on every rank, one
after another (tdp_job.py), rather than dealing tiles to ranks. Collective per forward. Import only after
bootstrap.import_comfyui.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from ...wire.layer_ranges import balanced_ranges
from ...wire.memory_plan import model_sizes
from ...wire.model_files import read_safetensors_header

log = logging.getLogger(__name__)

# Attribute on the patcher's BaseModel: (start, stop) of the blocks this rank holds under weights layers.
LAYERS_ATTR = "ltx2_mgpu_layer_range"


def file_block_bytes(path: str | Path, weight_dtype: str) -> tuple[int, ...]:
    """Each transformer block's bytes in `path` at the loader's `weight_dtype`, from its header (safetensors
    or GGUF): what the pre-flight balanced the ranges with (memory_plan.model_sizes)."""
    header = read_safetensors_header(path)
    return model_sizes(header.shapes, header.dtypes, weight_dtype).per_block_bytes


def held_block_bytes(blocks: Sequence[torch.nn.Module]) -> tuple[int, ...]:
    """Each block's bytes as loaded (its parameters at their stored size: a quantized weight's data and
    scales), as residency counts them."""
    from .quantized_shards import stored_bytes

    return tuple(sum(stored_bytes(p) for p in block.parameters()) for block in blocks)


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


def place_layers(patcher: Any, rank: int, world_size: int, block_bytes: Sequence[int] | None = None) -> range:
    """NOTE [layers]: keep this rank's range of `patcher`'s transformer blocks (the others become
    HandOver stand-ins, their weights dropped) before the model is made resident. Returns the range.
    The ranges balance `block_bytes` (each block's bytes from the file's header, file_block_bytes: what
    the pre-flight planned with); None (a model not read from a file), or a count other than the model's
    blocks, balances the blocks' bytes as loaded. Every rank is given the same bytes, so the ranges agree.
    ValueError when there are fewer blocks than ranks."""
    blocks = patcher.model.diffusion_model.transformer_blocks
    if block_bytes is not None and len(block_bytes) != len(blocks):
        log.warning(
            "weights layers: the file's header lists %d transformer blocks, the model has %d; the ranges "
            "balance the blocks' bytes as loaded (the pre-flight's figures may differ)",
            len(block_bytes),
            len(blocks),
        )
        block_bytes = None
    ranges = balanced_ranges(held_block_bytes(blocks) if block_bytes is None else block_bytes, world_size)
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
