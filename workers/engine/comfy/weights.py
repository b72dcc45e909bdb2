"""Where a rank's transformer weights live on the comfy backend: the loader's `weights` option.

- replicated: the whole model resident on the rank's device (ComfyUI's full load).
- sharded: 1/N of every block per rank, gathered for the block's forward (NOTE [sharded]).
- offloaded: ComfyUI's own partial loading (comfy.model_patcher.ModelPatcher.load with a memory
  budget, what its lowvram mode does): the modules that fit `resident_bytes` stay on the device,
  every other comfy.ops layer keeps its weight on the offload device and casts it to the device per
  call (comfy_cast_weights), with LoRA patches applied at that cast (LowVramPatch). Same numbers as
  the full load: the cast moves the stored weight and the patch is ComfyUI's own calculate_weight.

NOTE [weight budget]: ComfyUI decides the budget by itself at every load_models_gpu from the free
memory it sees (and never on a CPU device, or under force_full_load), so the sampler's own load would
grow the resident part again, and a process capped by torch.cuda.set_per_process_memory_fraction is
not seen as capped. The budget therefore rides on the shared BaseModel (every clone of one patcher,
LoRA and SP clones included, shares it), and ModelPatcher.load is wrapped once per process to cap
every load of such a model at it. Models without the attribute load as ComfyUI decides.

Import only after bootstrap.import_comfyui.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ...wire.gpu_memory import allocatable_bytes
from ...wire.weight_placement import WEIGHTS_LAYERS, WEIGHTS_OFFLOADED, WEIGHTS_REPLICATED, WEIGHTS_SHARDED

# Attribute on the patcher's BaseModel (patcher.model): the bytes its weights may occupy on the device.
BUDGET_ATTR = "ltx2_mgpu_resident_bytes"
_wrapped = False


@dataclass(frozen=True)
class Residency:
    """What a load left on the device: `resident_bytes` ComfyUI counts as loaded, `streamed_modules`
    layers that cast their weights in per call (0 for a full load)."""

    weights: str
    resident_bytes: int
    streamed_modules: int
    block_bytes: int  # the transformer blocks' parameters this rank holds (its shards when sharded)
    layer_blocks: tuple[int, int] | None = None  # weights layers: (start, stop) of the blocks it holds

    def to_reply(self) -> dict:
        return {
            "weights": self.weights,
            "resident_bytes": self.resident_bytes,
            "streamed_modules": self.streamed_modules,
            "block_bytes": self.block_bytes,
            "layer_blocks": None if self.layer_blocks is None else list(self.layer_blocks),
        }


def set_budget(patcher: Any, resident_bytes: int | None) -> None:
    """Cap every later load of `patcher`'s model (and its clones') at `resident_bytes`; None: no cap."""
    install_budget_hook()
    if resident_bytes is None:
        if hasattr(patcher.model, BUDGET_ATTR):
            delattr(patcher.model, BUDGET_ATTR)
        return
    setattr(patcher.model, BUDGET_ATTR, max(0, int(resident_bytes)))


def budget_of(patcher: Any) -> int | None:
    return getattr(patcher.model, BUDGET_ATTR, None)


def make_resident(patcher: Any) -> None:
    """Load `patcher` on its device as its model's weights option says (full load without a budget).
    Every load our engine makes goes through here (model load, LoRA switch, node patches)."""
    import comfy.model_management as mm

    mm.load_models_gpu([patcher], force_full_load=budget_of(patcher) is None)


def residency(patcher: Any) -> Residency:
    """What is on the device now for `patcher`'s model (ComfyUI's own accounting)."""
    model = patcher.model
    streamed = sum(1 for m in model.diffusion_model.modules() if hasattr(m, "prev_comfy_cast_weights"))
    weights = WEIGHTS_REPLICATED if budget_of(patcher) is None else WEIGHTS_OFFLOADED
    if getattr(model, SHARDED_ATTR, 0):
        weights = WEIGHTS_SHARDED
    from .layer_split import layer_range
    from .quantized_shards import stored_bytes

    held = layer_range(model)
    if held is not None:
        weights = WEIGHTS_LAYERS

    blocks = 0
    for param in model.diffusion_model.transformer_blocks.parameters():
        local = param.to_local() if hasattr(param, "to_local") else param  # a DTensor's own shard
        blocks += stored_bytes(local)
    loaded = int(getattr(model, "model_loaded_weight_memory", 0))
    return Residency(weights, loaded, streamed, blocks, None if held is None else tuple(held))


def install_budget_hook() -> None:
    """Wrap comfy.model_patcher.ModelPatcher.load once in this process (NOTE [weight budget])."""
    global _wrapped
    if _wrapped:
        return
    import comfy.model_patcher

    original = comfy.model_patcher.ModelPatcher.load

    def load(self, device_to=None, lowvram_model_memory=0, force_patch_weights=False, full_load=False):
        budget = getattr(self.model, BUDGET_ATTR, None)
        if budget is not None:
            asked = lowvram_model_memory if lowvram_model_memory > 0 else float("inf")
            # > 0: ComfyUI reads 0 as "no budget"; a tiny one streams every layer.
            lowvram_model_memory = max(min(asked, budget), 0.1)
            full_load = False
        if getattr(self.model, SHARDED_ATTR, 0) or budget is not None:
            # Sharded: ComfyUI sizes layers by state_dict(), which detaches FSDP2's DTensor parameters:
            # not allowed inside the sampler's inference_mode for tensors made outside it. Offloaded:
            # ComfyUI's quantized layers (fp8, int8) re-wrap each weight they move as a Parameter, which
            # fails on a GPU for the inference tensor a move inside inference_mode makes ("Cannot set
            # version_counter for inference tensor", H200, 22B fp8 under a 16 GiB cap).
            with torch.inference_mode(False):
                return original(self, device_to, lowvram_model_memory, force_patch_weights, full_load)
        return original(self, device_to, lowvram_model_memory, force_patch_weights, full_load)

    comfy.model_patcher.ModelPatcher.load = load
    _wrapped = True


def auto_resident_bytes(device: torch.device, reserve_bytes: int) -> int:
    """The budget `offloaded` takes when none is given: on a GPU, what this process may still allocate
    (wire/gpu_memory.py: the card's free memory, within its memory fraction) minus `reserve_bytes` for activations;
    on a CPU rank 0 (the host is the device: every layer is cast per call, as on a GPU with no room)."""
    if device.type != "cuda":
        return 0
    return max(0, allocatable_bytes(device) - reserve_bytes)


# Attribute on the BaseModel: the number of transformer blocks FSDP2 shards (weights sharded).
SHARDED_ATTR = "ltx2_mgpu_sharded_blocks"


def shard_blocks(patcher: Any, device: torch.device, group: Any) -> int:
    """NOTE [sharded]: torch FSDP2 `fully_shard` on every transformer block over `group` (the ranks'
    default process group: gloo on CPU ranks, NCCL on GPUs): each rank keeps 1/N of every block
    parameter on `device`; a block's forward pre-hook all-gathers its weights, the post-hook frees
    them (reshard_after_forward). On GPUs FSDP2 gathers on its own stream, so while the CPU runs ahead
    of the GPU a block's gather overlaps the previous block's compute; explicit prefetch
    (set_modules_to_forward_prefetch) fails on CPU ranks (FSDP2 keeps no streams there) and is left
    until it can be measured on two GPUs. Collective: every rank must run the same blocks in the same order,
    which SP sampling does; where the ranks' work differs (TDP's uneven tiles, guidance groups) it runs in
    lockstep slots, the ranks with less work padding their gathers (sharded_lockstep.py).

    The patcher is loaded with a budget of 0 first (every comfy.ops layer casts per call), so a LoRA
    patch applies at the cast to the gathered full weight (ComfyUI's LowVramPatch), never to a shard;
    the layers outside the blocks (embeddings, connectors, output stage) stay on the host and are cast
    in per call as under offloaded. Quantized weights (fp8 scaled, int8) shard through FSDP2's
    tensor-subclass all-gather hooks (NOTE [sharded quantized]); scalar parameters (an fp8 layer's
    input_scale) stay whole on every rank. Returns the number of blocks sharded."""
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import fully_shard

    from .quantized_shards import wrap_for_sharding

    check_shardable(patcher, group.size())
    mesh = DeviceMesh.from_group(group, device.type)
    blocks = patcher.model.diffusion_model.transformer_blocks
    for block in blocks:
        for module in block.modules():
            wrap_for_sharding(module, device)
        scalars = {p for p in block.parameters() if p.dim() == 0}
        fully_shard(block, mesh=mesh, reshard_after_forward=True, ignored_params=scalars or None)
        # FSDP2 owns where the shards live: ComfyUI's model.to(offload device) when it unpatches a LoRA
        # set would move them (and cannot swap DTensor parameters anyway), so device moves skip the block.
        block._apply = _keep_in_place.__get__(block)
    setattr(patcher.model, SHARDED_ATTR, len(blocks))
    return len(blocks)


def _keep_in_place(self: torch.nn.Module, fn: Any, recurse: bool = True) -> torch.nn.Module:
    return self


def check_shardable(patcher: Any, world_size: int = 1) -> None:
    """ValueError saying what to change for a model FSDP2 cannot shard over `world_size` ranks: quantized
    layers in the blocks in a layout not taken (NOTE [sharded quantized])."""
    from comfy.quant_ops import QuantizedTensor

    from .quantized_shards import SHARDABLE_LAYOUTS, unshardable

    blocks = patcher.model.diffusion_model.transformer_blocks
    for name, module in blocks.named_modules():
        weight = getattr(module, "weight", None)
        why = unshardable(weight, world_size) if isinstance(weight, QuantizedTensor) else None
        if why is not None:
            raise ValueError(
                f"weights sharded cannot shard this file's quantized layers ({why} at "
                f"transformer_blocks.{name}; sharded takes fp8 scaled, int8 and nvfp4 files, layouts "
                f"{', '.join(SHARDABLE_LAYOUTS)}): set weights to offloaded for this file, or load an fp8, "
                "int8 or bf16 file"
            )


def is_sharded(model: Any) -> bool:
    return getattr(model.patcher.model, SHARDED_ATTR, 0) > 0
