"""The "encode_text" command: Gemma 3 over the worker group -> LTX-2 text features in the client's slots.

Args: "text_encoder" (path of a ComfyUI single file or an HF folder), "prompts" (token id lists,
BOS first, from `text_tokenizer`), "placement" ("auto" | "layers" | "replicas"), "outputs" (one
float32 output slot [1, n_p, C] per prompt, n_p = its number of ids, C = the projection's width).

Gemma runs the same way on both engines; what turns its hidden states into LTX's features is the
engine's text head (Engine.text_head: ComfyUI's LTXAVTEModel, or ltx-core's projection Linear).
Placement (the Gemma weights stay resident in `runtime.state`, keyed by file version, dtype and
placement, until the group stops or another encoder is asked for):
- "replicas": every rank holds all of Gemma; prompt p runs on rank p mod world_size, which also
  normalises, projects and writes its slot.
- "layers": rank r holds a contiguous block of layers (rank 0 the embedding, the last rank the final
  norm); each prompt's hidden state goes rank to rank by send/recv; every rank keeps the prompt
  tokens of its layers' inputs, and rank 0 gathers them, normalises, projects and writes the slot.
- "auto": replicas when the whole model, with headroom, fits every rank's free memory; else layers,
  with blocks sized by each rank's free memory.
Each prompt runs alone (batch 1, left-padded to max(1024, n)), as ComfyUI encodes it, so the result
is the same for any placement and rank count (bit for bit on one device type).
"""

from __future__ import annotations

import gc
import logging
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist

from ..engine.protocol import TextHead
from ..text.gemma3 import COMPUTE_DTYPE, GemmaSegment, SequenceContext
from ..text.gemma_lora import apply_text_loras, text_lora_pairs
from ..text.placement import REPLICA_HEADROOM, free_bytes, split_layers
from ..text.text_encoder import GemmaFiles, load_segment, open_gemma
from ..text.text_tokenizer import padded_length
from ..wire.requests import EncodeText
from .ops import InputRejected, op

STATE_KEY = "text_encoder"
log = logging.getLogger(__name__)


@dataclass
class ResidentEncoder:
    """Gemma as this rank holds it. blocks[r] = [start, stop) layers of rank r (all of them on
    every rank for replicas)."""

    stamp: tuple
    dtype: torch.dtype
    placement: str
    blocks: tuple[tuple[int, int], ...]
    files: GemmaFiles
    segment: GemmaSegment


def file_stamp(path: Path) -> tuple:
    """Identity of a text encoder's files on disk (name, size, mtime of each weight/config file)."""
    files = sorted([*path.glob("*.safetensors"), *path.glob("config.json")]) if path.is_dir() else [path]
    return tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files)


@dataclass(frozen=True)
class EncodeRequest:
    """A validated "encode_text" job: the encoder's files and identity, the projection to apply."""

    path: Path
    files: GemmaFiles
    stamp: tuple
    placement: str
    projection: TextHead  # the engine's (Engine.text_head)
    loras: tuple[tuple[str, float], ...] = ()  # text-encoder LoRAs (path, strength), patched at load


def _validate(job, request: EncodeText) -> EncodeRequest:
    """What depends on the files and the loaded model, checked alike on every rank before any
    collective (the request checked the rest)."""
    placement = request.placement
    path = Path(request.text_encoder)
    if not path.exists():
        raise InputRejected(f"text encoder {path} does not exist on this machine")
    loras = request.text_loras
    for lora, _ in loras:
        if not Path(lora).is_file():
            raise InputRejected(f"text-encoder LoRA {lora} does not exist on this machine")
    # The resident encoder holds patched weights: a different LoRA set is a different encoder.
    stamp = (file_stamp(path), tuple((lora, strength, file_stamp(Path(lora))) for lora, strength in loras))
    current: ResidentEncoder | None = job.runtime.state.get(STATE_KEY)
    if current is not None and current.stamp == stamp:
        files = current.files
    else:
        try:
            files = open_gemma(path)
        except ValueError as exc:
            raise InputRejected(str(exc)) from exc
    for lora, _ in loras:
        try:
            pairs = text_lora_pairs(lora, files.shapes)
        except ValueError as exc:
            raise InputRejected(str(exc)) from exc
        quantized = sorted({p.weight_key.rpartition(".")[0] for p in pairs} & set(files.quantized))
        if quantized:
            raise InputRejected(
                f"the LoRA {Path(lora).name} changes {len(quantized)} layers that {path.name} stores quantized "
                f"(e.g. {quantized[0]}); a text-encoder LoRA needs the bf16 Gemma file"
            )
    if current is None or current.stamp != stamp:  # NOTE [text room]: Gemma and its head load next
        _make_room(job, files, placement)
    projection = job.engine.text_head(job, files, request.projection)
    config = files.config
    if projection.in_features != config.feature_width:
        raise InputRejected(
            f"the text encoder {path.name} gives {config.num_hidden_states} hidden states of {config.hidden_size} "
            f"({config.feature_width} features) but the checkpoint's text projection takes {projection.in_features}. "
            "Pick the Gemma 3 12B text encoder that belongs to LTX-2 (for the tiny test model: the tiny Gemma)."
        )
    prompts, outputs = request.prompts, request.outputs
    for p, (ids, out) in enumerate(zip(prompts, outputs)):
        if not ids or min(ids) < 0 or max(ids) >= config.vocab_size:
            raise InputRejected(
                f"prompt {p} holds token ids outside 0..{config.vocab_size - 1} (or none): the tokenizer does not "
                f"belong to the text encoder {path.name}"
            )
        if tuple(out.shape) != (1, len(ids), projection.out_features) or out.dtype != torch.float32:
            raise InputRejected(
                f"output slot {p} is {list(out.shape)} {out.dtype}; expected [1, {len(ids)}, {projection.out_features}] float32"
            )
    return EncodeRequest(path, files, stamp, placement, projection, loras)


