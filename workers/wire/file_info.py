"""The records the file checks pass around: a model file's header (SafetensorsHeader, also built from a
GGUF's) and what a model file holds (ModelFileInfo). Records only, so the safetensors, GGUF and LTX
checks can all use them without importing each other both ways.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SafetensorsHeader:
    """What a safetensors file declares, read from its JSON header without reading tensor data.

    shapes: file key -> tensor shape. dtypes: file key -> safetensors dtype name ("BF16", "F32").
    metadata: the string-to-string `__metadata__` map (empty when the file has none).
    """

    path: Path
    shapes: Mapping[str, tuple[int, ...]]
    dtypes: Mapping[str, str]
    metadata: Mapping[str, str]


@dataclass(frozen=True)
class ModelFileInfo:
    """What a model file holds. `weight_format` names the transformer's storage ("bf16", "fp8 scaled",
    "int8 convrot", "nvfp4 mixed", ...); `video_vae` / `audio_vae` whether the file carries them
    (single-file checkpoints do; LTX-2.5's diffusion-model file does not)."""

    path: str
    family: str
    weight_format: str
    video_vae: bool
    audio_vae: bool

    def describe(self) -> str:
        parts = [f"{self.family} transformer, {self.weight_format}"]
        if self.video_vae or self.audio_vae:
            parts.append(
                "with its "
                + " and ".join(
                    k for k, on in (("video VAE", self.video_vae), ("audio VAE", self.audio_vae)) if on
                )
            )
        else:
            parts.append("diffusion model only (VAEs in separate files)")
        return f"{Path(self.path).name}: " + ", ".join(parts)
