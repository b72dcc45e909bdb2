"""MGPU Loader: pick a checkpoint, the GPUs and the weight dtype; start the group and load the model."""

from __future__ import annotations

from pathlib import Path

from ..workers.group import console
from ..workers.group.launcher import PACK_ROOT, Placement, parse_devices
from ..workers.group.manager import MGPUModel
from ..workers.group.preflight import preflight
from ..workers.strategies.guidance_plan import plan_guidance
from ..workers.wire.backend import choose_backend
from ..workers.wire.capabilities import LoaderOptions, capabilities, check_loader_options
from ..workers.wire.checks import ForwardMode
from ..workers.wire.constants import DEFAULT_MAX_VIDEO_TOKENS
from ..workers.wire.gguf_checks import check_gguf_loadable
from ..workers.wire.gguf_files import is_gguf_file
from ..workers.wire.loader_files import check_loader_files
from ..workers.wire.machines import listen_address, machine_guidance_groups
from ..workers.wire.model_family import ModelFamily
from ..workers.wire.weight_placement import WEIGHTS_OFFLOADED, WEIGHTS_REPLICATED
from . import comfy, jobs
from .mgpu_lora import NO_LORA, lora_entry

CATEGORY = "LTX-2 MultiGPU"
MODEL_FOLDERS = ("checkpoints", "diffusion_models")
# The .gguf files of diffusion_models (and unet), as the ComfyUI-GGUF pack lists them for its UnetLoaderGGUF;
# unknown to a ComfyUI without that pack.
GGUF_FOLDER = "unet_gguf"
# The VAE inputs' first choice: the VAE inside the checkpoint (LTX-2, LTX-2.3 single files).
FROM_CHECKPOINT = "(from the checkpoint)"
# guidance_parallel choices -> MGPUModel.guidance_groups (0: the plan's choice per job).
GUIDANCE_CHOICES = {"auto": 0, "off": 1, "2": 2, "3": 3, "4": 4, "8": 8}


