"""ComfyUI's engine on a rank (NOTE [engine seam] in workers/engine/protocol.py): files loaded by
ComfyUI's own loaders, run by its model classes and samplers, our strategies attached at its extension
points (sequence parallelism, tiles, guidance groups, CUDA graphs, compiled blocks).

This class holds what a rank keeps between commands; each command's work lives in a *_job module.
Importing it imports no ComfyUI module: bootstrap.import_comfyui does, at the first load.
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any, ClassVar

import torch
import torch.distributed as dist

from ...wire.backend import BACKEND_COMFY
from ...wire.capabilities import COMFY
from ...wire.checks import DTYPES
from ...wire.comfyui_root import ComfyUIRoot, ComfyUIUnusable
from ...wire.lora_files import SwitchReport
from ...wire.requests import LoadModel
from ...wire.weight_placement import (
    AUTO_RESIDENT,
    WEIGHTS_LAYERS,
    WEIGHTS_OFFLOADED,
    WEIGHTS_REPLICATED,
    WEIGHTS_SHARDED,
)
from ..protocol import Engine, InputRejected, Job
from .model import ComfyModel, ComfyVaeFiles
from .node_patches import PatchSets


class ComfyEngine(Engine):
    name: ClassVar[str] = BACKEND_COMFY
    capabilities = COMFY

    def __init__(self) -> None:
        self.model: ComfyModel | None = None
        self.patch_sets = PatchSets()  # the MGPU MODEL's weight patches by token (NOTE [node patches])
        self.call_caches: Any = None  # model_call.ConditioningCache, made at the first model call
        self.text_heads: tuple[tuple, Any] | None = None  # (key, ComfyTextHead) of the last text encode

    def loaded(self) -> ComfyModel:
        if self.model is None:
            raise InputRejected("no model is loaded in the worker group; run the MGPU Loader first")
        return self.model

    # ----- the model -----
    def load(self, job: Job, request: LoadModel) -> dict:
        """Bootstrap ComfyUI's model side in this rank and load the request's checkpoint through its
        loader (skipped when the same file, dtype, VAE files, placement and fp8 are loaded; compile
        only changes how the blocks run)."""
        from .bootstrap import attention_name, import_comfyui
        from .compiled_blocks import set_compiled
        from .weights import check_shardable, residency, shard_blocks

        path = Path(request.checkpoint)
        dtype = DTYPES[request.dtype]
        root = ComfyUIRoot(request.comfyui_root, request.comfyui_version or "unknown")
        try:
            import_comfyui(root, job.device)
        except ComfyUIUnusable as exc:
            raise InputRejected(str(exc)) from exc
        vae_files = ComfyVaeFiles(
            _optional_path(request.video_vae, "video_vae"), _optional_path(request.audio_vae, "audio_vae")
        )
        # What decides where the weights live: a replicated model does not depend on the budget's inputs
        # (max_video_tokens changes reserve_bytes: no reload for that).
        offloaded = request.weights == WEIGHTS_OFFLOADED
        placement = (
            (request.weights, request.resident_bytes, request.reserve_bytes)
            if offloaded
            else (request.weights,)
        )
        identity = (path, dtype, vae_files, placement, request.fp8_matmul)
        current = self.model
        if current is not None and current.extras.get("identity") == identity:
            set_compiled(current, request.compile)
            return {"reused": True, "backend": BACKEND_COMFY, **residency(current.patcher).to_reply()}
        self.unload()
        if job.device.type == "cuda":
            torch.cuda.empty_cache()
        job.progress(0, 1)
        layered = request.weights == WEIGHTS_LAYERS and job.world_size > 1
        try:
            from .layer_split import SoloExchange, file_block_bytes, place_layers

            # weights layers: the ranges balance the blocks' bytes from the file's header, as the
            # loader's pre-flight planned them (NOTE [layer ranges]).
            block_bytes = file_block_bytes(path, request.dtype) if layered else None
            # No VAE here: the first vae_decode / vae_encode loads it (ComfyModel.checkpoint_vae), so a
            # workflow that only samples does not pay for it.
            model = ComfyModel.load(
                path, job.device, dtype, with_vae=False, vae_files=vae_files,
                resident_bytes=resident_bytes(request, job.device), fp8_matmul=request.fp8_matmul,
                place=(lambda p: place_layers(p, job.rank, job.world_size, block_bytes)) if layered else None,
            )  # fmt: skip
            if request.weights == WEIGHTS_SHARDED:
                check_shardable(model.patcher)
                shard_blocks(model.patcher, job.device, dist.group.WORLD)
        except (ValueError, RuntimeError) as exc:
            raise InputRejected(f"ComfyUI could not load {path}: {exc}") from exc
        # weights layers: every rank runs every token of its blocks (NOTE [layers]), never split.
        exchange = SoloExchange() if layered else job.head_exchange()
        model.extras.update(exchange=exchange, placement=placement, identity=identity)
        set_compiled(model, request.compile)
        self.model = model
        job.progress(1, 1)
        return {
            "reused": False,
            "backend": BACKEND_COMFY,
            "num_layers": len(model.diffusion_model.transformer_blocks),
            "attention": attention_name(),  # the rank's default (ComfyUI's own flag, launcher.ATTENTION_ENV)
            "fp8_matmul": request.fp8_matmul,
            **residency(model.patcher).to_reply(),
        }

    def unload(self) -> None:
        dropped = self.model is not None
        self.model = None
        self.text_heads = None
        if dropped:
            release()

    def set_compiled(self, job: Job, compile: bool) -> dict:
        from .compiled_blocks import is_compiled, set_compiled

        model = self.loaded()
        set_compiled(model, compile)
        return {"compiled": is_compiled(model)}

    # ----- the commands -----
    def sample(self, job: Job, request) -> dict:
        from .sample_job import sample

        return sample(self.loaded(), self.patch_sets, job, request)

    def model_call(self, job: Job, request) -> dict:
        from .model_call import ConditioningCache
        from .model_call_job import model_call

        if self.call_caches is None:
            self.call_caches = ConditioningCache()
        return model_call(self.loaded(), self.patch_sets, self.call_caches, job, request)

    def text_embeds(self, job: Job, request) -> dict:
        from .model_call_job import text_embeds

        return text_embeds(self.loaded(), self.patch_sets, job, request)

    def tdp_upscale(self, job: Job, request, plan) -> dict:
        from .tdp_job import tdp_upscale

        return tdp_upscale(self.loaded(), job, request, plan)

    def vae_decode(self, job: Job, request) -> dict:
        from .vae_job import vae_decode_comfy

        return vae_decode_comfy(job, self.loaded(), request)

    def vae_encode(self, job: Job, request, plan) -> dict:
        from .vae_job import vae_encode_comfy

        return vae_encode_comfy(job, self.loaded(), request, plan)

    def encode_gemma4(self, job: Job, request) -> dict:
        from .gemma4_job import encode_gemma4

        return encode_gemma4(job, self.loaded(), request)

    def bench(self, job: Job, request, full_config: dict | None = None) -> dict:
        from .bench import run_bench

        return run_bench(self, job, request)

    # ----- LoRA -----
    def set_loras(self, job: Job, request) -> dict:
        """ComfyUI's LoRA loading on the rank's base patcher (lora.py). A failure after the first weight
        changed drops the model (its weights are unknown): the next load loads it again."""
        import logging

        from .lora import apply_loras, plan_loras

        model = self.loaded()
        try:
            plan = plan_loras(
                model, list(request.loras)
            )  # reads and maps every file before any weight changes
        except ValueError as exc:
            raise InputRejected(str(exc)) from exc
        if plan is None:
            return SwitchReport(changed=False).as_dict()
        if plan.unused and job.rank == 0:  # ComfyUI logs each as "lora key not loaded"
            logging.getLogger(__name__).warning(
                "LoRA set %s: %d patches change nothing in this checkpoint", plan.key, plan.unused
            )
        try:
            return apply_loras(model, plan).as_dict()
        except Exception as exc:
            self.unload()
            raise RuntimeError(
                f"switching LoRAs failed part-way ({exc}); the base model was dropped and is loaded again on the "
                "next run"
            ) from exc

    def lora_state(self, job: Job) -> tuple[tuple[tuple[str, float], ...], list[torch.nn.Module]]:
        model = self.loaded()
        return model.loras, [model.diffusion_model]  # LTX-2's text connectors sit inside it

    def make_room(self, job: Job, need_bytes: int) -> str:
        """NOTE [text room]: under weights offloaded the resident part of the transformer is ComfyUI's to
        size, so, as native ComfyUI does before loading a text encoder, its model management moves layers
        back to host memory until `need_bytes` are free (they are cast in per call, as offloaded's other
        layers are; the next sampling loads up to the budget again). Other options keep their weights."""
        from .weights import WEIGHTS_OFFLOADED, residency

        model = self.model
        if model is None or job.device.type != "cuda":
            return ""
        before = residency(model.patcher)
        if before.weights != WEIGHTS_OFFLOADED:
            return ""
        import comfy.model_management as mm

        if mm.get_free_memory(job.device) >= need_bytes:
            return ""
        mm.free_memory(need_bytes, job.device)
        moved = before.resident_bytes - residency(model.patcher).resident_bytes
        return f"{moved / 2**30:.1f} GiB of the transformer's resident layers moved to host memory for the text encoder"

    # ----- text -----
    def text_dtype(self, files) -> torch.dtype:
        """The file's dtype, whatever the group's weight dtype, as ComfyUI's text encoder loaders hold it
        (llama_detect sets dtype_llama from the stored norm weight, and LTXAVTEModel uses it for the
        projection too): the CONDITIONING is CLIPTextEncode's with any MGPU Loader weight_dtype."""
        from ...text.text_encoder import stored_dtype

        return stored_dtype(files)

    def text_head(self, job: Job, files, projection: str = "") -> Any:
        """ComfyUI's LTXAVTEModel for the projection in `projection` (default: the loaded model's file),
        made once per file and dtype."""
        from .text_projection import ComfyTextHead

        model = self.loaded()
        dtype = self.text_dtype(files)
        config = files.config
        source = Path(projection) if projection else model.path
        key = (source, dtype, config.hidden_size, config.num_hidden_states)
        if self.text_heads is not None and self.text_heads[0] == key:
            return self.text_heads[1]
        self.text_heads = None
        try:
            head = ComfyTextHead.load(source, config.hidden_size, config.num_hidden_states, dtype, job.device)
        except ValueError as exc:
            raise InputRejected(str(exc)) from exc
        except torch.OutOfMemoryError:  # NOTE [text room]; perhaps on some ranks only: the group stops
            raise RuntimeError(
                f"MGPU Text Encode: no room on {job.device} for the text projection of {source.name} beside the "
                "loaded diffusion model. Load the model with the MGPU Loader's weights offloaded (it gives up "
                "room to the text encoder) or layers (a smaller share per GPU), add GPUs, or free GPU memory"
            ) from None
        self.text_heads = (key, head)
        return head


def resident_bytes(request: LoadModel, device: torch.device) -> int | None:
    """The device budget of the request's weights option: None for replicated (everything resident)."""
    from .weights import auto_resident_bytes

    if request.weights in (WEIGHTS_REPLICATED, WEIGHTS_LAYERS):
        return None  # layers: the blocks this rank keeps, all resident
    if request.weights == WEIGHTS_SHARDED:
        return 0  # every layer casts per call: the blocks' shards are gathered, the rest stays on the host
    if request.resident_bytes != AUTO_RESIDENT:
        return request.resident_bytes
    return auto_resident_bytes(device, request.reserve_bytes)


def release() -> None:
    """Give back what a dropped model held: ComfyUI keeps weak references to models it loaded (the
    runtime empties the device's cache after each command)."""
    import sys

    gc.collect()
    comfy_models = sys.modules.get("comfy.model_management")
    if comfy_models is not None:
        comfy_models.cleanup_models()


def _optional_path(value: str, key: str) -> Path | None:
    if value and not Path(value).is_file():
        raise InputRejected(f"{key} file {value} does not exist on this machine")
    return Path(value) if value else None
