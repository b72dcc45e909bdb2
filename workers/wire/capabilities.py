"""What each engine can do: the table the nodes read to refuse, before any work, an option that the
group's engine cannot honour (NOTE [engine seam] in workers/engine/protocol.py).

Pure: no engine, ComfyUI or ltx-core import (the UI side reads it). Each engine object carries its row
(`Engine.capabilities`) and tests/test_engine_seam.py holds the two against each other. The checks here
raise ValueError naming the option, what the engine can do instead, and what to change.
"""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from .backend import BACKEND_COMFY, BACKEND_LTXCORE
from .checks import ForwardMode, check_compilable, check_fp8_dtype, parse_dtype
from .model_family import LTX2, LTX23, LTX25
from .weight_placement import (
    WEIGHT_PLACEMENTS,
    WEIGHTS_LAYERS,
    WEIGHTS_OFFLOADED,
    WEIGHTS_REPLICATED,
    WEIGHTS_SHARDED,
)

# The extra that installs ltx-core with the pack (pyproject.toml [project.optional-dependencies]).
LTXCORE_EXTRA = "comfyui-ltx2-multigpu[ltxcore]"
# ComfyUI's fp8 matrix multiply needs compute capability 8.9 (Ada) or newer
# (comfy.model_management.supports_fp8_compute).
FP8_COMPUTE_CAPABILITY = (8, 9)
# Triton, which inductor writes GPU kernels in, runs on compute capability 7.0 (Volta) and newer.
TRITON_COMPUTE_CAPABILITY = (7, 0)
# File weight formats (wire/model_family.py ModelFamily.weight_format) fp8_matmul quantizes at load.
FLOAT_FORMATS = ("bf16", "fp16", "fp32")


@dataclass(frozen=True)
class EngineCapabilities:
    """One engine's row. commands: the worker commands it serves; families: the LTX releases its
    transformer runs; modes: the loader modes it computes; compile_placements: the weights options
    compile_blocks runs with; fp8_matmul_formats: the file weight formats fp8_matmul applies to;
    gguf_placements: the weights options a GGUF file loads with (the ComfyUI-GGUF pack's loader and ops;
    () none); text_projection_file: MGPU Text Encode reads LTX's text projection from a file other than
    the loaded one (its projection_file input); package: the Python package it needs beyond the pack's requirements ("" none);
    refusal: how a refusal of a command it lacks goes on ("<what> " + refusal)."""

    engine: str
    title: str
    commands: tuple[str, ...]
    families: tuple[str, ...]
    modes: tuple[str, ...]
    compile_blocks: bool
    compile_placements: tuple[str, ...]
    fp8_matmul_formats: tuple[str, ...]
    fp8_matmul_meaning: str
    gguf_placements: tuple[str, ...]
    tdp_preview: bool
    tdp_time_tiles: bool
    native_guider: bool
    guidance_groups: bool
    model_output: bool
    gemma4_text: bool
    text_projection_file: bool
    weight_placements: tuple[str, ...]
    cuda_graphs: bool
    package: str
    refusal: str

    def serves(self, command: str) -> bool:
        return command in self.commands


# The commands of workers/rank/ops_diagnostics.py: they touch no model, so every engine runs them.
DIAGNOSTICS = ("ping", "fault", "fill_pattern", "sum_input", "steps", "units")
_COMMON = ("load_model", "unload_model", "set_compiled", "sample", "tdp_upscale", "vae_decode", "vae_encode",
           "encode_text", "set_loras", "lora_state", *DIAGNOSTICS)  # fmt: skip

