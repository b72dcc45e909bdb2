"""LoRA files as the UI side checks them and the engines fuse them: which checkpoint weights a file
changes, read from both safetensors headers (no tensor data, no ltx-core).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from .file_pairing import check_lora_release
from .model_files import SafetensorsHeader, read_safetensors_header

# (down, up) suffix pairs ComfyUI's LoRAAdapter reads (comfy/weight_adapter/lora.py), ours first.
PAIR_SUFFIXES = ((".lora_A.weight", ".lora_B.weight"), (".lora_down.weight", ".lora_up.weight"))
ALPHA_SUFFIX = ".alpha"
LORA_PREFIX = "diffusion_model."  # ComfyUI / LTX-2 trainer files
KOHYA_PREFIX = "lora_unet_"
CHECKPOINT_PREFIX = "model.diffusion_model."  # where the same weights sit in a full checkpoint
LoraSpec = tuple[tuple[str, float], ...]  # ((path, strength), ...) in application order


def active_loras(loras: Iterable[tuple[str, float]]) -> LoraSpec:
    """The LoRAs that change anything: strength-0 entries dropped (strength 0 is the clean base)."""
    return tuple((str(path), float(strength)) for path, strength in loras if float(strength) != 0.0)


@dataclass(frozen=True)
class LoraTarget:
    """One weight a LoRA file changes. weight_key: the checkpoint's key of W [out, in]; down_key: A
    [rank, in]; up_key: B [out, rank]; alpha_key: the scalar alpha, if the file has one."""

    weight_key: str
    down_key: str
    up_key: str
    alpha_key: str | None


@dataclass(frozen=True)
class LoraFile:
    """A LoRA file checked against one model file. unused_keys: keys that change nothing in it. A target's
    weight_key is the model file's own key (transformer_prefix)."""

    path: Path
    targets: tuple[LoraTarget, ...]
    unused_keys: tuple[str, ...]


def read_lora(path: Path | str, checkpoint: SafetensorsHeader) -> LoraFile:
    """Read `path`'s header and map its pairs onto `checkpoint`'s weights (no tensor data is read).

    Raises ValueError naming the file when it is not safetensors, a pair is incomplete, shapes do not
    fit the checkpoint's weights (a LoRA for another model), it is for another LTX release, or no key
    changes anything here.
    """
    check_lora_release(path, checkpoint)
    lora = read_safetensors_header(path)
    prefix = transformer_prefix(checkpoint)
    kohya: dict[str, str] | None = None
    targets, used, problems = [], set(), []
    for key in sorted(lora.shapes):
        pair = next((p for p in PAIR_SUFFIXES if key.endswith(p[0])), None)
        if pair is None:
            continue
        stem = key[: -len(pair[0])]
        up_key = stem + pair[1]
        if up_key not in lora.shapes:
            problems.append(f"{key} has no {up_key}")
            continue
        name = stem[len(LORA_PREFIX) :] if stem.startswith(LORA_PREFIX) else stem
        if name.startswith(KOHYA_PREFIX):
            kohya = kohya if kohya is not None else _kohya_names(checkpoint)
            name = kohya.get(name, name)
        weight_key = f"{prefix}{name}.weight"
        if weight_key not in checkpoint.shapes:
            continue
        down, up, weight = lora.shapes[key], lora.shapes[up_key], checkpoint.shapes[weight_key]
        if len(down) != 2 or len(up) != 2 or down[0] != up[1] or (up[0], down[1]) != weight:
            problems.append(
                f"{stem}: down {list(down)} x up {list(up)} does not make the [out, in] = {list(weight)} of {weight_key}"
            )
            continue
        alpha_key = stem + ALPHA_SUFFIX if stem + ALPHA_SUFFIX in lora.shapes else None
        targets.append(LoraTarget(weight_key, key, up_key, alpha_key))
        used.update(k for k in (key, up_key, alpha_key) if k is not None)
    if problems:
        raise ValueError(
            f"LoRA {lora.path.name} does not fit the checkpoint {checkpoint.path.name} (made for another model?): "
            + "; ".join(problems[:4])
            + (f" and {len(problems) - 4} more" if len(problems) > 4 else "")
        )
    if not targets:
        example = next(iter(sorted(lora.shapes)), "(no tensors)")
        raise ValueError(
            f"LoRA {lora.path.name} changes no weight of {checkpoint.path.name}: its keys look like {example!r}; "
            f"an LTX-2 LoRA names weights like 'diffusion_model.transformer_blocks.0.attn1.to_q.lora_A.weight'"
        )
    unused = tuple(sorted(set(lora.shapes) - used))
    return LoraFile(path=lora.path, targets=tuple(targets), unused_keys=unused)


def transformer_prefix(checkpoint: SafetensorsHeader) -> str:
    """Where the transformer's weights sit in the model file: under CHECKPOINT_PREFIX in a checkpoint or a
    prefixed diffusion-model file, at the top in a bare transformer file (a GGUF, many diffusion_models files)."""
    return CHECKPOINT_PREFIX if any(k.startswith(CHECKPOINT_PREFIX) for k in checkpoint.shapes) else ""


def _kohya_names(checkpoint: SafetensorsHeader) -> dict[str, str]:
    prefix = transformer_prefix(checkpoint)
    names = (
        k[len(prefix) : -len(".weight")]
        for k in checkpoint.shapes
        if k.startswith(prefix) and k.endswith(".weight")
    )
    return {KOHYA_PREFIX + name.replace(".", "_"): name for name in names}


@dataclass(frozen=True)
class SwitchReport:
    """What one switch did. restored: tensors re-read from the checkpoint (or put back); fused: tensors
    now holding a LoRA; fused_bytes: their size; seconds: wall time of the switch on this rank."""

    changed: bool
    restored: int = 0
    fused: int = 0
    fused_bytes: int = 0
    seconds: float = 0.0
    unused_keys: int = 0
    how: str = ""  # ComfyUI's engine: "kept", "built", "fused" or "base" (engine/comfy/weight_sets.py)
    kept_bytes: int = 0  # the device bytes this rank's kept LoRA sets hold
    reason: str = ""  # why the set was fused instead of kept

    def as_dict(self) -> dict:
        return asdict(self)


def describe_switch(report: dict, workers: int) -> str:
    """The console line for a LoRA switch on ComfyUI's engine (report: rank 0's SwitchReport); "" for
    an engine that does not say how (ltx-core fuses in place) or a set that was already live."""
    how, took = report.get("how", ""), f"{report.get('seconds', 0.0):.2f} s"
    kept = f"{report.get('kept_bytes', 0) / 2**30:.2f} GiB of kept LoRA sets per worker"
    if not report.get("changed") or how in ("", "live"):
        return ""
    if how == "kept":
        return f"LoRA set switched in {took}: kept on the device since its first use ({kept}), nothing fused"
    if how == "built":
        return (
            f"LoRA set fused in {took} and kept beside the base ({kept}): switching back to it fuses nothing"
        )
    if how == "unfused":
        why = f"; not kept beside the base: {report['reason']}" if report.get("reason") else ""
        return (
            f"LoRA set switched in {took}, unfused: its LoRAs run beside the base weights in each layer's "
            f"forward, nothing fused{why}"
        )
    if how == "base":
        return f"LoRA set removed in {took}: the base weights stayed on the device"
    return (
        f"LoRA set fused in {took} on {workers} workers as ComfyUI fuses it, not kept beside the base "
        f"({report.get('reason', '')}): every switch fuses again"
    )
