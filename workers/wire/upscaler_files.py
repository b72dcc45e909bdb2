"""What the TDP Upscaler tells an artist about the latent upscaler file picked (before any work):

- what it does, for the console ("x2", "x1.5", "temporal x2": twice the frames);
- a refusal when it cannot do anything useful on this latent (a temporal upscaler on one latent frame);
- a warning when the file's own `model_version` names another release than the loaded model's
  (ComfyUI runs such a pair, and so do we, but the latent spaces differ).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .model_family import release_of_version

# The temporal upscalers give 2F - 1 frames (strategies/tiled.upscaled_latent_shape): from one
# latent frame, one frame back, nothing in between.
MIN_TEMPORAL_LATENT_FRAMES = 2


def is_temporal(config: Mapping[str, Any]) -> bool:
    return bool(config.get("temporal_upsample", False))


def describe_upscaler(config: Mapping[str, Any]) -> str:
    """ "x2", "x1.5" or "temporal x2 ..." from the file's config; a temporal one says what the saved
    video needs (the node cannot see the frame rate downstream)."""
    spatial = bool(config.get("spatial_upsample", True))
    if not is_temporal(config):
        return f"x{float(config.get('spatial_scale', 2.0)):g}"
    return ("temporal x2 and x2 in space" if spatial else "temporal x2") + (
        ": 2N - 1 frames, save them at twice the source's frame rate"
    )


def check_upscaler_input(name: str, config: Mapping[str, Any], latent_frames: int) -> None:
    """ValueError naming the input when the upscaler cannot work on a latent of `latent_frames`."""
    if is_temporal(config) and latent_frames < MIN_TEMPORAL_LATENT_FRAMES:
        raise ValueError(
            f"upscale_model {name} is a temporal upscaler (2F - 1 frames) and the latent has "
            f"{latent_frames} frame: there is nothing between frames to add. Give it a clip of at least "
            "9 video frames (2 latent frames), or pick a spatial upscaler (x2, x1.5)"
        )


def release_mismatch(name: str, metadata: Mapping[str, str], family: str) -> str | None:
    """A console warning when the upscaler's metadata names another release than `family` ("LTX-2.3",
    ...; "" when unknown); None otherwise."""
    stated = release_of_version(metadata)
    if stated is None or not family or stated == family:
        return None
    return (
        f"upscale_model {name} says it is for {stated} (its model_version metadata) and the loaded model is "
        f"{family}: ComfyUI runs the pair, but the upscaled latent is not the one {family}'s own upscaler "
        f"gives; pick an {family} upscaler"
    )
