"""ComfyUI values <-> worker job arguments. Pure functions over tensors and dicts (no ComfyUI import).

LATENT (docs/COMFYUI_LTX2_PARITY.md): {"samples": video [B,128,F,H,W] or a NestedTensor (video, audio), optional
"noise_mask" nested the same way}. CONDITIONING: a list of [tensor, dict]; LTX-2's own encoder gives
[B, T, C] with dict["unprocessed_ltxav_embeds"] = True, the compat form [B, L, 2C] without the flag;
LTXVConditioning adds dict["frame_rate"].
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ..workers.wire.constants import DEFAULT_FRAME_RATE
from ..workers.wire.requests import MODEL_CONDITIONING_KEYS, TextConditioning


@dataclass(frozen=True)
class LatentParts:
    video: torch.Tensor
    audio: torch.Tensor | None
    video_mask: torch.Tensor | None
    audio_mask: torch.Tensor | None
    nested: bool


def _streams(value: Any) -> list[torch.Tensor]:
    if getattr(value, "is_nested", False) and hasattr(value, "tensors"):
        return list(value.tensors)
    if isinstance(value, torch.Tensor):
        return [value]
    raise TypeError(
        f"LATENT samples must be a tensor or a nested (video, audio) tensor, got {type(value).__name__}"
    )


def split_latent(latent: dict) -> LatentParts:
    """Video, audio and their masks out of a LATENT dict. Raises ValueError saying what to change."""
    if not isinstance(latent, dict) or "samples" not in latent:
        raise ValueError("the LATENT input is not a latent dict; connect a LATENT output")
    streams = _streams(latent["samples"])
    if len(streams) > 2:
        raise ValueError(
            f"the LATENT holds {len(streams)} streams; LTX-2 latents hold video, or video and audio"
        )
    # Judge by shape, not by the "type" key: LTXVConcatAVLatent merges the audio dict into the AV latent
    # (and LTXVSeparateAVLatent copies it into the video half), so valid video latents say type "audio".
    if streams[0].dim() == 4:
        raise ValueError(
            "the LATENT holds only audio; connect the audio+video latent from LTXVConcatAVLatent "
            "(audio is denoised together with the video)"
        )
    masks: list[torch.Tensor | None] = [None] * len(streams)
    if latent.get("noise_mask") is not None:
        mask_streams = _streams(latent["noise_mask"])
        masks[: len(mask_streams)] = mask_streams
    return LatentParts(
        video=streams[0],
        audio=streams[1] if len(streams) > 1 else None,
        video_mask=masks[0],
        audio_mask=masks[1] if len(streams) > 1 else None,
        nested=len(streams) > 1,
    )


def conditioning_args(conditioning: Any, what: str) -> tuple[TextConditioning, float]:
    """CONDITIONING -> (its TextConditioning, frame_rate). Only a single entry is supported."""
    if not isinstance(conditioning, list) or not conditioning:
        raise ValueError(
            f"the {what} input is empty; connect the output of CLIPTextEncode / LTXVConditioning"
        )
    if len(conditioning) > 1:
        raise ValueError(
            f"the {what} conditioning holds {len(conditioning)} entries (combined or area conditioning); "
            "the SP Sampler takes one prompt per input: connect a single CLIPTextEncode (through LTXVConditioning)"
        )
    tensor, extras = conditioning[0][0], conditioning[0][1]
    if not isinstance(tensor, torch.Tensor):
        raise ValueError(f"the {what} conditioning holds no tensor; connect an LTX-2 text encoding")
    unprocessed = bool(extras.get("unprocessed_ltxav_embeds", False))
    frame_rate = float(extras.get("frame_rate", DEFAULT_FRAME_RATE))
    model_keys = {k: _wire_value(extras[k]) for k in MODEL_CONDITIONING_KEYS if extras.get(k) is not None}
    return TextConditioning(tensor.float().contiguous(), unprocessed, model_keys), frame_rate


def _wire_value(value: Any) -> Any:
    return value.contiguous() if isinstance(value, torch.Tensor) else value
