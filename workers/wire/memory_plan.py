"""The MGPU Loader's pre-flight: what each GPU would hold under each `weights` option, before any worker
loads a weight. Pure arithmetic on the file's safetensors header (tensor sizes) and the GPUs' sizes.

Per GPU: the model share (replicated: the whole diffusion model; offloaded: what must stay resident,
the weights outside the transformer blocks plus a few blocks of cast buffers; sharded: that plus
1/N of the blocks; layers: the weights outside the blocks plus the GPU's range of them, the ranges the
ranks hold: NOTE [layer ranges] in layer_ranges.py), the text encoder when it sits on that GPU, the
activations of one cond+uncond step at the loader's max_video_tokens (split over the GPUs by sequence
parallelism) and the runtime's own memory. Estimates, not measurements: every constant says where it came from.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .gguf_files import GGML_BLOCKS, GGML_FLOAT_TYPES, element_bytes
from .layer_ranges import balanced_ranges, range_bytes
from .weight_placement import (
    WEIGHT_PLACEMENTS,
    WEIGHTS_LAYERS,
    WEIGHTS_OFFLOADED,
    WEIGHTS_REPLICATED,
    WEIGHTS_SHARDED,
)

GIB = 2**30
# Bytes per element of the safetensors dtypes an LTX file stores.
SAFETENSORS_ITEM_BYTES = {"F64": 8, "F32": 4, "BF16": 2, "F16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "I8": 1, "U8": 1, "I32": 4, "I64": 8}  # fmt: skip
FLOAT_DTYPES = ("F32", "BF16", "F16")
# The loader's weight_dtype choices as bytes per element (float weights are cast to it on load;
# quantized ones keep their stored size, as ComfyUI keeps them).
WEIGHT_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
# Activations of one cond+uncond step (batch 2, audio with it), in bytes per video token on the GPU and
# video channel, at bf16. LTX-2.3 22B on one H200 peaked 58 bytes per token-channel above its weights
# (bench/results/ltx23_step_h200.json); with two SP workers 94 (1.2 GiB at 3,072 tokens a worker, 4.4
# GiB at 12,288: bench/results/weights_22b_h200_shared.json, replicated), the exchange buffers on top;
# an offloaded budget sized with 64 ran out of memory at 24,576 tokens under a 24 GiB cap. 96 covers both.
ACTIVATION_BYTES_PER_TOKEN_CHANNEL_BF16 = 96
# The worker's CUDA context, cuBLAS / cuDNN workspaces and allocator slack: not in PyTorch's count.
RUNTIME_BYTES_PER_GPU = 1 * GIB
# Blocks' worth of cast buffers an offloaded or sharded GPU needs beside its resident share (the block
# running and the next one being brought in).
IN_FLIGHT_BLOCKS = 2
# The loader's max_video_tokens step: the largest size that fits is rounded down to it.
TOKEN_STEP = 256
# Diffusion-model key prefixes inside a checkpoint (a diffusion-model-only file has none).
DIFFUSION_PREFIXES = ("model.diffusion_model.", "diffusion_model.")
NOT_DIFFUSION = (
    "vae.",
    "audio_vae.",
    "text_encoders.",
    "vocoder.",
    "cond_stage_model.",
    "first_stage_model.",
    # LTX's text projection: ComfyUI's text encoder reads it from the checkpoint (comfy/text_encoders/lt.py),
    # the diffusion model never holds it (2.15 GiB in LTX-2.3's checkpoint).
    "text_embedding_projection.",
)
# A quantized layer's scales (ComfyUI's weight_scale per tensor or per row, input_scale): sharded keeps
# them whole on every GPU (workers/engine/comfy/quantized_shards.py). `comfy_quant` entries are the
# layers' format, read at load and not kept.
QUANT_SCALE_SUFFIXES = (".weight_scale", ".weight_scale_2", ".input_scale")
QUANT_FORMAT_SUFFIX = ".comfy_quant"


@dataclass(frozen=True)
class ModelSizes:
    """Byte sizes of the diffusion model as it will sit in a worker (weight_dtype applied)."""

    blocks_bytes: int  # all transformer blocks
    largest_block_bytes: int
    other_bytes: int  # everything outside the blocks (embeddings, connectors, output stage)
    video_width: int  # video channels (the activations scale with it)
    block_scale_bytes: int = 0  # the blocks' quantization scales (whole on every GPU when sharded)
    num_blocks: int = 0
    gguf: bool = False  # GGML-quantized blocks (a GGUF file): sharded cannot split them
    # Each block's bytes in block order (num_blocks of them; empty when sizes were not read from a header).
    per_block_bytes: tuple[int, ...] = ()

    @property
    def total_bytes(self) -> int:
        return self.blocks_bytes + self.other_bytes


@dataclass(frozen=True)
class GpuNeed:
    """One GPU's figures under one option, bytes."""

    device: str
    capacity_bytes: int | None  # None: a CPU worker (host memory, not checked)
    model_bytes: int
    text_encoder_bytes: int
    activation_bytes: int
    runtime_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.model_bytes + self.text_encoder_bytes + self.activation_bytes + self.runtime_bytes

    @property
    def fits(self) -> bool:
        return self.capacity_bytes is None or self.total_bytes <= self.capacity_bytes