def load_model(
    ckpt_name: str,
    gpus: str,
    weight_dtype: str,
    max_video_tokens: int = DEFAULT_MAX_VIDEO_TOKENS,
    mode: str = ForwardMode.COMFYUI.value,
    lora_name: str = NO_LORA,
    lora_strength: float = 1.0,
    compile_blocks: bool = False,
    fp8_matmul: bool = False,
    video_vae_name: str = FROM_CHECKPOINT,
    audio_vae_name: str = FROM_CHECKPOINT,
    guidance_parallel: str = "off",
    weights: str = WEIGHTS_REPLICATED,
    node_id: str | None = None,
) -> tuple[MGPUModel, object, str]:
    """MGPU Loader: start (or reuse) the group for `ckpt_name` and load it. Returns the MGPU_MODEL, ComfyUI's
    MODEL run by the group (None outside ComfyUI) and the line describing what was found. Raises
    ValueError naming the input to change before any worker starts."""
    path = comfy.full_path(MODEL_FOLDERS, ckpt_name)
    video_vae = "" if video_vae_name == FROM_CHECKPOINT else str(comfy.full_path(("vae",), video_vae_name))
    audio_vae = "" if audio_vae_name == FROM_CHECKPOINT else str(comfy.full_path(("vae",), audio_vae_name))
    # Refuses, before any worker starts, what ComfyUI's loaders refuse or what does not fit; what only a
    # file's layout hints at is a warning (NOTE [file metadata] in workers/wire/file_metadata.py).
    picked = check_loader_files(path, video_vae, audio_vae)
    header, found = picked.header, picked.family
    for warning in picked.warnings:
        console.warning(warning)
    placement = parse_devices(gpus)
    if placement.machines:
        listen_address()  # other machines join only where LTX2_MGPU_LISTEN says: ValueError naming it
    guidance_groups = guidance_group_count(guidance_parallel, placement)
    # Inside ComfyUI, mode "comfyui" runs ComfyUI's own model stack in the workers; an unusable
    # ComfyUI named by COMFYUI_PATH is refused here, before any worker starts. What the chosen engine
    # cannot honour is refused from its capability table (NOTE [engine seam]).
    backend = choose_backend(PACK_ROOT, mode=mode)
    options = LoaderOptions(
        file_name=path.name, family=found.family, weight_format=found.weight_format, mode=mode,
        weight_dtype=weight_dtype, compile_blocks=bool(compile_blocks), fp8_matmul=bool(fp8_matmul),
        weights=weights, guidance_groups=guidance_groups, devices=placement.devices, gguf=is_gguf_file(path),
    )  # fmt: skip
    check_loader_options(capabilities(backend.backend), options)  # GGUF files' rows too
    check_gguf_loadable(path, backend.backend, backend.root_path, weights)  # GGUF: the ComfyUI-GGUF pack
    # Before any worker loads a weight: per GPU what the option needs, refused when it does not fit.
    try:
        plan, reserve_bytes = preflight(
            header.shapes, header.dtypes, placement.devices, weights, max_video_tokens, weight_dtype
        )
    except ValueError as exc:  # what does not fit, named with the file and what it is
        raise ValueError(f"{path.name} ({found.describe()}): {exc}") from exc
    report_family(path.name, found, backend.backend, node_id, plan.summary())
    model = MGPUModel(
        checkpoint=str(path),
        dtype=weight_dtype,
        devices=placement.devices,
        max_video_tokens=max_video_tokens,
        mode=mode,
        loras=lora_entry(str(path), lora_name, lora_strength),
        compile_blocks=bool(compile_blocks),
        fp8_matmul=bool(fp8_matmul),
        backend=backend.backend,
        comfyui_root=backend.root_path,
        comfyui_version=backend.root_version,
        video_vae=video_vae,
        audio_vae=audio_vae,
        family=found.family,
        guidance_groups=guidance_groups,
        weights=weights,
        # The room an offloaded GPU leaves for the step; replicated and sharded do not use it.
        reserve_bytes=reserve_bytes if weights == WEIGHTS_OFFLOADED else 0,
    )
    # Also an output: what was found, with the separate VAE files (LTX-2.5).
    description = (
        f"{path.name}: {found.describe()}"
        + "".join(
            f"; {kind} VAE {Path(file).name}"
            for kind, file in (("video", video_vae), ("audio", audio_vae))
            if file
        )
        + f"; {plan.summary()}"
    )
    jobs.load(model, node_id=node_id)
    return (model, model_output(model), description)


def model_file_choices() -> list[str]:
    """The files the checkpoint picker lists: ComfyUI's checkpoints and diffusion_models folders (and their
    .gguf files when the ComfyUI-GGUF pack is installed)."""
    return sorted({name for folder in (*MODEL_FOLDERS, GGUF_FOLDER) for name in comfy.filename_list(folder)})


def guidance_group_count(choice: str, placement: Placement) -> int:
    """The loader's guidance_parallel choice as MGPUModel.guidance_groups (0 = planned per job; on a
    group that spans machines, a group per machine: NOTE [machines])."""
    if choice not in GUIDANCE_CHOICES:
        raise ValueError(f"guidance_parallel {choice!r} is not one of {', '.join(GUIDANCE_CHOICES)}")
    groups = GUIDANCE_CHOICES[choice]
    if groups > 1:
        plan_guidance(
            placement.world_size, groups, groups
        )  # ValueError naming the counts that divide the GPUs
    return machine_guidance_groups(placement.devices, groups)


def model_output(model: MGPUModel):
    """ComfyUI's MODEL for `model`, run by the group; None outside ComfyUI or for a file ComfyUI cannot
    place (the MGPU_MODEL output still serves; the console says why)."""
    if not comfy.in_comfyui():
        return None
    try:
        from .group_model.model import build_group_model

        return build_group_model(model)
    except (ValueError, ImportError) as exc:  # ImportError: a ComfyUI without the model side we use
        console.warning(f"the loader's MODEL output is not available: {exc}")
        return None


def report_family(file_name: str, found: ModelFamily, backend: str, node_id, memory: str = "") -> None:
    """What the loader found, on the console and under the node in ComfyUI's graph (with the
    pre-flight's memory line under the node: the console has the whole block)."""
    line = f"{file_name}: {found.describe()} (backend {backend})"
    console.info(line)
    comfy.show_node_text(f"{line}\n{memory}" if memory else line, node_id)
