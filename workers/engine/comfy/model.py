"""What a rank holds on the comfy backend: ComfyUI's own ModelPatcher (and VAE) for one file.

Files load through the calls ComfyUI's loader nodes make (CheckpointLoaderSimple ->
comfy.sd.load_checkpoint_guess_config; UNETLoader -> comfy.sd.load_diffusion_model), so every
format the user's ComfyUI reads loads here the same way. Import only after bootstrap.import_comfyui.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ...wire.gguf_files import is_gguf_file

# The weight dtype of fp8_matmul: UNETLoader's fp8_e4m3fn_fast (ComfyUI 0.33 nodes.py).
FP8_WEIGHT_DTYPE = torch.float8_e4m3fn


@dataclass(frozen=True)
class ComfyVaeFiles:
    """VAE files separate from the diffusion model (LTX-2.5 ships them apart), loaded as VAELoader
    loads them; None: the checkpoint's own."""

    video: Path | None = None
    audio: Path | None = None


@dataclass
class ComfyModel:
    """One LTX file on one rank. `patcher` is comfy.model_patcher.ModelPatcher (LTXAV inside) with
    the LoRA set `loras` applied (lora.apply_loras), a clone of `base_patcher` (the file as loaded,
    no patches; the same object while no LoRA is set); `vae` the comfy.sd.VAE of a single-file
    checkpoint once loaded (`checkpoint_vae`), else None."""

    path: Path
    dtype: torch.dtype | None  # None: ComfyUI's own choice (quantized files keep their formats)
    patcher: Any
    vae: Any = None
    extras: dict[str, Any] = field(default_factory=dict)  # audio VAE, upsampler... loaded on demand
    base_patcher: Any = None  # None at construction: the loaded `patcher`
    loras: tuple[tuple[str, float], ...] = ()  # ((path, strength), ...) applied, strength-0 ones dropped
    vae_files: ComfyVaeFiles = field(default_factory=ComfyVaeFiles)

    def __post_init__(self) -> None:
        if self.base_patcher is None:
            self.base_patcher = self.patcher

    @property
    def diffusion_model(self) -> torch.nn.Module:
        return self.patcher.model.diffusion_model

    @staticmethod
    def load(
        path: Path,
        device: torch.device,
        dtype: torch.dtype | None,
        *,
        with_vae: bool = True,
        vae_files: ComfyVaeFiles | None = None,
        resident_bytes: int | None = None,
        fp8_matmul: bool = False,
        place: Callable[[Any], object] | None = None,
    ) -> ComfyModel:
        """Load `path` as ComfyUI would and put its weights on `device` (the rank's own): a file with
        a VAE as CheckpointLoaderSimple does, a diffusion model alone as UNETLoader does.
        `resident_bytes`: None keeps the whole model on `device` (weights replicated); a size keeps
        at most that much there and casts the rest in per call (weights offloaded, weights.py).
        `fp8_matmul`: the diffusion model alone, as UNETLoader loads it with weight_dtype fp8_e4m3fn_fast
        (weights stored in fp8 e4m3; ComfyUI's fp8 ops multiply in fp8 where the device has it, else
        cast up per layer); a checkpoint's VAE then loads on first use, as without with_vae.
        `place`: called with the patcher before its weights move to `device` (weights layers drops the
        blocks other ranks hold, layer_split.py)."""
        import comfy.sd

        from .weights import make_resident, set_budget

        def resident(patcher: Any) -> None:
            if place is not None:
                place(patcher)
            set_budget(patcher, resident_bytes)
            make_resident(patcher)

        vae_files = vae_files or ComfyVaeFiles()
        model_options: dict[str, Any] = {"load_device": device}
        if dtype is not None:
            model_options["dtype"] = dtype
        if is_gguf_file(path):  # UnetLoaderGGUF's path, with the ComfyUI-GGUF pack's own code (gguf.py)
            from .bootstrap import imported_root
            from .gguf import load_gguf_model

            patcher = load_gguf_model(path, imported_root(), device, dtype)
            resident(patcher)
            return ComfyModel(path=path, dtype=dtype, patcher=patcher, vae_files=vae_files)
        if fp8_matmul:  # nodes.py UNETLoader, weight_dtype "fp8_e4m3fn_fast"
            model_options.update(dtype=FP8_WEIGHT_DTYPE, fp8_optimizations=True)
        if fp8_matmul or not _has_keys(path, ("vae.", "audio_vae.")):
            # disable_dynamic here and below: a rank holds its whole model on its own GPU; ComfyUI's
            # dynamic VRAM (weights streamed on demand) would fight the all2all for memory and time.
            patcher = comfy.sd.load_diffusion_model(
                str(path), model_options=model_options, disable_dynamic=True
            )
            resident(patcher)
            return ComfyModel(path=path, dtype=dtype, patcher=patcher, vae_files=vae_files)
        patcher, _clip, vae, _ = comfy.sd.load_checkpoint_guess_config(
            str(path),
            output_vae=with_vae,
            output_clip=False,
            model_options=model_options,
            disable_dynamic=True,
        )
        if patcher is None:
            raise ValueError(f"{path} holds no diffusion model that ComfyUI recognises")
        resident(patcher)
        # A diffusion-model-only file comes back with an empty VAE object: keep None (checkpoint_vae says why).
        has_vae = with_vae and vae is not None and vae.first_stage_model is not None
        vae = vae if has_vae and vae_files.video is None else None
        return ComfyModel(path=path, dtype=dtype, patcher=patcher, vae=vae, vae_files=vae_files)

    def checkpoint_vae(self) -> Any:
        """The file's video VAE as CheckpointLoaderSimple gives it, on this rank's device, ready to run.

        Loaded on first use and kept: the sampler's load skips it (seconds on the 19B file), a workflow
        that decodes pays it once. Raises ValueError naming the file when it holds no video VAE.
        """
        import comfy.model_management as mm

        if self.vae is None and self.vae_files.video is not None:
            self.vae = load_vae_file(self.vae_files.video, self.patcher.load_device)
        elif self.vae is None:
            self.vae = _load_checkpoint_vae(self.path, self.patcher)
        # As VAEDecode / VAEEncode do before every call: ComfyUI may have offloaded it for the sampler.
        mm.load_models_gpu([self.vae.patcher], force_full_load=True)
        return self.vae