def _plan(job, files: GemmaFiles, dtype: torch.dtype, wanted: str) -> tuple[str, tuple[tuple[int, int], ...]]:
    """Placement and every rank's layer block; collective (free memory is gathered)."""
    config, world = files.config, job.world_size
    free = free_bytes(job)
    weights = files.size_bytes(dtype)
    placement = wanted
    if wanted == "auto":
        placement = "replicas" if weights * REPLICA_HEADROOM <= min(f for _, f in free) else "layers"
    if placement == "replicas" or world == 1:
        return placement, ((0, config.num_layers),) * world
    if world > config.num_layers:
        raise InputRejected(
            f"{world} ranks but the text encoder has {config.num_layers} layers; use placement 'replicas'"
        )
    if sum(f for _, f in free) < weights:
        raise InputRejected(_no_room(dtype, weights, free))
    if all(d == "cpu" for d, _ in free):  # one shared memory: split evenly
        return placement, split_layers(config.num_layers, [1] * world)
    ends = files.size_bytes(dtype, ["embed_tokens.weight"])
    capacities = [f - (ends if r == 0 else 0) for r, (_, f) in enumerate(free)]
    blocks = split_layers(config.num_layers, capacities)
    # NOTE [text room]: a block must fit its GPU with room to run (float32 casts of a layer's weights,
    # the hidden states); else the load would run out of memory beside the diffusion model.
    for (start, stop), capacity in zip(blocks, capacities, strict=True):
        if _block_bytes(files, dtype, start, stop) * LAYERS_HEADROOM > capacity:
            raise InputRejected(_no_room(dtype, weights, free))
    return placement, blocks


def _make_room(job, files: GemmaFiles, wanted: str) -> None:
    """NOTE [text room]: the text encoder loads beside the diffusion model. Natively ComfyUI's model
    management makes room for it; here the engine gives up what its weights option allows (offloaded:
    resident layers back to host memory) for this rank's share of Gemma with its working room. Local to
    the rank (each has its own device or memory cap); the plan then sees the room."""
    share = files.size_bytes(job.engine.text_dtype(files))
    if wanted != "replicas":
        share //= job.world_size
    moved = job.engine.make_room(job, int(share * LAYERS_HEADROOM) + TEXT_HEAD_ROOM)
    if moved:
        log.info("MGPU Text Encode: %s", moved)


# Room for LTX's text projection beside Gemma (LTX-2.3's is 2.15 GiB in bf16).
TEXT_HEAD_ROOM = 5 * 2**29

# NOTE [text room]: a layer block's working memory beside its weights (measured replicas need 1.23x at
# 2,048 tokens, bench/bench_text_encode.py; a block runs one prompt at a time, the same share).
LAYERS_HEADROOM = 1.25


def _block_bytes(files: GemmaFiles, dtype: torch.dtype, start: int, stop: int) -> int:
    keys = [k for k in files.shapes if k.startswith("layers.") and start <= int(k.split(".", 2)[1]) < stop]
    return files.size_bytes(dtype, keys)


def _no_room(dtype: torch.dtype, weights: int, free: list[tuple[str, int]]) -> str:
    per_rank = ", ".join(f"{d} {f / 2**30:.1f}" for d, f in free)
    return (
        f"MGPU Text Encode: the text encoder needs {weights / 2**30:.1f} GiB in {dtype} (split over the "
        f"{len(free)} workers, each block with {LAYERS_HEADROOM:.2f}x room to run), but the workers have "
        f"{per_rank} GiB free beside the loaded diffusion model. Use a quantized text encoder file (Gemma's "
        "fp8 or fp4 one), load the model with the MGPU Loader's weights offloaded (it gives up room to the "
        "text encoder) or layers (a smaller share per GPU), add GPUs, or free GPU memory "
        "(LTX2_MGPU_GPU_MEMORY_GIB, if set, caps each worker)"
    )


