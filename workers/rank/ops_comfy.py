"""Commands on the comfy backend: load a file with ComfyUI's loaders, sample with ComfyUI's samplers.

Reached from load_model / sample when the LoadModel request says backend "comfy" (or the loaded model is a
ComfyModel). ComfyUI itself is imported only here and under workers/engine/comfy/.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.distributed as dist

from ..engine.comfy.model import ComfyModel, ComfyVaeFiles  # no ComfyUI import until ComfyModel.load
from ..wire.backend import BACKEND_COMFY
from ..wire.checks import DTYPES
from ..wire.comfyui_root import ComfyUIRoot, ComfyUIUnusable
from ..wire.requests import LoadModel, Sample, TextConditioning
from ..wire.weight_placement import AUTO_RESIDENT, WEIGHTS_OFFLOADED, WEIGHTS_REPLICATED, WEIGHTS_SHARDED
from .ops import InputRejected
from .preview import step_callbacks


def load_comfy(job, request: LoadModel, exchange) -> dict:
    """Bootstrap ComfyUI's model side in this rank and load the request's checkpoint through its
    loader (the request refused compile and fp8_matmul on this backend)."""
    from ..engine.comfy.bootstrap import attention_name, import_comfyui

    rt = job.runtime
    path = Path(request.checkpoint)
    dtype = DTYPES[request.dtype]
    root = ComfyUIRoot(request.comfyui_root, request.comfyui_version or "unknown")
    try:
        import_comfyui(root, rt.device)
    except ComfyUIUnusable as exc:
        raise InputRejected(str(exc)) from exc
    vae_files = ComfyVaeFiles(
        _optional_path(request.video_vae, "video_vae"), _optional_path(request.audio_vae, "audio_vae")
    )
    from ..engine.comfy.weights import check_shardable, residency, shard_blocks

    current = rt.state.get("model")
    # What decides where the weights live: a replicated model does not depend on the budget's inputs
    # (max_video_tokens changes reserve_bytes: no reload for that).
    offloaded = request.weights == WEIGHTS_OFFLOADED
    placement = (
        (request.weights, request.resident_bytes, request.reserve_bytes) if offloaded else (request.weights,)
    )
    if isinstance(current, ComfyModel) and (
        current.path,
        current.dtype,
        current.vae_files,
        current.extras.get("placement"),
    ) == (path, dtype, vae_files, placement):
        return {"reused": True, "backend": BACKEND_COMFY, **residency(current.patcher).to_reply()}
    rt.state.pop("model", None)
    job.progress(0, 1)
    try:
        # No VAE here: the first vae_decode / vae_encode loads it (ComfyModel.checkpoint_vae), so a
        # workflow that only samples does not pay for it.
        model = ComfyModel.load(
            path,
            rt.device,
            dtype,
            with_vae=False,
            vae_files=vae_files,
            resident_bytes=resident_bytes(request, rt.device),
        )
        if request.weights == WEIGHTS_SHARDED:
            check_shardable(model.patcher)
            shard_blocks(model.patcher, rt.device, dist.group.WORLD)
    except (ValueError, RuntimeError) as exc:
        raise InputRejected(f"ComfyUI could not load {path}: {exc}") from exc
    model.extras["exchange"] = exchange
    model.extras["placement"] = placement
    rt.state["model"] = model
    job.progress(1, 1)
    return {
        "reused": False,
        "backend": BACKEND_COMFY,
        "num_layers": len(model.diffusion_model.transformer_blocks),
        "attention": attention_name(),  # the rank's default (ComfyUI's own flag, launcher.ATTENTION_ENV)
        **residency(model.patcher).to_reply(),
    }


def resident_bytes(request: LoadModel, device: torch.device) -> int | None:
    """The device budget of the request's weights option: None for replicated (everything resident)."""
    from ..engine.comfy.weights import auto_resident_bytes

    if request.weights == WEIGHTS_REPLICATED:
        return None
    if request.weights == WEIGHTS_SHARDED:
        return 0  # every layer casts per call: the blocks' shards are gathered, the rest stays on the host
    if request.resident_bytes != AUTO_RESIDENT:
        return request.resident_bytes
    return auto_resident_bytes(device, request.reserve_bytes)