@dataclass(frozen=True)
class PreFlight:
    """The pre-flight of one load: `needs[option]` per GPU, the option `chosen`, the one `recommended`."""

    chosen: str
    max_video_tokens: int
    needs: Mapping[str, tuple[GpuNeed, ...]]
    recommended: str | None  # None: no served option fits
    host_bytes_per_worker: int  # offloaded keeps the whole model in every worker's host memory
    available: tuple[str, ...]
    why_not: Mapping[str, str] = field(default_factory=dict)  # an option not available: why
    layer_ranges: tuple[range, ...] = ()  # weights layers: each GPU's blocks, in GPU order (layer_ranges)

    def fits(self, option: str) -> bool:
        return all(need.fits for need in self.needs[option])

    def console_block(self) -> str:
        needs = self.needs[self.chosen]
        on_gpus = all(n.capacity_bytes is not None for n in needs)  # CPU workers have no device capacity
        workers = f"{len(needs)} {'GPUs' if on_gpus else 'CPU workers'}"
        lines = [f"pre-flight: weights {self.chosen}, max_video_tokens {self.max_video_tokens:,}, {workers}"]
        for need in self.needs[self.chosen]:
            lines.append(f"  {describe_need(need)}")
        per_option = ", ".join(
            f"{o} {gib(max(n.total_bytes for n in self.needs[o]))}"
            + ("" if o in self.available else f" ({self.why_not.get(o, 'not served')})")
            for o in WEIGHT_PLACEMENTS
        )
        lines.append(f"  per GPU: {per_option}; recommended: {self.recommended or 'none fits'}")
        if self.recommended is not None and self.recommended != WEIGHT_PLACEMENTS[0]:
            lines.append(f"  why: {self.why_recommended()}")
        if (
            self.recommended == WEIGHTS_OFFLOADED
            and WEIGHTS_LAYERS in self.available
            and self.fits(WEIGHTS_LAYERS)
        ):
            # offloaded comes first: its TDP tiles run on every GPU at once, where layers runs them one
            # after another; a step on one input is 1.8-3x faster under layers (docs/NODES.md).
            lines.append(
                "  layers fits too: faster than offloaded on the MODEL output and the SP Sampler "
                "(no copies from host memory each step); the TDP Upscaler runs its tiles one after another under it"
            )
        if on_gpus and not any(n.text_encoder_bytes for n in needs):
            # The loader does not know the text encoder: another node (MGPU Text Encode) picks and places it.
            lines.append(
                "  text encoder: not counted here; MGPU Text Encode places it by the GPUs' free memory when it runs"
            )
        if self.chosen == WEIGHTS_OFFLOADED:
            lines.append(
                f"  host memory: {gib(self.host_bytes_per_worker)} per worker (the whole model, cast in per call)"
            )
        if self.chosen == WEIGHTS_LAYERS:
            held = ", ".join(f"{r.start}-{r.stop - 1}" for r in self.layer_ranges)
            lines.append(
                f"  layers: each GPU holds a range of the blocks (blocks {held}, split to balance their bytes) "
                "and runs every token of it; the hidden states hand over once per range (no sequence "
                "parallelism: one GPU's speed, its memory split)"
            )
        if self.chosen == WEIGHTS_SHARDED:
            lines.append(
                "  sharded: one GPU per worker; serves every node (the GPUs gather each "
                "block's weights together, so one with less work waits for the others)"
            )
        return "\n".join(lines)

    def why_recommended(self) -> str:
        """Why the options before the recommended one (in the order of `plan`) were passed over."""
        passed = []
        for option in self.available[: self.available.index(self.recommended)]:
            worst = max(self.needs[option], key=lambda n: n.total_bytes - (n.capacity_bytes or 0))
            passed.append(
                f"{option} needs {gib(worst.total_bytes)} on {worst.device}, which has {gib(worst.capacity_bytes or 0)}"
            )
        unserved = [f"{o} ({self.why_not[o]})" for o in WEIGHT_PLACEMENTS if o in self.why_not]
        return "; ".join(passed + (["not served here: " + ", ".join(unserved)] if unserved else []))

    def summary(self) -> str:
        """One line for under the node: the chosen option's largest GPU need and the recommendation."""
        worst = max(self.needs[self.chosen], key=lambda n: n.total_bytes)
        return f"weights {self.chosen}: {gib(worst.total_bytes)} per GPU; recommended {self.recommended or 'none fits'}"


