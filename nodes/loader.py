"""MGPU Loader: pick a checkpoint, the GPUs and the weight dtype; start the group and load the model."""

from __future__ import annotations

from pathlib import Path

from ..workers.group import console
from ..workers.group.launcher import PACK_ROOT, parse_devices
from ..workers.group.manager import MGPUModel
from ..workers.group.preflight import preflight
from ..workers.strategies.guidance_plan import plan_guidance
from ..workers.wire.backend import BACKEND_COMFY, BACKEND_LTXCORE, choose_backend
from ..workers.wire.checks import DTYPES, ForwardMode
from ..workers.wire.constants import DEFAULT_MAX_VIDEO_TOKENS
from ..workers.wire.file_pairing import check_comfy_readable, check_vae_is_not_a_checkpoint
from ..workers.wire.ltx_files import check_vae_files, read_model_file_info
from ..workers.wire.model_family import ModelFamily, check_ltxcore_serves, detect_model_family
from ..workers.wire.weight_placement import (
    WEIGHT_PLACEMENTS,
    WEIGHTS_OFFLOADED,
    WEIGHTS_REPLICATED,
    check_weights,
)
from . import comfy, jobs
from .mgpu_lora import NO_LORA, lora_entry, strength_input

CATEGORY = "LTX-2 MultiGPU"
MODEL_FOLDERS = ("checkpoints", "diffusion_models")
# The VAE inputs' first choice: the VAE inside the checkpoint (LTX-2, LTX-2.3 single files).
FROM_CHECKPOINT = "(from the checkpoint)"
# guidance_parallel choices -> MGPUModel.guidance_groups (0: the plan's choice per job).
GUIDANCE_CHOICES = {"auto": 0, "off": 1, "2": 2, "3": 3, "4": 4, "8": 8}