def _optional_path(value: str, key: str) -> Path | None:
    if value and not Path(value).is_file():
        raise InputRejected(f"{key} file {value} does not exist on this machine")
    return Path(value) if value else None


def is_comfy_model(model: object) -> bool:
    return isinstance(model, ComfyModel)


def sample_comfy(job, request: Sample) -> dict:
    """The "sample" command on a ComfyModel: ComfyUI's guider and sampler, the model call SP-split
    (and the step's guidance passes spread over groups of ranks when the plan says so)."""
    from ..engine.comfy import sampling
    from ..engine.comfy.call_graphs import attach_call_graphs
    from ..engine.comfy.guidance import build_guider, passes_per_step
    from ..engine.comfy.node_patches import make_live
    from ..engine.comfy.sequence_parallel import SequenceParallel
    from ..engine.comfy.sharded_lockstep import lockstep_for
    from ..engine.comfy.weights import residency
    from ..strategies.guidance_plan import plan_guidance
    from .ops_comfy_model_call import live_patcher
    from .ops_sampling import check_split

    rt = job.runtime
    model = rt.state["model"]
    check_split(request, job.world_size)
    exchange = model.extras["exchange"]
    lockstep = lockstep_for(model)  # sharded: None otherwise
    padded_before = 0 if lockstep is None else lockstep.padded
    try:
        plan = plan_guidance(
            job.world_size,
            passes_per_step(request.guider, request.cfg_video, request.cfg_audio),
            requested_groups(model, request.guidance_groups),
        )
        if request.guider is not None:
            # The GUIDER's MODEL may carry LoRA nodes' patches; made live here as for a model call.
            base = live_patcher(job, model, request.guider)
        else:
            make_live(model.patcher)  # a group MODEL call may have left a LoRA node's patches in the weights
            base = model.patcher
        spread = None
        if plan.groups > 1:
            from ..engine.comfy.guidance_parallel import group_patcher

            # sharded: the groups' forwards are evened out per step (NOTE [sharded lockstep])
            patcher, parallel, spread = group_patcher(
                base, guidance_groups(job, model, plan.groups), model.diffusion_model, lockstep
            )
        else:
            parallel = SequenceParallel.for_model(exchange, model.diffusion_model)
            patcher = parallel.patch(base)
        graphs = attach_call_graphs(patcher, job.world_size)  # NOTE [call graphs]
    except ValueError as exc:  # more ranks than heads; a group count that does not divide the ranks
        raise InputRejected(str(exc)) from exc
    agree_batching(job, patcher)
    if request.guider is not None:
        try:
            guider = build_guider(patcher, request.guider, rt.device)
        except ValueError as exc:  # an attention backend this ComfyUI lacks: alike on every rank
            raise InputRejected(str(exc)) from exc
    else:
        guider = sampling.make_guider(
            patcher,
            conditioning(request.positive, request.frame_rate),
            conditioning(request.negative, request.frame_rate),
            request.cfg_video,
            request.cfg_audio,
        )
    on_denoised, on_step = step_callbacks(job, request.preview)

    def callback(step: int, total: int, x0: list[torch.Tensor], x: list[torch.Tensor]) -> None:
        on_denoised(step, total, x0)
        on_step(step + 1, total, x)

    job.check_cancel()
    with torch.inference_mode():
        out = sampling.sample_with(
            guider,
            latent_dict(request),
            request.sigmas.float(),
            request.sampler,
            request.seed,
            add_noise=request.add_noise,
            callback=callback,
        )
    result = sampling.streams(out["samples"])
    if rt.rank == 0:
        request.out_video.copy_(result[0].to(request.out_video.dtype))
        if len(result) > 1:
            request.out_audio.copy_(result[1].to(request.out_audio.dtype))
    return {
        "steps": len(request.sigmas) - 1,
        "exchange": exchange.name,
        "backend": BACKEND_COMFY,
        "split_forwards": parallel.split_forwards,
        "attention_backend_calls": parallel.backend_calls,  # NOTE [attention backend]
        "guidance": plan.describe(int(request.video[0, 0].numel())),
        "guidance_groups": plan.groups,
        "parallel_steps": 0 if spread is None else spread.parallel_steps,
        "group_exchange": exchange.name if spread is None else spread.groups.exchange.name,
        # Forwards this rank ran as weight gathers only, to keep step with a group that ran more (sharded).
        "padding_forwards": 0 if lockstep is None else lockstep.padded - padded_before,
        # NOTE [call graphs]: [replays, captures, keys left eager after a failed capture] (None: no graphs)
        "cuda_graphs": None if graphs is None else graphs.counts(),
        # Where the weights were at the end of the run: streamed_modules are the layers cast in per call
        # (offloaded, sharded; 0 replicated), block_bytes the blocks' share this rank holds.
        **residency(model.patcher).to_reply(),
    }


