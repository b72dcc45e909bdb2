"""What a rank holds on the comfy backend: ComfyUI's own ModelPatcher (and VAE) for one file.

Files load through the calls ComfyUI's loader nodes make (CheckpointLoaderSimple ->
comfy.sd.load_checkpoint_guess_config; UNETLoader -> comfy.sd.load_diffusion_model), so every
format the user's ComfyUI reads loads here the same way. Import only after bootstrap.import_comfyui.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch


@dataclass
class ComfyModel:
    """One LTX file on one rank. `patcher` is comfy.model_patcher.ModelPatcher (LTXAV inside) with
    the LoRA set `loras` applied (lora.apply_loras), a clone of `base_patcher` (the file as loaded,
    no patches; the same object while no LoRA is set); `vae` the comfy.sd.VAE of a single-file
    checkpoint (None for a diffusion-model-only file)."""

    path: Path
    dtype: torch.dtype | None  # None: ComfyUI's own choice (quantized files keep their formats)
    patcher: Any
    vae: Any = None
    extras: dict[str, Any] = field(default_factory=dict)  # audio VAE, upsampler... loaded on demand
    base_patcher: Any = None  # None at construction: the loaded `patcher`
    loras: tuple[tuple[str, float], ...] = ()  # ((path, strength), ...) applied, strength-0 ones dropped

    def __post_init__(self) -> None:
        if self.base_patcher is None:
            self.base_patcher = self.patcher

    @property
    def diffusion_model(self) -> torch.nn.Module:
        return self.patcher.model.diffusion_model

    @staticmethod
    def load(
        path: Path, device: torch.device, dtype: torch.dtype | None, *, with_vae: bool = True
    ) -> ComfyModel:
        """Load `path` as ComfyUI would and put its weights on `device` (the rank's own)."""
        import comfy.model_management as mm
        import comfy.sd

        model_options: dict[str, Any] = {"load_device": device}
        if dtype is not None:
            model_options["dtype"] = dtype
        # disable_dynamic: a rank holds its whole model on its own GPU; ComfyUI's dynamic VRAM
        # (weights streamed on demand) would fight the all2all for memory and time.
        patcher, _clip, vae, _ = comfy.sd.load_checkpoint_guess_config(
            str(path),
            output_vae=with_vae,
            output_clip=False,
            model_options=model_options,
            disable_dynamic=True,
        )
        if patcher is None:
            raise ValueError(f"{path} holds no diffusion model that ComfyUI recognises")
        mm.load_models_gpu([patcher], force_full_load=True)
        return ComfyModel(path=path, dtype=dtype, patcher=patcher, vae=vae if with_vae else None)
