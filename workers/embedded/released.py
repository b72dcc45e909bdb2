"""make-tiny's layout: each tiny file under the name, and in the ComfyUI folder, of the released file it
stands for, so the official templates (comfyui-workflow-templates-json: video_ltx2_3_*, video_ltx2_5_*)
and this pack's example workflows find every file they name with no renaming.

A name is a slot, not a format: `ltx-2.3-22b-dev-fp8.safetensors` holds the tiny LTX-2.3 in bf16 (the
dev and distilled slots hold the same file), `gemma_3_12B_it_fp4_mixed.safetensors` the tiny Gemma 3
in bf16. LTX-2.5's int8 convrot slots hold int8 convrot files (tiny_ltx25). Files no template names
keep their tiny names (the bf16 LTX-2.5 transformer, the conv-decoder VAE option, ...).
`write_released(models_dir, family, seed)` writes one release's files; same seed, same bytes.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

# Family -> {(ComfyUI folder, released name): what stands there}. LTX-2.5's writer names its own files.
RELEASED_LTX2 = {
    ("checkpoints", "ltx-2-19b-dev.safetensors"): "checkpoint",
    ("latent_upscale_models", "ltx-2-spatial-upscaler-x2-1.0.safetensors"): "spatial_upscaler",
    ("loras", "ltx-2-19b-distilled-lora-384.safetensors"): "lora",
    ("text_encoders", "gemma_3_12B_it_fp4_mixed.safetensors"): "gemma",
}
RELEASED_LTX23 = {
    ("checkpoints", "ltx-2.3-22b-dev-fp8.safetensors"): "checkpoint",
    ("checkpoints", "ltx-2.3-22b-distilled-fp8.safetensors"): "checkpoint",
    ("latent_upscale_models", "ltx-2.3-spatial-upscaler-x2-1.1.safetensors"): "spatial_upscaler_x2",
    ("latent_upscale_models", "ltx-2.3-spatial-upscaler-x1.5-1.0.safetensors"): "spatial_upscaler_x15",
    ("latent_upscale_models", "ltx-2.3-temporal-upscaler-x2-1.0.safetensors"): "temporal_upscaler_x2",
    ("text_encoders", "gemma_3_12B_it_fp4_mixed.safetensors"): "gemma",
    ("loras", "ltx_2.3_22b_distilled_1.1_lora_dynamic_fro09_avg_rank_111_bf16.safetensors"): "lora",
    ("loras", "gemma-3-12b-it-abliterated_lora_rank64_bf16.safetensors"): "text_lora",
    ("loras", "ltx-2.3-id-lora-talkvid-3k.safetensors"): "id_lora",
    ("loras", "ltx-2.3-22b-ic-lora-union-control-ref0.5.safetensors"): "ic_lora",
}
# The IC-LoRA's own metadata: GetICLoRAParameters reads the reference size ("ref0.5" in the name).
IC_LORA_METADATA = {"reference_downscale_factor": "2"}


def write_released(models_dir: Path | str, family: str, seed: int = 0) -> dict[str, Path]:
    """Write `family`'s ("2", "2.3") tiny files under their released names in `models_dir`'s ComfyUI
    folders; returns {"<folder>/<name>": path}. LTX-2.3 needs a ComfyUI (tiny_ltx23)."""
    released = {"2": RELEASED_LTX2, "2.3": RELEASED_LTX23}[family]
    models_dir = Path(models_dir)
    models_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=models_dir, prefix=".make-tiny-") as staging:
        made = (_stage_ltx2 if family == "2" else _stage_ltx23)(Path(staging), seed)
        out: dict[str, Path] = {}
        for (folder, name), role in released.items():
            target = models_dir / folder / name
            target.parent.mkdir(parents=True, exist_ok=True)
            place_file(made[role], target)
            out[f"{folder}/{name}"] = target
    return out


def _stage_ltx2(staging: Path, seed: int) -> dict[str, Path]:
    from .tiny_gemma import make_tiny_gemma
    from .tiny_model import LORA_FILE_NAME, make_tiny
    from .tiny_variants import make_tiny_lora

    files = make_tiny(staging, seed=seed)
    return {
        "checkpoint": files.checkpoint,
        "spatial_upscaler": files.spatial_upscaler,
        "lora": make_tiny_lora(staging / LORA_FILE_NAME, files.checkpoint, seed=seed),
        "gemma": make_tiny_gemma(staging / "gemma", seed=seed),
    }


def _stage_ltx23(staging: Path, seed: int) -> dict[str, Path]:
    from .tiny_gemma import make_tiny_gemma
    from .tiny_ltx23 import make_tiny_ltx23, make_tiny_ltx23_loras, write_tiny_temporal_upsampler
    from .tiny_variants import make_tiny_lora

    files = make_tiny_ltx23(staging, seed=seed)
    gemma = make_tiny_gemma(staging / "gemma", seed=seed)
    lora, text_lora = make_tiny_ltx23_loras(files, gemma, seed=seed)
    ic_lora = make_tiny_lora(staging / "ic-lora.safetensors", files.checkpoint, seed=seed + 2)
    _add_metadata(ic_lora, IC_LORA_METADATA)
    return {
        "checkpoint": files.checkpoint,
        "spatial_upscaler_x2": files.spatial_upscaler_x2,
        "spatial_upscaler_x15": files.spatial_upscaler_x15,
        "temporal_upscaler_x2": write_tiny_temporal_upsampler(
            staging / "temporal-upscaler.safetensors", seed
        ),
        "gemma": gemma,
        "lora": lora,
        "text_lora": text_lora,
        "id_lora": make_tiny_lora(staging / "id-lora.safetensors", files.checkpoint, seed=seed + 1),
        "ic_lora": ic_lora,
    }


def _add_metadata(path: Path, extra: dict[str, str]) -> None:
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    with safe_open(str(path), framework="pt") as f:
        metadata = dict(f.metadata() or {})
    save_file(load_file(str(path)), str(path), metadata=metadata | extra)


def place_file(source: Path, target: Path) -> None:
    """`source` at `target`, replacing what was there: a hard link where the filesystem allows (the
    dev and distilled slots share one file), else a copy."""
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        os.link(source, tmp)
    except OSError:
        shutil.copyfile(source, tmp)
    os.replace(tmp, target)