def gib(n: int) -> str:
    return f"{n / GIB:.1f} GiB"


def describe_need(need: GpuNeed) -> str:
    room = "host memory" if need.capacity_bytes is None else f"of {gib(need.capacity_bytes)}"
    verdict = "" if need.capacity_bytes is None else (": fits" if need.fits else ": does NOT fit")
    text = f" + text encoder {gib(need.text_encoder_bytes)}" if need.text_encoder_bytes else ""
    return (
        f"{need.device}: model {gib(need.model_bytes)}{text} + activations "
        f"{gib(need.activation_bytes)} + runtime {gib(need.runtime_bytes)} = {gib(need.total_bytes)} {room}{verdict}"
    )


def model_sizes(
    shapes: Mapping[str, Sequence[int]], dtypes: Mapping[str, str], weight_dtype: str
) -> ModelSizes:
    """The diffusion model's sizes from a safetensors header (shapes, dtypes), float weights at `weight_dtype`."""
    cast = WEIGHT_DTYPE_BYTES.get(weight_dtype, 2)
    blocks: dict[int, int] = {}
    other, width, scales, gguf = 0, 0, 0, False
    for key, shape in shapes.items():
        name = next((key[len(p) :] for p in DIFFUSION_PREFIXES if key.startswith(p)), key)
        if name.startswith(NOT_DIFFUSION) or name.endswith(QUANT_FORMAT_SUFFIX):
            continue
        stored = dtypes[key]
        scale = name.endswith(QUANT_SCALE_SUFFIXES)  # kept at its stored dtype, not cast
        if stored in GGML_BLOCKS and stored not in GGML_FLOAT_TYPES:
            size = math.ceil(math.prod(shape) * element_bytes(stored))  # GGUF: kept quantized (GGMLOps)
            gguf = gguf or name.startswith("transformer_blocks.")
        else:
            item = cast if stored in FLOAT_DTYPES and not scale else SAFETENSORS_ITEM_BYTES.get(stored, 2)
            size = math.prod(shape) * item
        if name.startswith("transformer_blocks."):
            index = int(name.split(".", 2)[1])
            blocks[index] = blocks.get(index, 0) + size
            scales += size if scale else 0
            if name.endswith("attn1.to_q.weight") and len(shape) == 2:
                width = int(shape[0])
        else:
            other += size
    each = tuple(blocks[i] for i in sorted(blocks))
    return ModelSizes(sum(each), max(each, default=0), other, width, scales, len(each), gguf, each)


def activation_bytes(sizes: ModelSizes, max_video_tokens: int, world_size: int, weight_dtype: str) -> int:
    """One cond+uncond step's activations on one GPU: the tokens are split over the GPUs (SP; under
    weights layers every GPU runs all tokens: pass world_size 1)."""
    per_rank = math.ceil(max_video_tokens / world_size)
    scale = WEIGHT_DTYPE_BYTES.get(weight_dtype, 2) / 2
    return int(per_rank * sizes.video_width * ACTIVATION_BYTES_PER_TOKEN_CHANNEL_BF16 * scale)


def layer_ranges(sizes: ModelSizes, world_size: int) -> tuple[range, ...]:
    """The blocks each of `world_size` ranks holds under weights layers, balanced by the blocks' bytes
    (NOTE [layer ranges]): the pre-flight and the ranks (engine/comfy/layer_split.py) both call this on
    the file's sizes, so the plan is what they hold. ValueError when there are fewer blocks than ranks."""
    return balanced_ranges(sizes.per_block_bytes, world_size)