def _resident(job, request: EncodeRequest) -> tuple[ResidentEncoder, bool]:
    """The encoder this job runs on: the resident one when it matches, else loaded now (collective)."""
    rt = job.runtime
    files, stamp, wanted = request.files, request.stamp, request.placement
    dtype = job.engine.text_dtype(files)
    current: ResidentEncoder | None = rt.state.get(STATE_KEY)
    if current is not None and current.stamp == stamp and current.dtype == dtype:
        if wanted in ("auto", current.placement) or job.world_size == 1:  # one rank: both are the same
            return current, False
    rt.state.pop(STATE_KEY, None)
    current = None
    gc.collect()
    if rt.device.type == "cuda":
        torch.cuda.empty_cache()
    placement, blocks = _plan(job, files, dtype, wanted)
    start, stop = blocks[job.rank]
    segment = load_segment(files, start, stop, rt.device, dtype)
    apply_text_loras(segment, request.loras, files.shapes)  # quantized targets were refused in _validate
    encoder = ResidentEncoder(stamp, dtype, placement, blocks, files, segment)
    rt.state[STATE_KEY] = encoder
    return encoder, True


def _prompt(config, ids: list[int], device: torch.device) -> tuple[torch.Tensor, SequenceContext]:
    """The prompt's ids [1, n] and their context: only the prompt tokens run, at the positions
    ComfyUI's left padding gives them (NOTE [pads skipped] in gemma3.py)."""
    n = len(ids)
    return torch.tensor([ids], dtype=torch.long, device=device), SequenceContext.build(
        config, n, padded_length(n), device
    )


def _run_whole(encoder: ResidentEncoder, ids: list[int], device: torch.device) -> list[torch.Tensor]:
    tokens, context = _prompt(encoder.files.config, ids, device)
    states: list[torch.Tensor] = []
    encoder.segment(encoder.segment.embed(tokens), context, states)
    return states


def _encode_replicas(job, encoder: ResidentEncoder, prompts, outputs, head: TextHead) -> None:
    rank, world, device = job.rank, job.world_size, job.runtime.device
    rounds = -(-len(prompts) // world)
    for r in range(rounds):
        job.check_cancel()
        p = r * world + rank
        if p < len(prompts):
            outputs[p].copy_(head(_run_whole(encoder, prompts[p], device)))
        job.progress(min(len(prompts), (r + 1) * world), len(prompts))


def _send(tensor: torch.Tensor, dst: int) -> None:
    if tensor.is_cuda and dist.get_backend() == "gloo":  # gloo moves host memory (ranks sharing a GPU)
        tensor = tensor.cpu()
    dist.send(tensor.contiguous(), dst)


def _recv(shape: tuple[int, ...], src: int, device: torch.device) -> torch.Tensor:
    staged = device.type == "cuda" and dist.get_backend() == "gloo"
    buffer = torch.empty(shape, dtype=COMPUTE_DTYPE, device="cpu" if staged else device)
    dist.recv(buffer, src)
    return buffer.to(device)


def _encode_layers(job, encoder: ResidentEncoder, prompts, outputs, head: TextHead) -> None:
    rank, world, device = job.rank, job.world_size, job.runtime.device
    config, segment = encoder.files.config, encoder.segment
    for p, ids in enumerate(prompts):
        job.check_cancel()
        n = len(ids)
        tokens, context = _prompt(config, ids, device)
        if segment.has_embedding:
            x = segment.embed(tokens)
        else:
            x = _recv((1, n, config.hidden_size), rank - 1, device)
        states: list[torch.Tensor] = []
        x = segment(x, context, states)
        if rank < world - 1:
            _send(x, rank + 1)
        if rank > 0:
            _send(torch.stack(states), 0)
            continue
        for src in range(1, world):
            start, stop = encoder.blocks[src]
            count = stop - start + (1 if stop == config.num_layers else 0)
            states.extend(_recv((count, 1, n, config.hidden_size), src, device).unbind(0))
        outputs[p].copy_(head(states))
        job.progress(p + 1, len(prompts))


@op(EncodeText)
def encode_text(job, text_request: EncodeText) -> dict:
    request = _validate(job, text_request)
    began = time.perf_counter()
    encoder, loaded = _resident(job, request)
    load_s = time.perf_counter() - began
    began = time.perf_counter()
    run = _encode_replicas if encoder.placement == "replicas" or job.world_size == 1 else _encode_layers
    with torch.inference_mode():
        run(job, encoder, text_request.prompts, text_request.outputs, request.projection)
    return {
        "placement": encoder.placement,
        "layers": list(encoder.blocks[job.rank]),
        "loaded": loaded,
        "load_s": load_s,
        "encode_s": time.perf_counter() - began,
    }