COMFY = EngineCapabilities(
    engine=BACKEND_COMFY,
    title="ComfyUI's engine",
    commands=(
        *_COMMON,
        "encode_gemma4",
        "comfy_model_call",
        "comfy_text_embeds",
        "comfy_load_random_model",
        "comfy_bench_step",
    ),
    families=(LTX2, LTX23, LTX25),
    modes=(ForwardMode.COMFYUI.value,),
    compile_blocks=True,
    # Weights cast in per call (offloaded) or gathered per block (sharded) run inside the blocks: not
    # compiled yet (untested), so compile_blocks is refused with them.
    compile_placements=(WEIGHTS_REPLICATED,),
    fp8_matmul_formats=FLOAT_FORMATS,
    fp8_matmul_meaning=(
        "the transformer's weights stored in fp8 e4m3 and multiplied in fp8 by ComfyUI's own fp8 ops, as "
        "UNETLoader's weight_dtype fp8_e4m3fn_fast runs them (files already in fp8 scaled, int8 or fp4 run "
        "their own quantized kernels without it)"
    ),
    # GGUF: the pack's GGML tensors, dequantized per layer as it runs. Not sharded: FSDP2 would split the
    # blocks' packed bytes, a layout it cannot take.
    gguf_placements=(WEIGHTS_REPLICATED, WEIGHTS_OFFLOADED, WEIGHTS_LAYERS),
    tdp_preview=True,
    tdp_time_tiles=True,
    native_guider=True,
    guidance_groups=True,
    model_output=True,
    gemma4_text=True,
    text_projection_file=True,
    weight_placements=WEIGHT_PLACEMENTS,
    cuda_graphs=True,
    package="",
    refusal="runs on the ltx-core engine only: load the model with mode reference (ltx-core installed)",
)

LTXCORE = EngineCapabilities(
    engine=BACKEND_LTXCORE,
    title="the ltx-core engine",
    commands=(*_COMMON, "forward", "load_random_model", "bench_forward"),
    families=(LTX2,),
    modes=tuple(m.value for m in ForwardMode),
    compile_blocks=True,
    compile_placements=(WEIGHTS_REPLICATED,),
    # An fp8 scaled file otherwise runs folded into bf16 on ltx-core: the option keeps its fp8 weights.
    fp8_matmul_formats=(*FLOAT_FORMATS, "fp8 e4m3 scaled"),
    fp8_matmul_meaning=(
        "the block linears held in fp8 with one scale each and multiplied in fp8 by torch._scaled_mm "
        "(workers/engine/ltxcore/fp8_linear.py)"
    ),
    gguf_placements=(),
    tdp_preview=True,
    # ltx-core's tiles keep their place in the whole video's positions: a span of frames would not.
    tdp_time_tiles=False,
    native_guider=False,
    guidance_groups=False,
    model_output=False,
    gemma4_text=False,
    # Its text head is the loaded checkpoint's own projection module (LTX-2 19B files all carry one).
    text_projection_file=False,
    weight_placements=(WEIGHTS_REPLICATED,),
    cuda_graphs=False,
    package="ltx_core",
    refusal=(
        "runs on ComfyUI's engine only: load the model inside ComfyUI (or with COMFYUI_PATH set) with mode "
        "comfyui"
    ),
)

CAPABILITIES = {COMFY.engine: COMFY, LTXCORE.engine: LTXCORE}


def capabilities(engine: str) -> EngineCapabilities:
    if engine not in CAPABILITIES:
        raise ValueError(f"engine {engine!r} is not one of {', '.join(CAPABILITIES)}")
    return CAPABILITIES[engine]


def check_installed(caps: EngineCapabilities) -> None:
    """ValueError when the engine's package is not installed in this Python (found without importing it)."""
    if caps.package and importlib.util.find_spec(caps.package) is None:
        raise ValueError(
            f"{caps.title} needs the Python package {caps.package.replace('_', '-')}, which is not installed: "
            f"pip install '{LTXCORE_EXTRA}' (or ltx-core==1.0.0) into this Python, or run the model on "
            "ComfyUI's engine (inside ComfyUI, or with COMFYUI_PATH set, mode comfyui)"
        )


@dataclass(frozen=True)
class LoaderOptions:
    """What the MGPU Loader was asked for, as the capability checks read it. weight_format: the file's
    (ModelFamily.weight_format); devices: the group's ("cpu", "cuda:0", ...); gguf: the file is a GGUF."""

    file_name: str
    family: str
    weight_format: str
    mode: str
    weight_dtype: str
    compile_blocks: bool
    fp8_matmul: bool
    weights: str
    guidance_groups: int
    devices: tuple[str, ...]
    gguf: bool = False