def requested_groups(model, requested: int) -> int:
    """The guidance group count a job asks for. Auto keeps one group (native's batching) on quantized
    weights: ComfyUI's quantized layers give other numbers for a batch than for its parts (LTX-2.5's int8
    convrot file, natively, cond and uncond batched or not: 4e-2 / 8e-2 of the largest value apart on
    the tiny model), so splitting the batch would leave native's result."""
    from ..wire.requests import GUIDANCE_AUTO

    quantized = getattr(model.patcher.model.model_config, "quant_config", None) is not None
    return 1 if requested == GUIDANCE_AUTO and quantized else requested


def guidance_groups(job, model, count: int):
    """The rank's GuidanceGroups for `count` groups, built once (collectively) and kept with the model."""
    from ..engine.comfy.guidance_parallel import GuidanceGroups

    kept = model.extras.setdefault("guidance_groups", {})
    if count not in kept:
        rt = job.runtime
        kept[count] = GuidanceGroups(count, rt.rank, rt.world_size, rt.device, model.extras["exchange"])
    return kept[count]


def agree_batching(job, patcher) -> None:
    """Make ComfyUI batch cond and uncond alike on every rank: it decides from the free memory it sees
    (samplers._calc_cond_batch), which differs between ranks; ranks that decide differently would call
    the model's collectives with different batch sizes. All ranks use the smallest free memory."""
    rt = job.runtime
    free = torch.tensor([float(patcher.get_free_memory(rt.device))], dtype=torch.float64)
    if rt.world_size > 1:
        dist.all_reduce(free, op=dist.ReduceOp.MIN, group=rt.control_group)
    agreed = float(free.item())
    patcher.get_free_memory = lambda device=None: agreed


def conditioning(cond: TextConditioning | None, frame_rate: float) -> list | None:
    """ComfyUI CONDITIONING from a request's TextConditioning: the node's tensor and model entries
    (text attention mask, guide keyframe indices) with the flag and frame rate LTXVConditioning set."""
    if cond is None:
        return None
    options = dict(cond.extras)
    options["unprocessed_ltxav_embeds"] = cond.unprocessed
    options["frame_rate"] = frame_rate
    return [[cond.tensor, options]]


def latent_dict(request: Sample) -> dict:
    """ComfyUI's LATENT from the request's streams: NestedTensor (video, audio) when there is audio."""
    import comfy.nested_tensor

    video, audio = request.video, request.audio
    video_mask, audio_mask = request.video_mask, request.audio_mask
    if audio is None:
        latent = {"samples": video}
        if video_mask is not None:
            latent["noise_mask"] = video_mask
        return latent
    latent = {"samples": comfy.nested_tensor.NestedTensor([video, audio])}
    if video_mask is not None or audio_mask is not None:
        # As LTXVConcatAVLatent: the stream without a mask is denoised fully.
        masks = [
            video_mask if video_mask is not None else torch.ones_like(video),
            audio_mask if audio_mask is not None else torch.ones_like(audio),
        ]
        latent["noise_mask"] = comfy.nested_tensor.NestedTensor(masks)
    return latent
