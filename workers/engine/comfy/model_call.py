"""The ranks' side of native sampling's model calls (NOTE [model call] in workers/wire/model_call.py):
ComfyUI's diffusion model of this rank, called with the arguments the UI process's sampler gave its
weightless stand-in, under sequence parallelism. Import only after bootstrap.import_comfyui.
"""

from __future__ import annotations

from typing import Any

import comfy.patcher_extension
import torch

from ...wire import model_call as wire
from .call_graphs import attach_call_graphs
from .sequence_parallel import SequenceParallel

# Conditioning caches kept at once (one per UI model token): two MODEL outputs in one graph (stage 1
# and stage 2) alternate without resending. Each holds at most the UI side's CACHE_ENTRIES tensors
# (a batched 19B context is 31 MB in bf16).
CACHES_KEPT = 2


class ConditioningCache:
    """Tensors the UI sent once, on this rank's device, by (token, id). Every rank holds the same."""

    def __init__(self) -> None:
        self._by_token: dict[str, dict[int, torch.Tensor]] = {}

    def for_token(self, token: str, drop: list[int]) -> dict[int, torch.Tensor]:
        cache = self._by_token.pop(token, None)
        if cache is None:
            cache = {}
            while len(self._by_token) >= CACHES_KEPT:
                self._by_token.pop(next(iter(self._by_token)))
        self._by_token[token] = cache  # most recently used last
        for key in drop:
            cache.pop(int(key), None)
        return cache


def decode_call(call: Any, cache: dict[int, torch.Tensor], device: torch.device) -> Any:
    """The wire form back into ComfyUI's values on `device`; stores new tensors in `cache`.
    ValueError starting with wire.CACHE_MISS for an id this rank does not hold."""

    def tensor(value: dict) -> torch.Tensor:
        if wire.TAG_INLINE in value:
            return wire.inline_to_tensor(value).to(device)
        if wire.TAG_STORE in value:
            stored = value["value"].to(device=device, copy=True)  # not the segment: it is unlinked
            cache[int(value[wire.TAG_STORE])] = stored
            return stored
        found = cache.get(int(value[wire.TAG_CACHED]))
        if found is None:
            raise ValueError(f"{wire.CACHE_MISS} conditioning {value[wire.TAG_CACHED]} is not held here")
        return found

    return wire.decode(call, tensor)


class ModelCallServer:
    """One rank's SP-patched clone of a patcher of its ComfyUI model (the loader's LoRAs and the MODEL's
    weight patches applied); rebuilt when that patcher changes.

    `forward` is collective (every rank calls it with the same arguments); it returns the full output
    streams, identical on every rank.
    """

    def __init__(self, patcher: Any, exchange: Any) -> None:
        self.source = patcher
        self.parallel = SequenceParallel.for_model(
            exchange, patcher.model.diffusion_model
        )  # ValueError: heads
        self.patcher = self.parallel.patch(patcher)
        self.graphs = attach_call_graphs(self.patcher, exchange)  # NOTE [call graphs]

    def serves(self, patcher: Any) -> bool:
        return self.source is patcher

    def forward(self, streams: list[torch.Tensor], call: dict) -> list[torch.Tensor]:
        # What _calc_cond_batch does with the patcher's own options: merged over the call's.
        options = comfy.patcher_extension.merge_nested_dicts(
            call["options"], self.patcher.model_options.get("transformer_options", {}), copy_dict1=False
        )
        # In the rank model's own dtype, as model_base's _apply_model casts (the UI process may have
        # cast to another: ComfyUI on a CPU or a GPU without bf16 takes float32 for a bf16 model).
        dtype = self.patcher.model.get_dtype_inference()
        streams = [s.to(dtype) if s.is_floating_point() else s for s in streams]
        call = {
            **call,
            "context": _as_dtype(call["context"], dtype),
            "kwargs": _as_dtype(call["kwargs"], dtype),
        }
        x = streams if len(streams) > 1 else streams[0]

        def run() -> Any:
            return self.patcher.model.diffusion_model(
                x, call["timestep"], context=call["context"], control=None, transformer_options=options,
                **call["kwargs"],
            )  # fmt: skip

        with torch.inference_mode():
            # Through the graphs' wrapper: the call's options do not carry the patcher's wrappers, and a
            # forward whose capture fails (a kernel that cannot be captured) must run again, eagerly.
            out = run() if self.graphs is None else self.graphs.wrapper(run)
        return [out] if torch.is_tensor(out) else list(out)


def _as_dtype(value: Any, dtype: torch.dtype) -> Any:
    """Floating tensors of `value` (a tensor, or dicts / lists of them) in `dtype`, as _apply_model
    casts the context and the extra conditioning (integer tensors stay as they are)."""
    if torch.is_tensor(value):
        return value.to(dtype) if value.is_floating_point() and value.dtype != dtype else value
    if isinstance(value, dict):
        return {key: _as_dtype(item, dtype) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_as_dtype(item, dtype) for item in value)
    return value


def text_embeds(patcher: Any, context: torch.Tensor, unprocessed: bool, device: torch.device) -> torch.Tensor:
    """LTXAVModel.preprocess_text_embeds on this rank's live `patcher` (LoRAs applied), as extra_conds
    calls it."""
    base = patcher.model
    with torch.inference_mode():
        return base.diffusion_model.preprocess_text_embeds(
            context.to(device=device, dtype=base.get_dtype_inference()), unprocessed=unprocessed
        )


def batch_share(call: dict, batch: int, chunks: int, index: int, groups: int) -> tuple[dict, slice] | None:
    """Guidance group `index` of `groups`'s share of a batched model call: ComfyUI batched `chunks`
    conditionings (transformer_options["cond_or_uncond"]: cond, uncond...) of batch / chunks items
    each into one call; each group takes chunks / groups of them. Every tensor whose first dimension
    is the call's batch is cut to the share, as are the per-chunk lists of transformer_options
    ("cond_or_uncond", "uuids"); the rest is shared by the whole batch (ComfyUI's CONDConstant).
    None when the chunks do not split evenly (the call then runs whole on every rank)."""
    if groups < 2 or chunks % groups or batch % chunks:
        return None
    per_group = chunks // groups
    items = slice(index * per_group * batch // chunks, (index + 1) * per_group * batch // chunks)
    mine = slice(index * per_group, (index + 1) * per_group)

    def cut(value: Any) -> Any:
        if isinstance(value, torch.Size):  # a latent shape: its batch is the call's
            return (
                torch.Size([items.stop - items.start, *value[1:]]) if value and value[0] == batch else value
            )
        if torch.is_tensor(value):
            return value[items] if value.dim() >= 1 and value.shape[0] == batch else value
        if isinstance(value, dict):
            return {key: cut(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(cut(item) for item in value)
        return value

    out = {key: cut(value) for key, value in call.items() if key != "options"}
    options = dict(call["options"])
    for key in ("cond_or_uncond", "uuids"):
        if isinstance(options.get(key), list) and len(options[key]) == chunks:
            options[key] = options[key][mine]
    out["options"] = options
    return out, items