def check_loader_options(caps: EngineCapabilities, options: LoaderOptions) -> None:
    """Refuse (ValueError) an option `caps`' engine cannot honour for this file on these devices."""
    check_installed(caps)
    if options.family not in caps.families:
        raise ValueError(
            f"{options.file_name} is {options.family}; {caps.title} runs {', '.join(caps.families)} only. "
            f"{_other_engine(caps)}"
        )
    if options.gguf:
        check_gguf_options(caps, options)
    if options.weights not in caps.weight_placements:
        raise ValueError(
            f"weights {options.weights} is not served by {caps.title} (it serves "
            f"{', '.join(caps.weight_placements)}); set weights to replicated. {_other_engine(caps)}"
        )
    if options.guidance_groups > 1 and not caps.guidance_groups:
        raise ValueError(
            f"guidance_parallel is not served by {caps.title}; set guidance_parallel to auto or off. "
            f"{_other_engine(caps)}"
        )
    if options.guidance_groups > 1 and options.weights == WEIGHTS_LAYERS:
        raise ValueError(
            f"guidance_parallel {options.guidance_groups} splits the GPUs into groups running different passes, "
            "but weights layers needs every GPU in every forward (each holds a range of the blocks); set "
            "guidance_parallel to off, or weights to another option"
        )
    if options.compile_blocks:
        check_compile_blocks(caps, ForwardMode(options.mode), options.devices)
        if options.weights not in caps.compile_placements:
            raise ValueError(
                f"compile_blocks runs with weights {' or '.join(caps.compile_placements)} on {caps.title}; "
                f"weights {options.weights} {_INSIDE_BLOCKS.get(options.weights, 'is not compiled yet')}. Turn "
                "compile_blocks off, or set weights to replicated"
            )
    if options.fp8_matmul:
        check_fp8_matmul(caps, options.weight_format, options.weight_dtype, options.devices)


# What a weights option does inside the blocks that compile_blocks has not been tested with.
_INSIDE_BLOCKS = {
    WEIGHTS_OFFLOADED: "casts the blocks' weights in inside them",
    WEIGHTS_SHARDED: "gathers each block's weights inside it",
    WEIGHTS_LAYERS: "hands the activations over between GPUs inside the blocks",
}


def check_gguf_placement(caps: EngineCapabilities, file_name: str, weights: str) -> None:
    """A GGUF file on this engine with this weights option (ValueError naming the file and what to change).
    The ComfyUI-GGUF pack beside ComfyUI is checked apart (gguf_pack.require_gguf_pack)."""
    if not caps.gguf_placements:
        raise ValueError(
            f"{file_name} is a GGUF file, which the workers load with ComfyUI's model stack and the ComfyUI-GGUF "
            f"pack; {caps.title} does not read it: run it inside ComfyUI (or with COMFYUI_PATH set), mode comfyui"
        )
    if weights not in caps.gguf_placements:
        raise ValueError(
            f"{file_name} is a GGUF file, whose quantized blocks weights {weights} cannot split; set the "
            f"loader's weights to {' or '.join(caps.gguf_placements)}"
        )


def check_gguf_options(caps: EngineCapabilities, options: LoaderOptions) -> None:
    """check_gguf_placement, then the speed options a GGUF file does not take."""
    check_gguf_placement(caps, options.file_name, options.weights)
    if options.fp8_matmul:
        raise ValueError(
            f"fp8_matmul stores a float file's weights in fp8 at load; {options.file_name} is a GGUF file, "
            f"quantized already ({options.weight_format}), which the ComfyUI-GGUF pack dequantizes per layer as "
            "it runs. Turn fp8_matmul off: the file's own format is what runs (or pick the release's bf16 file "
            "to use fp8_matmul)"
        )
    if options.compile_blocks:
        raise ValueError(
            f"compile_blocks is not served with GGUF files: {options.file_name}'s layers are the ComfyUI-GGUF "
            "pack's, which dequantize their GGML blocks per call and have not been compiled here. Turn "
            "compile_blocks off"
        )