def model_shares(sizes: ModelSizes, option: str, world_size: int) -> tuple[int, ...]:
    """What each GPU holds of the model under `option`, in rank order."""
    if option == WEIGHTS_LAYERS:  # everything outside the blocks and the rank's range of them
        if len(sizes.per_block_bytes) < world_size:  # not served (plan's why_not); the ranks would refuse
            return (sizes.total_bytes,) * world_size
        held = range_bytes(sizes.per_block_bytes, layer_ranges(sizes, world_size))
        return tuple(sizes.other_bytes + blocks for blocks in held)
    if option == WEIGHTS_REPLICATED:
        return (sizes.total_bytes,) * world_size
    in_flight = IN_FLIGHT_BLOCKS * sizes.largest_block_bytes
    if option == WEIGHTS_OFFLOADED:
        return (sizes.other_bytes + in_flight,) * world_size
    # 1/N of the blocks at their stored size (fp8 / int8 data one byte a weight), their scales whole.
    sharded = math.ceil((sizes.blocks_bytes - sizes.block_scale_bytes) / world_size) + sizes.block_scale_bytes
    return (sizes.other_bytes + sharded + in_flight,) * world_size


def plan(
    sizes: ModelSizes,
    devices: Sequence[str],
    capacities: Sequence[int | None],
    chosen: str,
    max_video_tokens: int,
    weight_dtype: str,
    *,
    text_encoder_bytes: Sequence[int] | None = None,
) -> PreFlight:
    """Every option's needs per GPU; `recommended` is the first served option that fits, in the order
    replicated (fastest), offloaded (serves every node), sharded (not on workers sharing a GPU, not for a
    GGUF), layers (2 or more workers)."""
    world = len(devices)
    cuda = [d for d in devices if d.startswith("cuda")]
    why_not = {}
    if len(set(cuda)) < len(cuda):
        why_not[WEIGHTS_SHARDED] = "not on shared GPUs"
    if sizes.gguf:
        why_not[WEIGHTS_SHARDED] = "not for GGUF files"
    if world < 2:
        why_not[WEIGHTS_LAYERS] = "2 or more workers"
    elif len(sizes.per_block_bytes) < world:
        why_not[WEIGHTS_LAYERS] = f"{len(sizes.per_block_bytes)} blocks for {world} workers"
    available = tuple(o for o in WEIGHT_PLACEMENTS if o not in why_not)
    text = list(text_encoder_bytes or [0] * world)
    needs = {}
    for option in WEIGHT_PLACEMENTS:
        shares = model_shares(sizes, option, world)
        split = 1 if option == WEIGHTS_LAYERS else world  # layers: no sequence parallelism
        activations = activation_bytes(sizes, max_video_tokens, split, weight_dtype)
        needs[option] = tuple(
            GpuNeed(
                device,
                capacity,
                shares[i],
                text[i],
                activations,
                0 if capacity is None else RUNTIME_BYTES_PER_GPU,
            )
            for i, (device, capacity) in enumerate(zip(devices, capacities))
        )
    fitting = [o for o in available if all(n.fits for n in needs[o])]
    return PreFlight(
        chosen,
        max_video_tokens,
        needs,
        fitting[0] if fitting else None,
        sizes.total_bytes,
        available,
        why_not,
        layer_ranges(sizes, world) if WEIGHTS_LAYERS in available else (),
    )


# What each option keeps in a GPU worker's host memory once loaded, and why.
HOST_KEEPS = {
    WEIGHTS_REPLICATED: "nothing once loaded",
    WEIGHTS_OFFLOADED: "the whole diffusion model, cast in per call",
    WEIGHTS_SHARDED: "the layers outside the blocks, cast in per call",
    WEIGHTS_LAYERS: "nothing once loaded",
}


def host_bytes(sizes: ModelSizes, option: str) -> int:
    """What one GPU worker keeps in host memory under `option` (HOST_KEEPS). Offloaded counts the whole
    model, as its resident part is only known once ComfyUI loads it: an upper bound."""
    kept = {WEIGHTS_REPLICATED: 0, WEIGHTS_OFFLOADED: sizes.total_bytes, WEIGHTS_SHARDED: sizes.other_bytes}
    return kept.get(option, 0)


