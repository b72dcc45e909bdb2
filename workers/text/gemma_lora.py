"""LoRAs on the text encoder (Gemma 3), applied as ComfyUI's LoraLoader applies them to the CLIP side.

The LTX-2.3 templates put a Gemma LoRA on the text encoder with LoraLoader. ComfyUI maps a LoRA key
`text_encoders.<key of the CLIP model's state dict>` (comfy/lora.py model_lora_keys_clip), so for its
Gemma 3 text encoder `text_encoders.gemma3_12b.transformer.model.layers.N.<linear>` names the weight
`layers.N.<linear>.weight` of our GemmaSegment. Patching follows comfy/weight_adapter/lora.py: in
float32, W + (strength x alpha / rank) x (B @ A), then cast back to the weight's dtype.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import safe_open

from ..wire.model_files import read_safetensors_header

# LoRA key prefixes ComfyUI resolves to its Gemma 3 text encoder's layers (with and without the wrapper).
TEXT_LORA_PREFIXES = ("text_encoders.gemma3_12b.transformer.model.", "text_encoders.transformer.model.")
_A, _B, _ALPHA = ".lora_A.weight", ".lora_B.weight", ".alpha"


@dataclass(frozen=True)
class TextLoRAPair:
    """One patched weight: the segment key it changes and the file keys of its factors."""

    weight_key: str  # "layers.N.self_attn.q_proj.weight"
    down_key: str  # lora_A [rank, in]
    up_key: str  # lora_B [out, rank]
    alpha_key: str | None


def text_lora_pairs(path: Path | str, shapes: dict[str, tuple[int, ...]]) -> list[TextLoRAPair]:
    """The pairs of a text-encoder LoRA file, checked against the Gemma's weight shapes (`shapes`:
    segment key -> shape). ValueError naming the file when a pair does not fit or none is for Gemma."""
    header = read_safetensors_header(path)
    pairs = []
    for key in sorted(header.shapes):
        prefix = next((p for p in TEXT_LORA_PREFIXES if key.startswith(p)), None)
        if prefix is None or not key.endswith(_A):
            continue
        stem = key[: -len(_A)]
        weight_key = stem[len(prefix) :] + ".weight"
        up_key = stem + _B
        want = shapes.get(weight_key)
        got = (header.shapes.get(up_key, (0,))[0], header.shapes[key][-1])
        if want is None or tuple(want[:2]) != got:
            raise ValueError(
                f"the LoRA {Path(path).name} changes {weight_key} as {list(got)} but the text encoder "
                f"{'has no such weight' if want is None else f'holds it as {list(want)}'}; pick a LoRA made for "
                "this Gemma 3 text encoder"
            )
        alpha = stem + _ALPHA
        pairs.append(TextLoRAPair(weight_key, key, up_key, alpha if alpha in header.shapes else None))
    if not pairs:
        raise ValueError(
            f"the LoRA {Path(path).name} has no text-encoder weights (keys starting {TEXT_LORA_PREFIXES[0]}...); "
            "it is not a Gemma LoRA: apply model LoRAs with the MGPU Loader or MGPU LoRA"
        )
    return pairs


def apply_text_loras(segment: torch.nn.Module, loras: Sequence[tuple[str, float]], shapes) -> int:
    """Patch `segment`'s weights in place with each (path, strength); returns how many weights changed.
    Only the segment's own layers are touched (a rank holds a block of them). Quantized layers refuse."""
    state = dict(segment.named_parameters()) | dict(segment.named_buffers())
    changed = 0
    for path, strength in loras:
        with safe_open(str(path), framework="pt") as f:
            for pair in text_lora_pairs(path, shapes):
                module_name = pair.weight_key.rpartition(".")[0]
                weight = state.get(pair.weight_key)
                if weight is None:
                    try:
                        segment.get_submodule(module_name)
                    except AttributeError:
                        continue  # a layer another rank holds
                    raise ValueError(
                        f"the LoRA {Path(path).name} changes {module_name}, which this text encoder stores "
                        "quantized (nvfp4/fp8); use the bf16 Gemma file with a text-encoder LoRA"
                    )
                down = f.get_tensor(pair.down_key).to(weight.device, torch.float32)
                up = f.get_tensor(pair.up_key).to(weight.device, torch.float32)
                scale = float(strength)
                if pair.alpha_key is not None:
                    scale *= float(f.get_tensor(pair.alpha_key)) / down.shape[0]
                patched = weight.to(torch.float32) + scale * torch.mm(up, down)
                with torch.no_grad():
                    weight.copy_(patched.to(weight.dtype))
                changed += 1
    return changed
