"""Which LTX release a model file holds and how its transformer weights are stored, from its header.

Pure: reads only what a safetensors header declares (key names, dtypes, the metadata "config"), so the
MGPU Loader can report it, and refuse what a backend cannot serve, before any worker starts.

The family rules follow what ComfyUI's own detection reads (comfy/model_detection.py and
comfy/ldm/lightricks): an audio+video transformer has `audio_adaln_single`; LTX-2.3 turns on gated
attention and cross-attention AdaLN (config flags, `to_gate_logits` and `prompt_adaln_single` keys);
LTX-2.5 drops the video feed-forward's bias (`ff_bias` false) and may carry the keyframe position
embedding. wire/ltx_files.py reads the family through this module, so the loader's report and its
VAE-pairing check agree.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from .file_metadata import config_section, metadata_config, model_version
from .gguf_files import GGML_BLOCKS

LTX2, LTX23, LTX25 = "LTX-2", "LTX-2.3", "LTX-2.5"
UNKNOWN = "unknown"
# The `model_version` metadata (major, minor) of each release's files (wire/file_metadata.py).
RELEASE_OF_VERSION = {(2, 0): LTX2, (2, 3): LTX23, (2, 5): LTX25}
_PREFIXES = ("model.diffusion_model.", "")  # a full checkpoint, a diffusion-model file
# safetensors dtype names of the block weights -> how a user names the format.
_FORMATS = {
    "BF16": "bf16",
    "F16": "fp16",
    "F32": "fp32",
    "F8_E4M3": "fp8 e4m3",
    "F8_E5M2": "fp8 e5m2",
    "I8": "int8",
    "U8": "fp4 packed",
}
_SCALE_SUFFIXES = (".weight_scale", ".scale_weight", ".input_scale")


@dataclass(frozen=True)
class ModelFamily:
    """family: LTX2 / LTX23 / LTX25 / UNKNOWN. weight_format: the block linears' storage, e.g. "bf16",
    "fp8 e4m3 scaled", "bf16 + fp8 e4m3 scaled (mixed)". has_vae: whether the file carries the video VAE."""

    family: str
    weight_format: str
    has_vae: bool

    def describe(self) -> str:
        vae = "with its VAE" if self.has_vae else "transformer only"
        return f"{self.family}, weights {self.weight_format}, {vae}"


def detect_model_family(
    shapes: Mapping[str, tuple[int, ...]], dtypes: Mapping[str, str], metadata: Mapping[str, str]
) -> ModelFamily:
    """The family and weight format of a file with these header entries (SafetensorsHeader's fields)."""
    prefix = next(
        (
            p
            for p in _PREFIXES
            if f"{p}adaln_single.linear.weight" in shapes or f"{p}audio_adaln_single.linear.weight" in shapes
        ),
        None,
    )
    has_vae = any(key.startswith("vae.") for key in shapes)
    if prefix is None:
        return ModelFamily(UNKNOWN, UNKNOWN, has_vae)
    return ModelFamily(_family(shapes, metadata, prefix), _weight_format(shapes, dtypes, prefix), has_vae)


def _family(shapes: Mapping[str, tuple[int, ...]], metadata: Mapping[str, str], prefix: str) -> str:
    transformer = _transformer_config(metadata)
    # LTX-2.5's video feed-forward has no bias; the keyframe embedding is only in some 2.5 files.
    ff = f"{prefix}transformer_blocks.0.ff.net.0.proj."
    no_ff_bias = f"{ff}weight" in shapes and f"{ff}bias" not in shapes
    if f"{prefix}keyframes_abs_pos_embedding" in shapes or no_ff_bias or transformer.get("ff_bias") is False:
        return LTX25
    flags = (transformer.get("apply_gated_attention"), transformer.get("cross_attention_adaln"))
    keys = (
        f"{prefix}prompt_adaln_single.linear.weight",
        f"{prefix}transformer_blocks.0.attn1.to_gate_logits.weight",
    )
    if any(flags) or any(key in shapes for key in keys):
        return LTX23
    if f"{prefix}audio_adaln_single.linear.weight" in shapes:
        return LTX2
    return UNKNOWN


def _transformer_config(metadata: Mapping[str, str]) -> dict:
    return config_section(metadata_config(metadata), "transformer")


def release_of_version(metadata: Mapping[str, str]) -> str | None:
    """The release a file's `model_version` metadata names (LTX2 / LTX23 / LTX25); None when the file
    has none or names a version no release here has."""
    version = model_version(metadata)
    return None if version is None else RELEASE_OF_VERSION.get(version)


def _weight_format(shapes: Mapping[str, tuple[int, ...]], dtypes: Mapping[str, str], prefix: str) -> str:
    blocks = f"{prefix}transformer_blocks."
    weights = [k for k, s in shapes.items() if k.startswith(blocks) and k.endswith(".weight") and len(s) == 2]
    counts = Counter(dtypes.get(k, "?") for k in weights)
    is_scaled = any(k.startswith(blocks) and k.endswith(_SCALE_SUFFIXES) for k in shapes)
    names = []
    for dtype, _ in counts.most_common():
        name = _FORMATS.get(dtype, f"GGUF {dtype}" if dtype in GGML_BLOCKS else dtype.lower())
        names.append(f"{name} scaled" if is_scaled and dtype not in ("BF16", "F16", "F32") else name)
    if not names:
        return UNKNOWN
    return names[0] if len(names) == 1 else " + ".join(names) + " (mixed)"


# Families whose transformer the ltx-core backend's forward serves (model_forward.py repeats LTX-2's
# block by hand; 2.3's gated attention and prompt AdaLN, 2.5's keyframe positions are not in it).
LTXCORE_FAMILIES = (LTX2,)


def check_ltxcore_serves(found: ModelFamily, file_name: str) -> None:
    """Refuse a family the ltx-core backend cannot run, saying how to run it instead (ValueError)."""
    if found.family in LTXCORE_FAMILIES:
        return
    raise ValueError(
        f"{file_name} is {found.family}; the ltx-core engine of this pack runs LTX-2 (19B) only. Run it "
        "inside ComfyUI (the workers then use ComfyUI's own LTX code), or set COMFYUI_PATH to a ComfyUI "
        "0.33 or newer for runs outside it; mode 'reference' chooses the ltx-core engine, so leave mode at "
        "comfyui"
    )
