"""Input checks that the nodes run before any worker starts and every rank runs again: one
definition, so the UI and the workers refuse the same inputs with the same words.

Torch only (no ltx-core, no engine). Each raises ValueError saying what to change.
"""

from __future__ import annotations

import struct
from enum import Enum

import torch

from .constants import (
    AUDIO_LATENT_CHANNELS,
    AUDIO_LATENT_MEL_BINS,
    VIDEO_FRAMES_PER_CELL,
    VIDEO_LATENT_CHANNELS,
    VIDEO_PIXELS_PER_CELL,
)

# Weight dtypes a model can be loaded in, by the names the MGPU Loader offers.
DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
# The samplers the workers implement (engine/ltxcore/sampling.py), by ComfyUI's names.
SAMPLERS = ("euler", "euler_ancestral")
# fp8 matmuls (rowwise torch._scaled_mm) write bf16: the only compute dtype fp8_matmul runs in.
FP8_MATMUL_DTYPE = torch.bfloat16


class ForwardMode(str, Enum):
    """How the transformer blocks compute: "comfyui" matches native ComfyUI, "reference" runs
    Lightricks' ltx-core block order."""

    COMFYUI = "comfyui"
    REFERENCE = "reference"


def check_video_latent(latent: torch.Tensor, what: str = "video latent") -> None:
    """Raise ValueError (saying what to change) unless `latent` is an LTX-2 video latent."""
    if latent.dim() != 5:
        raise ValueError(
            f"the {what} has shape {tuple(latent.shape)}; LTX-2 video latents are 5-d [batch, 128, frames, height, width]. "
            "Make it with EmptyLTXVLatentVideo, LTXVImgToVideo or a VAE Encode of the LTX-2 VAE."
        )
    if latent.shape[1] != VIDEO_LATENT_CHANNELS:
        raise ValueError(
            f"the {what} has {latent.shape[1]} channels; LTX-2 video latents have {VIDEO_LATENT_CHANNELS}. "
            "It comes from another model family: make it with the LTX-2 nodes (EmptyLTXVLatentVideo)."
        )
    _check_not_empty(latent, what, ("batch", "channels", "frames", "height", "width"))


def _check_not_empty(latent: torch.Tensor, what: str, axes: tuple[str, ...]) -> None:
    """A latent with an axis of length 0 (a video of no frames, an empty batch) holds nothing to work on."""
    empty = [name for name, size in zip(axes, latent.shape) if size == 0]
    if empty:
        raise ValueError(
            f"the {what} has shape {tuple(latent.shape)}: no {' and no '.join(empty)}. Connect a latent with at "
            "least one frame and one latent cell in height and width (EmptyLTXVLatentVideo: length 1 or more, "
            "width and height 32 or more; a node upstream produced an empty one)"
        )


def check_audio_latent(latent: torch.Tensor, what: str = "audio latent") -> None:
    if (
        latent.dim() != 4
        or latent.shape[1] != AUDIO_LATENT_CHANNELS
        or latent.shape[3] != AUDIO_LATENT_MEL_BINS
    ):
        raise ValueError(
            f"the {what} has shape {tuple(latent.shape)}; LTX-2 audio latents are [batch, {AUDIO_LATENT_CHANNELS}, "
            f"frames, {AUDIO_LATENT_MEL_BINS}]. Make it with LTXVEmptyLatentAudio."
        )
    _check_not_empty(latent, what, ("batch", "channels", "frames", "mel bins"))


def format_sigmas(sigmas: torch.Tensor) -> str:
    """The values as the user typed them: per value the shortest decimal that gives the same float32
    (the list would otherwise print float32 noise, -0.30000001192092896 for -0.3)."""

    def shortest(value: float) -> str:
        for digits in range(1, 10):  # 9 significant digits round-trip every float32
            text = f"{value:.{digits}g}"
            if struct.unpack("f", struct.pack("f", float(text)))[0] == value:
                return text
        return repr(value)

    return ", ".join(shortest(v) for v in sigmas.detach().float().cpu().tolist())


def validate_sigmas(sigmas: torch.Tensor) -> None:
    """Raise ValueError unless sigmas is a usable flow schedule."""
    if sigmas.dim() != 1 or sigmas.numel() < 2:
        raise ValueError(
            f"SIGMAS must list at least two values (a start and an end), got shape {tuple(sigmas.shape)}. "
            "Connect LTXVScheduler or ManualSigmas."
        )
    if not torch.isfinite(sigmas).all():
        raise ValueError("SIGMAS holds NaN or infinite values; check the scheduler's settings")
    if (sigmas < 0).any() or (sigmas > 1.0 + 1e-6).any():
        raise ValueError(f"LTX-2 is a flow model: sigmas must lie in [0, 1], got {format_sigmas(sigmas)}")
    if (sigmas[1:] > sigmas[:-1]).any():
        raise ValueError(f"sigmas must not increase from one step to the next, got {format_sigmas(sigmas)}")


def check_sampler(name: str) -> None:
    if name not in SAMPLERS:
        raise ValueError(f"sampler {name!r} is not supported; choose one of {', '.join(SAMPLERS)}")


def parse_dtype(name: str) -> torch.dtype:
    """The torch dtype of a weight-dtype name; ValueError listing the names otherwise."""
    if name not in DTYPES:
        raise ValueError(f"weight dtype {name!r} is not supported; choose one of {', '.join(DTYPES)}")
    return DTYPES[name]


def parse_mode(name: str) -> ForwardMode:
    try:
        return ForwardMode(name)
    except ValueError:
        raise ValueError(f"forward mode {name!r} is not one of {[m.value for m in ForwardMode]}") from None


def check_compilable(mode: ForwardMode) -> None:
    """compile_blocks compiles the comfyui block function; raises ValueError for any other mode."""
    if mode is not ForwardMode.COMFYUI:
        raise ValueError(
            f"compile_blocks works with mode 'comfyui' only (this model has mode {mode.value!r}); "
            "turn compile_blocks off or set mode to comfyui"
        )


def check_fp8_dtype(dtype: torch.dtype) -> None:
    """fp8_matmul computes in bf16 (rowwise scaled_mm writes bf16); the GPU check is the engine's."""
    if dtype != FP8_MATMUL_DTYPE:
        raise ValueError(
            f"fp8_matmul computes in bfloat16 (weight_dtype is {str(dtype).removeprefix('torch.')}); "
            "set weight_dtype to bfloat16 or turn fp8_matmul off"
        )


def check_splittable(latent_fhw: tuple[int, int, int], world_size: int) -> None:
    """Refuse (ValueError) a video latent with fewer tokens than ranks: a rank with no token fails
    alone inside the forward, which the others cannot survive. The node and every rank check it
    before any work (it needs the group size, which a request does not carry)."""
    f, h, w = latent_fhw
    tokens = f * h * w
    if tokens < world_size:
        raise ValueError(
            f"the video latent has {tokens} token{'' if tokens == 1 else 's'} ({f} x {h} x {w} latent cells, "
            f"frames x height x width) for {world_size} workers; sequence parallelism needs at least one "
            f"per worker. Make the video larger (a cell is {VIDEO_FRAMES_PER_CELL} frames x "
            f"{VIDEO_PIXELS_PER_CELL} x {VIDEO_PIXELS_PER_CELL} px) or use at most {tokens} "
            f"GPU{'' if tokens == 1 else 's'}."
        )
