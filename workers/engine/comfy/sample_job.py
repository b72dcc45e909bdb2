"""The SP Sampler's job on ComfyUI's engine: ComfyUI's guider and sampler on every rank, the model call
split over the ranks (and a step's guidance passes spread over groups of ranks when the plan says so).
Import only after bootstrap.import_comfyui.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from ...strategies.guidance_plan import plan_guidance
from ...wire.backend import BACKEND_COMFY
from ...wire.requests import GUIDANCE_AUTO, Sample, TextConditioning
from ..protocol import InputRejected, Job
from . import sampling
from .call_graphs import attach_call_graphs
from .compiled_blocks import is_compiled
from .guidance import build_guider, passes_per_step
from .model import ComfyModel
from .node_patches import PatchSets, live_patcher, make_live
from .sequence_parallel import SequenceParallel
from .sharded_lockstep import lockstep_for
from .weights import residency


def sample(model: ComfyModel, patch_sets: PatchSets, job: Job, request: Sample) -> dict:
    """The "sample" command (the handler checked the split): rank 0 writes the output slots.
    `patch_sets`: the rank's weight patch sets of a GUIDER's MODEL (NOTE [node patches])."""
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
            base = live_patcher(patch_sets, model, request.guider)
        else:
            make_live(
                model, model.patcher
            )  # a group MODEL call may have left a LoRA node's patches in the weights
            base = model.patcher
        spread = None
        if plan.groups > 1:
            from .guidance_parallel import group_patcher

            # sharded: the groups' forwards are evened out per step (NOTE [sharded lockstep])
            patcher, parallel, spread = group_patcher(
                base, guidance_groups(job, model, plan.groups), model.diffusion_model, lockstep
            )
        else:
            parallel = SequenceParallel.for_model(exchange, model.diffusion_model)
            patcher = parallel.patch(base)
        graphs = attach_call_graphs(patcher, exchange)  # NOTE [call graphs] (not over guidance groups)
    except ValueError as exc:  # more ranks than heads; a group count that does not divide the ranks
        raise InputRejected(str(exc)) from exc
    agree_batching(job, patcher)
    if request.guider is not None:
        try:
            guider = build_guider(patcher, request.guider, job.device)
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
    on_denoised, on_step = job.step_callbacks(request.preview)

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
    if job.rank == 0:
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
        "compiled": is_compiled(model),  # NOTE [compiled blocks]
        # Where the weights were at the end of the run: streamed_modules are the layers cast in per call
        # (offloaded, sharded; 0 replicated), block_bytes the blocks' share this rank holds.
        **residency(model.patcher).to_reply(),
    }


def requested_groups(model: ComfyModel, requested: int) -> int:
    """The guidance group count a job asks for. Auto keeps one group (native's batching) on quantized
    weights: ComfyUI's quantized layers give other numbers for a batch than for its parts (LTX-2.5's int8
    convrot file, natively, cond and uncond batched or not: 4e-2 / 8e-2 of the largest value apart on
    the tiny model), so splitting the batch would leave native's result."""
    from .layer_split import layer_range

    if layer_range(model.patcher.model) is not None:
        return 1  # weights layers: every rank runs every forward (NOTE [layers])
    quantized = getattr(model.patcher.model.model_config, "quant_config", None) is not None
    return 1 if requested == GUIDANCE_AUTO and quantized else requested


def guidance_groups(job: Job, model: ComfyModel, count: int) -> Any:
    """The rank's GuidanceGroups for `count` groups, built once (collectively) and kept with the model."""
    from .guidance_parallel import GuidanceGroups

    kept = model.extras.setdefault("guidance_groups", {})
    if count not in kept:
        kept[count] = GuidanceGroups(count, job.rank, job.world_size, job.device, model.extras["exchange"])
    return kept[count]


def agree_batching(job: Job, patcher: Any) -> None:
    """Make ComfyUI batch cond and uncond alike on every rank: it decides from the free memory it sees
    (samplers._calc_cond_batch), which differs between ranks; ranks that decide differently would call
    the model's collectives with different batch sizes. All ranks use the smallest free memory."""
    free = torch.tensor([float(patcher.get_free_memory(job.device))], dtype=torch.float64)
    if job.world_size > 1:
        dist.all_reduce(free, op=dist.ReduceOp.MIN, group=job.control_group)
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
