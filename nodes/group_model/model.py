"""The MGPU Loader's MODEL: a ComfyUI model that native sampling accepts, its diffusion model run by
the worker group (NOTE [model call] in workers/wire/model_call.py).

In this process it is ComfyUI's own BaseModel for the file (LTXAV), configured by ComfyUI's own
detection from the file's header (tensor names and shapes, its metadata), so model_sampling,
latent_format, extra_conds and process_timestep are native and every guider, sampler, scheduler and
guide conditioning works unchanged. It holds no weights: its diffusion model is `GroupDiffusionModel`,
whose forward is served by the ranks with sequence parallelism and whose text connectors run there
too. Weights never load here, so ComfyUI's memory management sees a model of size zero.
Import only inside ComfyUI (the loader imports this module when it builds the output).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import comfy.model_management as mm
import comfy.model_patcher
import torch

from ...workers.group.manager import MGPUModel
from ...workers.wire.checks import DTYPES
from ...workers.wire.model_call import origin_of
from ...workers.wire.model_files import read_safetensors_header
from .call import GroupModelCall
from .detection import detect_model

WEIGHTS_LIVE_IN_WORKERS = (
    "the MGPU Loader's MODEL holds no weights in this process: they live in the worker group"
)


class GroupDiffusionModel(torch.nn.Module):
    """Stands where LTXAVModel stands in ComfyUI's BaseModel: what _apply_model and extra_conds use of it
    (dtype, the patchifiers, preprocess_text_embeds, forward), the work done by the ranks."""

    def __init__(self, call: GroupModelCall, source: torch.nn.Module, dtype: torch.dtype) -> None:
        super().__init__()
        self.call = call
        self.dtype = dtype
        # Weightless objects of the real model that BaseModel.process_timestep uses, taken from a copy
        # built on the meta device, so they are ComfyUI's own for this release.
        self.patchifier = source.patchifier
        self.a_patchifier = getattr(source, "a_patchifier", None)

    def preprocess_text_embeds(self, context: torch.Tensor, unprocessed: bool = False) -> torch.Tensor:
        return self.call.text_embeds(context, unprocessed)

    def forward(self, x, timestep, context=None, control=None, transformer_options={}, **kwargs):  # noqa: B006 (ComfyUI's signature)
        if control is not None:
            raise ValueError(f"a ControlNet cannot drive the MGPU Loader's MODEL ({control!r}); remove it")
        return self.call.forward(x, timestep, context, transformer_options, kwargs)


class GroupBaseModel:
    """Mixed into the file's BaseModel class (LTXAV): batching decisions are the ranks' business."""

    # Names and shapes (meta tensors, "diffusion_model.<name>") of the file's diffusion-model weights,
    # set by build_group_model: ComfyUI's LoRA loaders map a LoRA's keys through state_dict()
    # (comfy.lora.model_lora_keys_unet) and add_patches keeps the patches whose key it holds.
    def state_dict(self, *args, **kwargs):
        return dict(getattr(self, "group_weights", {}))

    def memory_required(self, input_shape, cond_shapes={}):  # noqa: B006 (ComfyUI's signature)
        # ComfyUI compares this with free memory in this process to decide whether cond and uncond
        # share one call, and frees that much before sampling. Nothing runs here: always one call per
        # batch (one round trip), and nothing else unloaded for it. The ranks hold a 1/N token share.
        return 0


class GroupModelPatcher(comfy.model_patcher.ModelPatcher):
    """ComfyUI's ModelPatcher for the group model.

    Weight patches (ComfyUI's LoRA loaders: LoraLoaderModelOnly, LoraLoader's model side) are kept here
    as ComfyUI keeps them (`patches`, a clone per LoRA node) and applied by the ranks with ComfyUI's own
    patching on their copy of the weights (NOTE [node patches] in nodes/group_model/patches.py). What
    would run Python on the weights here (hooks, wrappers, injections, patch functions) is refused by name.
    """

    def model_size(self):
        # The weight names (GroupBaseModel.state_dict) are meta tensors: nothing to load or free here.
        return 0

    def add_patches(self, patches, strength_patch=1.0, strength_model=1.0):
        for key in patches:
            if not isinstance(key, str) and len(key) > 2 and key[2] is not None:
                raise ValueError(
                    f"a weight patch of {key[0]!r} with a function ({origin_of(key[2])}) cannot run in the "
                    f"worker group: {WEIGHTS_LIVE_IN_WORKERS}; remove the node that adds it"
                )
        return super().add_patches(patches, strength_patch, strength_model)

    def add_hook_patches(self, hook, patches, strength_patch=1.0, strength_model=1.0):
        raise ValueError(f"weight hooks (LoRA hooks) cannot patch this MODEL: {WEIGHTS_LIVE_IN_WORKERS}")

    def add_weight_wrapper(self, name, function):
        raise ValueError(f"a weight wrapper for {name!r} cannot patch this MODEL: {WEIGHTS_LIVE_IN_WORKERS}")

    def add_object_patch(self, name, obj):
        if name.startswith("diffusion_model"):
            raise ValueError(
                f"an object patch of {name!r} cannot reach the diffusion model, which runs in the worker "
                "group; remove the node that adds it"
            )
        super().add_object_patch(name, obj)  # e.g. model_sampling: runs here, as native

    def set_injections(self, key, injections):
        raise ValueError(f"injections ({key!r}) cannot patch this MODEL: {WEIGHTS_LIVE_IN_WORKERS}")


def build_group_model(recipe: MGPUModel) -> Any:
    """A GroupModelPatcher (ComfyUI's MODEL) for `recipe`'s file, served by its worker group."""
    found = detect_model(Path(recipe.checkpoint))
    call = GroupModelCall(recipe)
    patcher = group_model_from_config(
        found.config, call, DTYPES[recipe.dtype], found.state_dict, found.prefix
    )
    if recipe.loras:
        # As LoraLoaderModelOnly leaves it: nodes downstream read the LoRA's own settings from its file's
        # metadata (GetICLoRAParameters: an IC-LoRA's reference downscale factor).
        metadata = read_safetensors_header(recipe.loras[-1][0]).metadata
        if metadata:
            patcher.set_attachments("lora_metadata", dict(metadata))
    return patcher


def group_model_from_config(
    config: Any, call: GroupModelCall, dtype: torch.dtype, state_dict: dict | None = None, prefix: str = ""
) -> Any:
    """The GroupModelPatcher of ComfyUI's model config `config` (supported_models.LTXAV, as detected),
    its diffusion-model calls served by `call`."""
    device = mm.get_torch_device()
    # As ComfyUI's loaders choose it: a quantized file's layers compute in the dtype ComfyUI picks for
    # the device, whatever the weights are stored in (comfy.sd.load_diffusion_model_state_dict).
    cast_from = None if config.quant_config is not None else dtype
    manual_cast = mm.unet_manual_cast(cast_from, device, config.supported_inference_dtypes)
    config.set_inference_dtype(dtype, manual_cast, device=device)
    # Built on the meta device as ComfyUI builds it (no memory, no weights read), then the transformer
    # is replaced by the group's stand-in: only its weightless parts are kept.
    model = config.get_model(state_dict or {}, prefix, device=torch.device("meta"))
    source = model.diffusion_model
    if not hasattr(source, "patchifier"):
        raise ValueError(
            f"the file holds a {type(source).__name__}, not an LTX model; the MGPU Loader serves LTX"
        )
    model.__class__ = type(f"Group{type(model).__name__}", (GroupBaseModel, type(model)), {})
    model.diffusion_model = GroupDiffusionModel(call, source, dtype)
    model.group_weights = {
        "diffusion_model." + key[len(prefix) :]: tensor
        for key, tensor in (state_dict or {}).items()
        if key.startswith(prefix)
    }
    # The patches of the clone now sampling (ComfyUI's pre_run sets current_patcher): they travel with
    # every model call. A closure, not an attribute holding the model: nn.Module would adopt it.
    model.diffusion_model.call.bind_patches(lambda: getattr(model.current_patcher, "patches", None) or {})
    model.device = device
    return GroupModelPatcher(model, load_device=device, offload_device=mm.unet_offload_device())