class LTX2MGPULoader:
    DESCRIPTION = (
        "Starts one worker process per GPU (or reuses the running ones) and loads the LTX checkpoint in each "
        "(LTX-2, LTX-2.3). Connect its MGPU_MODEL to the SP Sampler, TDP Upscaler and Distributed VAE Decode. "
        "The release and weight format it found are shown under the node and on the console. Its MODEL goes to "
        "ComfyUI's own samplers (KSampler, SamplerCustomAdvanced with any guider): every model call then "
        "runs on the worker group, split over its GPUs."
    )
    CATEGORY = CATEGORY
    # MODEL is appended last so saved workflows keep their links (tests/test_node_contract.py).
    RETURN_TYPES = ("MGPU_MODEL", "MODEL", "STRING")
    RETURN_NAMES = ("mgpu_model", "model", "model_info")
    OUTPUT_TOOLTIPS = (
        "For this pack's nodes (SP Sampler, TDP Upscaler, Distributed VAE).",
        "For ComfyUI's samplers and guiders: the diffusion model runs in the worker group (LoRAs: lora_name).",
        "What was detected: the LTX release, the weight format and where the VAEs come from.",
    )
    FUNCTION = "load"

    @classmethod
    def INPUT_TYPES(cls) -> dict:
        names = sorted({n for folder in MODEL_FOLDERS for n in comfy.filename_list(folder)})
        return {
            "required": {
                "ckpt_name": (
                    names,
                    {
                        "tooltip": "The LTX checkpoint (ComfyUI's checkpoints or diffusion_models folder): LTX-2 "
                        "19B or LTX-2.3 22B, bf16 or fp8; or LTX-2.5's diffusion model (with its VAE files in "
                        "video_vae_name / audio_vae_name). The release and weight format found are shown under the node."
                    },
                ),
                "gpus": (
                    "STRING",
                    {
                        "default": "all",
                        "tooltip": "Which GPUs run workers: 'all', a count such as '2', or ids such as '0,1,3'. "
                        "Saved workflows keep 'all' or the count, so they run on machines with other GPU counts.",
                    },
                ),
                "weight_dtype": (
                    list(DTYPES),
                    {"default": "bfloat16", "tooltip": "Dtype of the weights in every worker."},
                ),
            },
            "optional": {
                "max_video_tokens": (
                    "INT",
                    {
                        "default": DEFAULT_MAX_VIDEO_TOKENS,
                        "min": 256,
                        "max": 262144,
                        "step": 256,
                        "tooltip": "Refuse latents with more video tokens than this (frames/8 x height/32 x width/32).",
                    },
                ),
                "mode": (
                    [m.value for m in ForwardMode],
                    {
                        "default": ForwardMode.COMFYUI.value,
                        "tooltip": "comfyui: compute exactly what native ComfyUI computes for LTX-2 (same video as the "
                        "native nodes). reference: Lightricks' ltx-core forward (differs in video-to-audio attention).",
                    },
                ),
                "lora_name": (
                    [NO_LORA, *comfy.filename_list("loras")],
                    {
                        "default": NO_LORA,
                        "tooltip": "A LoRA fused into the model for every node that uses this output. For one "
                        "branch only (stage 2's distilled LoRA), use MGPU LoRA after this node instead.",
                    },
                ),
                "lora_strength": strength_input("Strength of lora_name; 0 leaves the model unchanged."),
                "compile_blocks": (
                    "BOOLEAN",
                    {
                        "default": False,
                        "tooltip": "torch.compile the transformer blocks in every worker (mode comfyui only). "
                        "The first run at a new resolution compiles for 17-23 s (an H200 machine); later steps run faster "
                        "(measured gain in the README). Same results within float rounding.",
                    },
                ),
                "fp8_matmul": (
                    "BOOLEAN",
                    {
                        "default": False,
                        "tooltip": "Keep the transformer blocks' linear layers in fp8 and multiply in fp8 "
                        "(Hopper/Ada GPUs, weight_dtype bfloat16): 16 GB less memory per GPU for the 19B, and "
                        "faster together with compile_blocks. Results differ slightly from bf16 (fp8 rounding).",
                    },
                ),
                "video_vae_name": (
                    [FROM_CHECKPOINT, *comfy.filename_list("vae")],
                    {
                        "default": FROM_CHECKPOINT,
                        "tooltip": "The video VAE file when it is separate from the model (LTX-2.5: "
                        "ltx-2.5-video-vae), for Distributed VAE Decode/Encode and the TDP Upscaler.",
                    },
                ),
                "audio_vae_name": (
                    [FROM_CHECKPOINT, *comfy.filename_list("vae")],
                    {
                        "default": FROM_CHECKPOINT,
                        "tooltip": "The audio VAE file when it is separate from the model (LTX-2.5: "
                        "ltx-2.5-audio-vae), for the audio of Distributed VAE Decode.",
                    },
                ),
                "guidance_parallel": (
                    list(GUIDANCE_CHOICES),
                    {
                        "default": "off",
                        "tooltip": "How the SP Sampler (and this MODEL's batched calls) spread a step's guidance "
                        "passes (cond, uncond, STG, modality) over the GPUs: off = every pass over all GPUs in "
                        "turn; 2 / 4 / 8 = that many groups, each running its passes over its share of the GPUs "
                        "(e.g. 4 GPUs: 2 groups x 2); auto = the plan printed on the console. Same video either way.",
                    },
                ),
                "weights": (
                    list(WEIGHT_PLACEMENTS),
                    {
                        "default": WEIGHTS_REPLICATED,
                        "tooltip": "Where each GPU keeps the diffusion model: replicated = a whole copy per GPU "
                        "(fastest); offloaded = each GPU keeps what fits and casts the other layers in from host "
                        "memory per step (for GPUs too small for a copy; slower; needs host memory for a copy per "
                        "GPU); sharded = each GPU keeps 1/N of every block and gathers a block just before it runs "
                        "(one GPU per worker; every node). The "
                        "console's pre-flight shows what fits. Same video either way.",
                    },
                ),
            },
            "hidden": {"unique_id": "UNIQUE_ID"},
        }

    def load(
        self,
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
        unique_id=None,
    ):
        path = comfy.full_path(MODEL_FOLDERS, ckpt_name)
        header = check_comfy_readable(path)  # refuses files ComfyUI cannot read before any worker starts
        found = detect_model_family(header.shapes, header.dtypes, header.metadata)
        video_vae = (
            "" if video_vae_name == FROM_CHECKPOINT else str(comfy.full_path(("vae",), video_vae_name))
        )
        audio_vae = (
            "" if audio_vae_name == FROM_CHECKPOINT else str(comfy.full_path(("vae",), audio_vae_name))
        )
        for role, vae in (("video", video_vae), ("audio", audio_vae)):
            check_vae_is_not_a_checkpoint(path, found.family, vae, role)
        check_vae_files(read_model_file_info(path), video_vae, audio_vae)
        placement = parse_devices(gpus)
        guidance_groups = guidance_group_count(guidance_parallel, placement.world_size)
        # Inside ComfyUI, mode "comfyui" runs ComfyUI's own model stack in the workers; an unusable
        # ComfyUI named by COMFYUI_PATH is refused here, before any worker starts.
        ltxcore_only = tuple(
            name
            for name, on in (
                ("compile_blocks", compile_blocks),
                ("fp8_matmul", fp8_matmul),
            )
            if on
        )
        backend = choose_backend(PACK_ROOT, mode=mode, ltxcore_only=ltxcore_only)
        if backend.backend == BACKEND_LTXCORE:
            check_ltxcore_serves(found, path.name)
            if guidance_groups > 1:
                raise ValueError(
                    "guidance_parallel runs on ComfyUI's model stack in the workers (mode comfyui, compile_blocks "
                    "and fp8_matmul off); set guidance_parallel to auto or off for this model"
                )
        check_weights(weights, backend_is_comfy=backend.backend == BACKEND_COMFY)
        # Before any worker loads a weight: per GPU what the option needs, refused when it does not fit.
        plan, reserve_bytes = preflight(
            header.shapes, header.dtypes, placement.devices, weights, max_video_tokens, weight_dtype
        )
        report_family(path.name, found, backend.backend, unique_id, plan.summary())
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
        jobs.load(model, node_id=unique_id)
        return (model, model_output(model), description)


def guidance_group_count(choice: str, world_size: int) -> int:
    """The loader's guidance_parallel choice as MGPUModel.guidance_groups (0 = planned per job)."""
    if choice not in GUIDANCE_CHOICES:
        raise ValueError(f"guidance_parallel {choice!r} is not one of {', '.join(GUIDANCE_CHOICES)}")
    groups = GUIDANCE_CHOICES[choice]
    if groups > 1:
        plan_guidance(world_size, groups, groups)  # ValueError naming the counts that divide the GPUs
    return groups


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


NODE_CLASSES = {"LTX2MGPULoader": (LTX2MGPULoader, "MGPU Loader")}
