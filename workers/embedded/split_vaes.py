"""An LTX single-file checkpoint's VAEs written as separate files, as users hold them beside a transformer
without VAEs (a GGUF, a diffusion-model file): the video VAE (its `vae.` keys, prefix stripped) and the
audio VAE with its vocoder (keys as in the checkpoint), each with its part of the checkpoint's `config`
and the release as `model_version`. For tests and benchmarks.
"""

from __future__ import annotations

import json
from pathlib import Path

from safetensors import safe_open
from safetensors.torch import save_file


def split_vaes(
    checkpoint: Path | str, video_path: Path | str, audio_path: Path | str, model_version: str
) -> None:
    """Write `checkpoint`'s video VAE to `video_path` and its audio VAE and vocoder to `audio_path`."""
    with safe_open(str(checkpoint), framework="pt") as f:
        config = json.loads(f.metadata()["config"])
        video = {k.removeprefix("vae."): f.get_tensor(k) for k in f.keys() if k.startswith("vae.")}
        audio = {k: f.get_tensor(k) for k in f.keys() if k.startswith(("audio_vae.", "vocoder."))}
    stated = {"model_version": model_version}
    for path, tensors, parts in (
        (video_path, video, ("vae",)),
        (audio_path, audio, ("audio_vae", "vocoder")),
    ):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        metadata = {"config": json.dumps({k: config[k] for k in parts}), **stated}
        save_file({k: v.contiguous() for k, v in tensors.items()}, str(path), metadata=metadata)
