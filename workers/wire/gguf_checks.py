"""Refusals of GGUF model files before any worker starts, and the GGUF header in the shape the rest of the
UI side reads (model_files.SafetensorsHeader: tensor shapes, their stored types, the metadata).

A GGUF picked in the loader must be an LTX audio+video transformer that ComfyUI-GGUF reads and ComfyUI
then builds as the release it is (NOTE [gguf layout] in gguf_files.py): else one line naming the file,
what it is and what to pick. Pure standard library.
"""

from __future__ import annotations

from pathlib import Path

from .file_info import ModelFileInfo, SafetensorsHeader
from .gguf_files import (
    ARCH_KEY,
    CONFIG_KEY,
    LTX_ARCH,
    OTHER_IMAGE_ARCHS,
    GgufHeader,
    is_gguf_file,
    read_gguf_header,
)
from .gguf_pack import require_gguf_pack
from .model_family import LTX2, LTX23, LTX25, detect_model_family

PICK_LTX_GGUF = "pick an LTX-2, LTX-2.3 or LTX-2.5 transformer GGUF (architecture 'ltxv', with audio)"


def gguf_model_header(path: str | Path) -> SafetensorsHeader:
    """The header of a GGUF file as model_files.SafetensorsHeader: tensor names as stored, torch-order
    shapes, GGML type names as dtypes ("Q8_0", "F32"...), the scalar fields as metadata (`config` among
    them). ValueError naming the file when it is no GGUF or is cut short."""
    header = read_gguf_header(path)
    return SafetensorsHeader(
        path=header.path,
        shapes={t.name: t.shape for t in header.tensors},
        dtypes={t.name: t.ggml_type for t in header.tensors},
        metadata=header.string_metadata(),
    )


def check_gguf_model(path: str | Path) -> SafetensorsHeader:
    """gguf_model_header of a GGUF that holds an LTX audio+video transformer ComfyUI can build from what
    the file carries; ValueError (the file, what it is, what to pick) otherwise."""
    raw = read_gguf_header(path)
    header = gguf_model_header(path)
    name = Path(path).name
    arch = raw.architecture
    if arch is not None and arch != LTX_ARCH:
        what = OTHER_IMAGE_ARCHS.get(arch)
        kind = (
            f"a {what} model"
            if what
            else f"a model of architecture {arch!r} (not one ComfyUI-GGUF loads as a video model)"
        )
        raise ValueError(f"{name} is a GGUF of {kind}, not an LTX transformer; {PICK_LTX_GGUF}")
    found = detect_model_family(header.shapes, header.dtypes, header.metadata)
    if found.family not in (LTX2, LTX23, LTX25):
        video_only = any(k.endswith("adaln_single.linear.weight") for k in header.shapes)
        kind = "an LTX-Video (0.9.x, video only) GGUF" if video_only else _other_kind(raw)
        raise ValueError(f"{name} is {kind}, not an LTX audio+video transformer; {PICK_LTX_GGUF}")
    if found.family != LTX2 and CONFIG_KEY not in header.metadata:
        # ComfyUI's detection takes 2.3's gated attention / prompt AdaLN and 2.5's feed-forward without bias
        # from the config only: without it ComfyUI builds LTX-2's layout and the weights do not fit.
        raise ValueError(
            f"{name} is an {found.family} transformer GGUF without the model config in its metadata (the "
            f"'{CONFIG_KEY}' field), so ComfyUI would build LTX-2's layout for it; pick an {found.family} GGUF "
            "converted with its config (as the safetensors file carries it)"
        )
    return header


def _other_kind(raw: GgufHeader) -> str:
    if raw.fields.get(ARCH_KEY) is None:
        return "a GGUF without an architecture field, with no LTX transformer weights"
    return "an 'ltxv' GGUF without LTX transformer weights (a VAE or text encoder?)"


def gguf_model_file_info(path: str | Path) -> ModelFileInfo:
    """ltx_files.ModelFileInfo of an LTX transformer GGUF (refused as check_gguf_model refuses): a GGUF
    holds the transformer only, its VAEs are separate files."""
    header = check_gguf_model(path)
    found = detect_model_family(header.shapes, header.dtypes, header.metadata)
    return ModelFileInfo(str(path), found.family, found.weight_format, video_vae=False, audio_vae=False)


def check_gguf_loadable(path: str | Path, backend: str, comfyui_root: str, weights: str) -> None:
    """For a GGUF file: ValueError unless the workers' engine (`backend`) loads GGUF files with `weights`
    (capabilities.check_gguf_placement: ComfyUI's engine, not sharded) and the ComfyUI-GGUF pack is beside
    that ComfyUI (gguf_pack.require_gguf_pack). Other files pass."""
    if not is_gguf_file(path):
        return
    from .capabilities import capabilities, check_gguf_placement  # imports torch: only for a GGUF

    name = Path(path).name
    check_gguf_placement(capabilities(backend), name, weights)
    require_gguf_pack(name, comfyui_root)