def check_host(preflight: PreFlight, sizes: ModelSizes, available_bytes: int | None) -> None:
    """ValueError when the GPU workers' host memory under the chosen option exceeds what the host has
    available (`available_bytes`; None: unknown, not checked). CPU workers are not checked: the host
    is their device. Names the options that fit both the GPUs and the host."""
    needs = preflight.needs[preflight.chosen]
    if available_bytes is None or any(n.capacity_bytes is None for n in needs):
        return
    workers = len(needs)
    if host_bytes(sizes, preflight.chosen) * workers <= available_bytes:
        return
    fitting = [
        o
        for o in preflight.available
        if preflight.fits(o) and host_bytes(sizes, o) * workers <= available_bytes
    ]
    what = (
        f"weights {preflight.chosen} keeps {HOST_KEEPS[preflight.chosen]}, in every worker's host memory: "
        f"{gib(host_bytes(sizes, preflight.chosen))} per worker, {gib(host_bytes(sizes, preflight.chosen) * workers)} "
        f"for {workers} workers, but this machine has {gib(available_bytes)} available"
    )
    if fitting:
        raise ValueError(f"{what}. Set the loader's weights to {fitting[0]}, or free host memory")
    raise ValueError(f"{what}. Free host memory, or use fewer GPUs (each worker keeps its own copy)")


def check_plan(preflight: PreFlight, sizes: ModelSizes, weight_dtype: str) -> None:
    """ValueError when the chosen option does not fit: which option to change to, or, when none fits,
    the largest max_video_tokens that would."""
    if preflight.fits(preflight.chosen):
        return
    worst = max(
        (n for n in preflight.needs[preflight.chosen] if not n.fits),
        key=lambda n: n.total_bytes - (n.capacity_bytes or 0),
    )
    what = f"weights {preflight.chosen} needs {describe_need(worst)}"
    if preflight.recommended is not None:
        # The chosen option may still serve a smaller video (replicated is the fastest): say so too.
        keep = largest_tokens(preflight, sizes, weight_dtype, preflight.chosen)
        smaller = (
            f", or keep {preflight.chosen} and lower max_video_tokens to {keep:,} (and the video's size with it)"
            if keep is not None
            else ""
        )
        raise ValueError(f"{what}. Set the loader's weights to {preflight.recommended}{smaller}")
    largest = largest_tokens(preflight, sizes, weight_dtype)
    if largest is None:
        raise ValueError(
            f"{what}. No weights option fits these GPUs: even offloaded needs "
            f"{gib(max(n.total_bytes for n in preflight.needs[WEIGHTS_OFFLOADED]))} per GPU before activations grow; "
            "use GPUs with more memory or a smaller weight format (fp8)"
        )
    raise ValueError(
        f"{what}. No weights option fits max_video_tokens {preflight.max_video_tokens:,} on these GPUs; the largest "
        f"that fits is {largest:,} video tokens (weights {largest_option(preflight)}): lower max_video_tokens to "
        f"{largest:,} (and the video's size with it)"
    )


def largest_option(preflight: PreFlight) -> str:
    """The served option with the smallest model share (the one that leaves the most room)."""
    return min(preflight.available, key=lambda o: max(n.model_bytes for n in preflight.needs[o]))


def largest_tokens(
    preflight: PreFlight, sizes: ModelSizes, weight_dtype: str, option: str | None = None
) -> int | None:
    """The largest max_video_tokens (a multiple of TOKEN_STEP) that fits under `option` (default: the best
    served option); None when not even TOKEN_STEP does."""
    option = option or largest_option(preflight)
    needs = preflight.needs[option]
    world = 1 if option == WEIGHTS_LAYERS else len(needs)  # layers: every GPU runs all tokens
    room = min(
        n.capacity_bytes - n.model_bytes - n.text_encoder_bytes - n.runtime_bytes
        for n in needs
        if n.capacity_bytes is not None
    )
    one_token = activation_bytes(sizes, 1, 1, weight_dtype)  # one token's activations on one GPU
    tokens = (room * world // one_token) // TOKEN_STEP * TOKEN_STEP if one_token > 0 else 0
    while tokens >= TOKEN_STEP and activation_bytes(sizes, tokens, world, weight_dtype) > room:
        tokens -= TOKEN_STEP  # the split rounds a GPU's share up
    return tokens if tokens >= TOKEN_STEP else None
