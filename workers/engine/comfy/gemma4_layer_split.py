"""Gemma 4's layers spread over the worker group inside ComfyUI's own layer loop.

Every rank runs ComfyUI's whole encode (tokenizer, Gemma4Transformer.forward, the LTX projection)
on the same prompt, so the mask and rope every layer takes are the same everywhere. Rank r holds
the weights of its block [start, stop) of `model.layers` only; every other entry of the list is a
LayerRelay, a module without weights that takes a layer's place in the loop and moves hidden
states between ranks. This works for Gemma 4 12B because no layer takes anything but x from the
layers before it (no KV sharing, no per-layer inputs), which `check_splittable` verifies.

NOTE relay plan (send/recv on the default group, in this order, so no rank waits on a rank that
waits on it):
- rank 0 runs the loop as one process would. A relay for a layer of rank o > 0 receives that
  layer's output from o; the relay for o's first layer first sends o its input (rank 0 holds it:
  its own output, or what it has just received from rank o - 1). So rank 0's intermediates and
  final x, hence the CONDITIONING, are bit for bit a single process's.
- rank o > 0: the relay for the layer just before its block receives the block's input from rank 0;
  each held layer sends its output to rank 0 (a forward hook). Its other relays pass x through;
  what it computes after its block is thrown away (only rank 0 writes the output slot), so it
  holds no embedding, image/audio embedders or LTX projection (stand-ins keep the calls working).
Rank 0 talks to the ranks one after the other in block order; rank o's messages come in the order
rank 0 expects them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

# Gemma 4's image and audio embedders (text prompts never use them), dropped on ranks > 0.
MEDIA_EMBEDDERS = ("vision_model", "multi_modal_projector", "audio_model", "audio_projector")


@dataclass(frozen=True)
class LayerSplit:
    """This rank's view of the split: blocks[r] = [start, stop) layers of rank r, contiguous and in
    rank order from layer 0; rank 0 also runs everything around the layers (embedding, norm,
    projection) that makes the result."""

    rank: int
    blocks: tuple[tuple[int, int], ...]

    @property
    def held(self) -> tuple[int, int]:
        return self.blocks[self.rank]

    def owner(self, layer: int) -> int:
        return next(r for r, (start, stop) in enumerate(self.blocks) if start <= layer < stop)

    def relay(self, layer: int, x: torch.Tensor) -> torch.Tensor:
        """What the relay standing in for `layer` hands the loop (see the NOTE above)."""
        if self.rank == 0:
            owner = self.owner(layer)
            if layer == self.blocks[owner][0]:
                send_tensor(x, owner)
            return recv_like(x, owner)
        if layer == self.held[0] - 1:
            return recv_like(x, 0)
        return x


class LayerRelay(torch.nn.Module):
    """Stands in for a layer this rank does not hold; called as TransformerBlockGemma4 is."""

    def __init__(self, split: LayerSplit, index: int) -> None:
        super().__init__()
        self.split, self.index = split, index

    def forward(
        self,
        x: torch.Tensor,
        attention_mask: Any = None,
        freqs_cis: Any = None,
        past_key_value: Any = None,
        per_layer_input: Any = None,
        shared_kv: Any = None,
    ) -> tuple[torch.Tensor, None, None]:
        return self.split.relay(self.index, x), None, None


def check_splittable(config: Any) -> None:
    """The split hands each layer x only: refuse configs whose layers take more (Gemma 4 E2B/E4B)."""
    if config.num_kv_shared_layers or config.hidden_size_per_layer_input:
        raise ValueError(
            "this Gemma 4 shares KV between layers or has per-layer inputs; its layers cannot be split "
            "over ranks (LTX-2.5's Gemma 4 12B has neither)"
        )


def install_split(gemma: torch.nn.Module, split: LayerSplit) -> None:
    """Trim ComfyUI's Gemma 4 model `gemma` (its `.model` the transformer), freshly built and not yet
    loaded, to what this rank runs: relays for the layers it does not hold; on ranks > 0, each held
    layer also sends its output to rank 0, and the parts only rank 0's result needs go (the
    embedding becomes ShapeOnlyEmbedding, the image and audio embedders are dropped)."""
    transformer = gemma.model
    check_splittable(transformer.config)
    start, stop = split.held
    for i in range(len(transformer.layers)):
        if start <= i < stop:
            if split.rank > 0:
                transformer.layers[i].register_forward_hook(_send_output_to_rank0)
            continue
        relay = LayerRelay(split, i)
        transformer.layers[i] = relay
        transformer._prefetch_units[i] = relay  # ComfyUI's prefetch list holds the layers too
    if split.rank > 0:
        transformer.embed_tokens = ShapeOnlyEmbedding(transformer.config.hidden_size)
        for name in MEDIA_EMBEDDERS:
            if hasattr(gemma, name):
                delattr(gemma, name)


class ShapeOnlyEmbedding(torch.nn.Module):
    """The token embedding on ranks > 0: zeros of the embedding's shape. What the layers before a
    rank's block see is never used there (the relay before the block replaces it)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.width = width
        # SDClipModel reads embed_tokens.weight.device when no execution device is set.
        self.register_buffer("weight", torch.empty(0), persistent=False)

    def forward(self, input_ids: torch.Tensor, out_dtype: torch.dtype | None = None) -> torch.Tensor:
        dtype = out_dtype or torch.float32
        return torch.zeros(*input_ids.shape, self.width, dtype=dtype, device=input_ids.device)


def held_layers(transformer: torch.nn.Module) -> list[int]:
    """Indices of the layers that hold weights on this rank (for the reply and the tests)."""
    return [i for i, layer in enumerate(transformer.layers) if not isinstance(layer, LayerRelay)]


def weight_bytes(model: torch.nn.Module) -> dict[str, int]:
    """Bytes of `model`'s parameters in Gemma's layers and elsewhere (for the reply and the tests)."""
    sizes = {"layers": 0, "other": 0}
    for name, param in model.named_parameters():
        sizes["layers" if ".layers." in name else "other"] += param.numel() * param.element_size()
    return sizes


def _send_output_to_rank0(module: torch.nn.Module, args: Any, output: tuple) -> None:
    send_tensor(output[0], 0)


def send_tensor(tensor: torch.Tensor, dst: int) -> None:
    if tensor.is_cuda and dist.get_backend() == "gloo":  # gloo moves host memory (ranks sharing a GPU)
        tensor = tensor.cpu()
    dist.send(tensor.contiguous(), dst)


def recv_like(like: torch.Tensor, src: int) -> torch.Tensor:
    """A tensor of `like`'s shape, dtype and device, received from `src`."""
    staged = like.is_cuda and dist.get_backend() == "gloo"
    buffer = torch.empty(like.shape, dtype=like.dtype, device="cpu" if staged else like.device)
    dist.recv(buffer, src)
    return buffer.to(like.device)