def load_vae_file(path: Path, device: torch.device) -> Any:
    """comfy.sd.VAE of a separate VAE file as VAELoader builds it, on `device`. ValueError naming the
    file when ComfyUI cannot build a VAE from it."""
    import comfy.sd
    import comfy.utils

    sd, metadata = comfy.utils.load_torch_file(str(path), return_metadata=True)
    vae = comfy.sd.VAE(sd=sd, metadata=metadata, device=device)
    try:
        vae.throw_exception_if_invalid()
    except RuntimeError as exc:
        raise ValueError(f"{path}: ComfyUI cannot build a VAE from this file ({exc})") from exc
    return vae


def _has_keys(path: Path, prefixes: tuple[str, ...]) -> bool:
    import safetensors

    if is_gguf_file(path):  # a GGUF holds the transformer alone
        return False

    with safetensors.safe_open(str(path), framework="pt") as f:
        return any(key.startswith(prefixes) for key in f.keys())


def _load_checkpoint_vae(path: Path, patcher: Any) -> Any:
    import comfy.sd

    prefixes = tuple(patcher.model.model_config.vae_key_prefix)
    # Read only the header first: a diffusion-model-only file would make ComfyUI's loader build the
    # whole transformer again before it finds no VAE.
    if not _has_keys(path, prefixes):
        raise ValueError(
            f"{path} holds no video VAE ({', '.join(p + '*' for p in prefixes)} weights); the Distributed VAE "
            "nodes need its VAE: load a single-file checkpoint, or choose the VAE file in MGPU Loader's video_vae_name"
        )
    # ComfyUI's own VAE-only reload of a checkpoint (comfy.sd.load_checkpoint_vae_patcher), on our device.
    _model, _clip, vae, _ = comfy.sd.load_checkpoint_guess_config(
        str(path),
        output_vae=True,
        output_clip=False,
        output_model=False,
        model_options={"load_device": patcher.load_device},
    )
    return vae
