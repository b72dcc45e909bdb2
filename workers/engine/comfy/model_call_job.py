"""Native sampling on the group (the MGPU Loader's MODEL; NOTE [model call] in workers/wire/model_call.py)
on ComfyUI's engine: one diffusion-model call (ComfyModelCall) and the text connectors (ComfyTextEmbeds).
Import only after bootstrap.import_comfyui.
"""

from __future__ import annotations

import time

import torch

from ...strategies import shm_prefault
from ...strategies.guidance_plan import plan_guidance
from ...wire import model_call as wire
from ...wire.requests import ComfyModelCall, ComfyTextEmbeds
from ..protocol import InputRejected, Job
from . import attention_backend
from .bootstrap import attention_name
from .call_profile import profiled_call
from .model import ComfyModel
from .model_call import ConditioningCache, ModelCallServer, batch_share, decode_call
from .model_call import text_embeds as run_text_embeds
from .node_patches import PatchSets, live_patcher, switch_reply
from .sample_job import guidance_groups, requested_groups


def model_call(
    model: ComfyModel, patch_sets: PatchSets, caches: ConditioningCache, job: Job, request: ComfyModelCall
) -> dict:
    """One model call of a native sampler; `caches`: the rank's conditioning caches, `patch_sets` its
    weight patch sets (NOTE [node patches])."""
    patcher = live_patcher(patch_sets, model, request)
    cache = caches.for_token(request.token, list(request.drop))
    try:
        call = decode_call(request.call, cache, job.device)
        attention_backend.check(call["options"])
    except ValueError as exc:  # alike on every rank: all hold the same cache and the same ComfyUI
        raise InputRejected(str(exc)) from exc
    streams = [s.to(job.device) for s in request.streams]
    groups, share = _guidance_share(job, model, request, call, streams)
    # Kept with the model, so a model replaced by load_model / unload_model takes its SP clones along.
    key = "model_call" if groups is None else f"model_call_groups_{groups.groups}"
    server = model.extras.get(key)
    if server is None or not server.serves(patcher):
        try:
            exchange = model.extras["exchange"] if groups is None else groups.exchange
            server = ModelCallServer(patcher, exchange)
        except ValueError as exc:  # more ranks than heads
            raise InputRejected(str(exc)) from exc
        model.extras[key] = server
    items = slice(None)
    if groups is not None:
        call, items = share
        streams = [s[items] for s in streams]
    # The ranks that write: rank 0, or each group's first rank its share of the batch.
    writes = job.rank == 0 if groups is None else groups.member == 0
    # NOTE [shm prefault]: this job's fresh mapping of the output slots would fault on every page as
    # a writer fills them; populated on a thread while the forward runs, the write takes none.
    prefaulting = shm_prefault.prefault_in_background(request.out) if writes else None
    started = time.perf_counter()
    with profiled_call(job.rank, job.device):  # bench only (LTX2_MGPU_PROFILE_CALLS)
        outputs = server.forward(streams, call)
    if job.device.type == "cuda":
        torch.cuda.synchronize(job.device)
    forward_ms = (time.perf_counter() - started) * 1e3
    slots = [slot[items] for slot in request.out]
    if [tuple(o.shape) for o in outputs] != [tuple(s.shape) for s in slots]:
        raise RuntimeError(
            f"the model returned streams {[tuple(o.shape) for o in outputs]} for inputs "
            f"{[tuple(s.shape) for s in slots]}"
        )
    if prefaulting is not None:
        prefaulting.join()
    if writes:
        for slot, value in zip(slots, outputs):
            slot.copy_(value.float())
    return {
        "split_forwards": server.parallel.split_forwards,
        "attention_backend_calls": server.parallel.backend_calls,  # NOTE [attention backend]
        "attention": attention_name(),  # the rank's default, the one no node named
        "forward_ms": forward_ms,
        "guidance_groups": 1 if groups is None else groups.groups,
        # NOTE [call graphs]: this server's [replays, captures, keys left eager] so far (None: no graphs)
        "cuda_graphs": None if server.graphs is None else server.graphs.counts(),
        **(switch_reply(model) if job.rank == 0 else {}),
    }


def _guidance_share(job: Job, model: ComfyModel, request: ComfyModelCall, call: dict, streams: list):
    """(GuidanceGroups, (call share, batch items)) when this batched call splits over guidance groups
    (the plan for its chunk count, workers/strategies/guidance_plan.py), else (None, None)."""
    batch = int(streams[0].shape[0])
    chunks = len(call["options"].get("cond_or_uncond") or ()) or batch
    requested = requested_groups(model, request.guidance_groups)
    if job.world_size < 2 or chunks < 2 or requested == 1:
        return None, None
    try:
        plan = plan_guidance(job.world_size, chunks, requested)
    except ValueError as exc:
        raise InputRejected(str(exc)) from exc
    if plan.groups < 2 or chunks % plan.groups:
        return None, None  # e.g. a lone STG pass: the whole group runs it sequence-parallel
    groups = guidance_groups(job, model, plan.groups)
    share = batch_share(call, batch, chunks, groups.index, groups.groups)
    if share is None:
        return None, None
    return groups, share


def text_embeds(model: ComfyModel, patch_sets: PatchSets, job: Job, request: ComfyTextEmbeds) -> dict:
    patcher = live_patcher(patch_sets, model, request)
    out = run_text_embeds(patcher, request.context, request.unprocessed, job.device)
    return {"embeds": wire.inline_tensor(out), **switch_reply(model)} if job.rank == 0 else {}
