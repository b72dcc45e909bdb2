"""Commands of native sampling on the group (the MGPU Loader's MODEL; NOTE [model call] in
workers/wire/model_call.py), served on the comfy backend only: ComfyModelCall (one diffusion-model
call) and ComfyTextEmbeds (the text connectors), both in workers/wire/requests.py.
"""

from __future__ import annotations

import threading
import time

import torch

from ..strategies import shm_prefault
from ..wire import model_call as wire
from ..wire.requests import ComfyModelCall, ComfyTextEmbeds
from .ops import InputRejected, op


def _comfy_model(job):
    from ..engine.comfy.model import ComfyModel

    model = job.runtime.state.get("model")
    if not isinstance(model, ComfyModel):
        raise InputRejected(
            "the MGPU Loader's MODEL runs on ComfyUI's model stack in the workers, and this group holds the "
            "model on ltx-core: load it with mode comfyui and compile_blocks / fp8_matmul off"
        )
    return model


def live_patcher(job, model, request) -> object:
    """The rank's patcher with the weight patches a request names by `patch_token` / `patches`
    (ComfyModelCall, ComfyTextEmbeds, GuiderSpec; NOTE [node patches]), made live."""
    from ..engine.comfy.node_patches import PatchSets, make_live, patched_patcher

    patches = {}
    if request.patch_token:
        sets = job.runtime.state.setdefault("node_patch_sets", PatchSets())
        try:
            patches = sets.get(request.patch_token, request.patches)
        except ValueError as exc:  # alike on every rank: all hold the same sets
            raise InputRejected(str(exc)) from exc
    patcher = patched_patcher(model, request.patch_token, patches)
    make_live(patcher)
    return patcher


@op(ComfyModelCall)
def model_call(job, request: ComfyModelCall) -> dict:
    from ..engine.comfy.model_call import ConditioningCache, ModelCallServer, decode_call

    rt = job.runtime
    model = _comfy_model(job)
    patcher = live_patcher(job, model, request)
    # Kept with the model, so a model replaced by load_model / unload_model takes its SP clone along.
    server = model.extras.get("model_call")
    if server is None or not server.serves(patcher):
        try:
            server = ModelCallServer(patcher, model.extras["exchange"])
        except ValueError as exc:  # more ranks than heads
            raise InputRejected(str(exc)) from exc
        model.extras["model_call"] = server
    caches = rt.state.setdefault("model_call_cache", ConditioningCache())
    cache = caches.for_token(request.token, list(request.drop))
    try:
        call = decode_call(request.call, cache, rt.device)
    except ValueError as exc:  # alike on every rank: all hold the same cache
        raise InputRejected(str(exc)) from exc
    streams = [s.to(rt.device) for s in request.streams]
    # NOTE [shm prefault]: this job's fresh mapping of the output slots would fault on every page as
    # rank 0 writes them; populated on a thread while the forward runs, the write takes none.
    prefaulting = _prefault_in_background(request.out) if rt.rank == 0 else None
    started = time.perf_counter()
    outputs = server.forward(streams, call)
    if rt.device.type == "cuda":
        torch.cuda.synchronize(rt.device)
    forward_ms = (time.perf_counter() - started) * 1e3
    slots = request.out
    if [tuple(o.shape) for o in outputs] != [tuple(s.shape) for s in slots]:
        raise RuntimeError(
            f"the model returned streams {[tuple(o.shape) for o in outputs]} for inputs "
            f"{[tuple(s.shape) for s in slots]}"
        )
    if prefaulting is not None:
        prefaulting.join()
    if rt.rank == 0:
        for slot, value in zip(slots, outputs):
            slot.copy_(value.float())
    return {"split_forwards": server.parallel.split_forwards, "forward_ms": forward_ms}


def _prefault_in_background(slots: list[torch.Tensor]) -> threading.Thread | None:
    setting = shm_prefault.prefault_setting()  # LTX2_MGPU_PREFAULT=0 turns it off
    if setting == "off":
        return None
    method = None if setting == "auto" else setting
    # Nothing else writes the slots during the forward, so any method (even "touch") is safe here.
    thread = threading.Thread(
        target=lambda: [shm_prefault.prefault(slot, method=method) for slot in slots], daemon=True
    )
    thread.start()
    return thread


@op(ComfyTextEmbeds)
def text_embeds(job, request: ComfyTextEmbeds) -> dict:
    from ..engine.comfy.model_call import text_embeds as run

    rt = job.runtime
    model = _comfy_model(job)
    out = run(live_patcher(job, model, request), request.context, request.unprocessed, rt.device)
    return {"embeds": wire.inline_tensor(out)} if rt.rank == 0 else {}