def check_compile_blocks(caps: EngineCapabilities, mode: ForwardMode, devices: Sequence[str]) -> None:
    """compile_blocks on this engine, mode and devices (ValueError saying what to change)."""
    if not caps.compile_blocks:
        raise ValueError(f"compile_blocks is not served by {caps.title}; turn it off. {_other_engine(caps)}")
    if caps.engine == BACKEND_LTXCORE:
        check_compilable(
            mode
        )  # ltx-core's own block order reads its block index: it would recompile per block
    if any(d == "cpu" for d in devices) and not has_cxx_compiler():
        raise ValueError(
            "compile_blocks on CPU workers needs a C++ compiler (g++, c++ or clang++ on PATH), which torch's "
            "inductor builds the compiled blocks with; install one or turn compile_blocks off"
        )
    gpus = list(dict.fromkeys(d for d in devices if d.startswith("cuda")))
    if gpus and importlib.util.find_spec("triton") is None:
        raise ValueError(
            "compile_blocks on GPUs needs Triton, which torch's inductor writes the compiled blocks in, and this "
            "Python has none: install the triton that matches your torch, or turn compile_blocks off"
        )
    for device in gpus:
        if torch.cuda.get_device_capability(torch.device(device)) < TRITON_COMPUTE_CAPABILITY:
            raise ValueError(
                f"compile_blocks needs a GPU of compute capability 7.0 or newer (Triton's); {device} "
                f"({torch.cuda.get_device_name(torch.device(device))}) is older: turn compile_blocks off"
            )


def has_cxx_compiler() -> bool:
    return any(shutil.which(name) for name in ("c++", "g++", "clang++"))


def check_fp8_matmul(
    caps: EngineCapabilities, weight_format: str, weight_dtype: str, devices: Sequence[str]
) -> None:
    """fp8_matmul on this file, weight dtype and devices (ValueError naming what to change). CPU workers
    take it (the weights are stored in fp8 and multiplied in a wider dtype: for testing)."""
    parts = weight_format.removesuffix(" (mixed)").split(" + ")  # ModelFamily.weight_format's form
    if not set(parts) <= set(caps.fp8_matmul_formats):
        raise ValueError(
            f"fp8_matmul means {caps.fp8_matmul_meaning}; this file's transformer is already stored as "
            f"{weight_format}, which it does not apply to (it applies to {', '.join(caps.fp8_matmul_formats)} "
            "files). Turn fp8_matmul off: the file's own format is what runs"
        )
    check_fp8_dtype(parse_dtype(weight_dtype))
    for device in dict.fromkeys(d for d in devices if d.startswith("cuda")):
        capability = torch.cuda.get_device_capability(torch.device(device))
        if capability < FP8_COMPUTE_CAPABILITY:
            major, minor = capability
            raise ValueError(
                f"fp8_matmul needs a GPU with fp8 matrix multiplies (compute capability 8.9 or newer: Ada, Hopper, "
                f"Blackwell); {device} ({torch.cuda.get_device_name(torch.device(device))}) is {major}.{minor}. "
                "Turn fp8_matmul off, or pick GPUs that have them"
            )


def check_tdp_preview(caps: EngineCapabilities, preview: str, off: str) -> None:
    """The TDP Upscaler's preview modes on this engine (ValueError naming what to change)."""
    if preview != off and not caps.tdp_preview:
        raise ValueError(
            f"the TDP Upscaler's preview {preview!r} is not served by {caps.title}; set preview to {off}"
        )


def check_tdp_time_tiles(caps: EngineCapabilities, time_tiles: int, frames: int) -> None:
    """The TDP Upscaler's spans of frames (NOTE [time tiles]) on this engine; ValueError naming what to
    change."""
    if time_tiles > 1 and not caps.tdp_time_tiles:
        raise ValueError(
            f"the upscaled clip of {frames} latent frames would be cut into {time_tiles} spans of frames, which "
            f"{caps.title} does not serve; set time_tiles to 1 (every tile holds the whole clip). "
            + _other_engine(caps)
        )


def check_native_guider(caps: EngineCapabilities, what: str) -> None:
    """A native GUIDER (or guidance groups) on this engine (ValueError naming what to change)."""
    if not caps.native_guider:
        raise ValueError(f"{what} {caps.refusal}; or connect positive and negative instead of a GUIDER")


def _other_engine(caps: EngineCapabilities) -> str:
    if caps.engine == BACKEND_COMFY:
        return "The ltx-core engine (mode reference) serves LTX-2 only, with weights replicated."
    return (
        "ComfyUI's engine serves every LTX release and option: load the model inside ComfyUI (or with "
        "COMFYUI_PATH set) with mode comfyui."
    )
