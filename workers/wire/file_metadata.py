"""A safetensors file's `__metadata__` read the way ComfyUI 0.33 reads it, and never a crash on it.

NOTE [file metadata]: the rule for files (docs/NODES.md, "Files"): a file ComfyUI's own loader
accepts is accepted, and what runs is what ComfyUI computes. ComfyUI reads little of the metadata:
- "config", a JSON object of sections. Its model detection parses it and merges the "transformer"
  section into the diffusion model's settings (comfy/model_detection.py); VAELoader reads "vae" for
  the video VAE and "audio_vae" / "vocoder" for the audio VAE (comfy/sd.py, vae/audio_vae.py);
  the latent upscaler loader reads the whole object. Other sections, a null section ComfyUI does
  not read (a split transformer file saying `"vae": null`) and extra keys change nothing.
- "_quantization_metadata" (comfy.utils.convert_old_quants), JSON.
- Nothing else. `model_version` ("2.5.0") is not ComfyUI's but the file's own statement of its
  release, read by our release checks (wire/model_family.py release_of_version).
Every reader here returns a plain value for absent, partial, null, malformed or extra entries; the
refusals ComfyUI itself makes on a malformed entry it reads are wire/comfy_refusals.py's.
Pure standard library.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

CONFIG_KEY = "config"
MODEL_VERSION_KEY = "model_version"
QUANTIZATION_KEY = "_quantization_metadata"
_VERSION = re.compile(r"^\s*v?(\d+)(?:\.(\d+))?")


def parse_json_object(raw: object) -> dict[str, Any] | None:
    """`raw` (a metadata string) parsed as a JSON object; None when absent, not JSON or not an object."""
    if not isinstance(raw, str):
        return None
    try:
        value = json.loads(raw)
    except (json.JSONDecodeError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def metadata_config(metadata: Mapping[str, str]) -> dict[str, Any]:
    """The "config" object of a file's metadata; {} when absent or unreadable (see comfy_refusals for
    the files ComfyUI refuses for it)."""
    return parse_json_object(metadata.get(CONFIG_KEY)) or {}


def config_section(config: Mapping[str, Any] | None, name: str) -> dict[str, Any]:
    """Section `name` of a config; {} when the config or the section is absent, null or not an object."""
    if not isinstance(config, Mapping):
        return {}
    section = config.get(name)
    return dict(section) if isinstance(section, Mapping) else {}


def nested(section: Mapping[str, Any], *path: str) -> dict[str, Any]:
    """section[path[0]][path[1]]...; {} wherever a step is absent, null or not an object."""
    value: Any = section
    for name in path:
        value = value.get(name) if isinstance(value, Mapping) else None
    return dict(value) if isinstance(value, Mapping) else {}


def model_version(metadata: Mapping[str, str]) -> tuple[int, int] | None:
    """(major, minor) of the file's `model_version` metadata ("2.5.0" -> (2, 5); "2" -> (2, 0)), also
    when the config object carries it; None when absent or not a version."""
    raw = metadata.get(MODEL_VERSION_KEY)
    if raw is None:
        raw = metadata_config(metadata).get(MODEL_VERSION_KEY)
    match = _VERSION.match(str(raw)) if isinstance(raw, str | int | float) else None
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2) or 0)
