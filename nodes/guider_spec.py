"""A native GUIDER (CFGGuider, LTXVDualCFGGuider, BasicGuider) described for the SP Sampler's workers.

NOTE [guider in the workers]: with a GUIDER the SP Sampler runs the guider's whole loop in the ranks,
one job for all steps (no round trip per model call, unlike the MGPU Loader's MODEL under
SamplerCustomAdvanced), and its guidance passes can run side by side on groups of GPUs. A guider is
a Python object of the UI process: what the ranks need of it travels as data (workers/wire/
requests.GuiderSpec) and is rebuilt there with ComfyUI's own classes (workers/engine/comfy/
guidance.py): the guider class and its scales, its conditioning as the guider holds it (guide
keyframes, reference audio and text masks included), the model_options entries that are data
(transformer_options), the post-CFG terms of LTX's guidance nodes (STG, modality, identity
guidance: closures whose settings are read from the closure and rebuilt as the same arithmetic),
and the MODEL's weight patches (LoRA nodes). Anything else on the guider or its MODEL would be lost
on the way, so it is refused with the name of what added it; SamplerCustomAdvanced on the MGPU
Loader's MODEL runs every guider natively.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from ..workers.group.manager import MGPUModel
from ..workers.wire import model_call as wire
from ..workers.wire.requests import GuiderSpec

# The guider classes the ranks rebuild: "module.qualname" -> GuiderSpec.kind.
GUIDER_CLASSES = {
    "comfy.samplers.CFGGuider": "cfg",
    "comfy_extras.nodes_lt.Guider_LTXAVDualCFG": "dual",
    "comfy_extras.nodes_custom_sampler.Guider_Basic": "basic",
}
# The post-CFG closures of LTX's guidance nodes: qualname -> (pass kind, GuiderSpec field -> closure
# variable). Read by name: a ComfyUI that renames them is refused here, never misread.
EXTRA_PASS_FUNCTIONS = {
    "LTXVSpatioTemporalGuidance.execute.<locals>.post_cfg_function": (
        "stg",
        {"scale": "scale", "blocks": "block_set", "sigma_start": "sigma_start", "sigma_end": "sigma_end"},
    ),
    "LTXVModalityGuidance.execute.<locals>.post_cfg_function": (
        "modality",
        {"scale": "modality_scale", "sigma_start": "sigma_start", "sigma_end": "sigma_end"},
    ),
    "LTXVReferenceAudio.execute.<locals>.post_cfg_function": (
        "identity",
        {"scale": "scale", "sigma_start": "sigma_start", "sigma_end": "sigma_end"},
    ),
}
ELSEWHERE = "sample this GUIDER with SamplerCustomAdvanced on the MGPU Loader's MODEL instead"


def describe_guider(guider: Any, recipe: MGPUModel) -> GuiderSpec:
    """The GuiderSpec of `guider` for the group of `recipe`; ValueError saying what to change."""
    origin = f"{type(guider).__module__}.{type(guider).__qualname__}"
    kind = GUIDER_CLASSES.get(origin)
    if kind is None:
        raise ValueError(
            f"the SP Sampler runs CFGGuider, LTXVDualCFGGuider and BasicGuider in the workers; this GUIDER "
            f"is {origin}: {ELSEWHERE}"
        )
    patcher = guider.model_patcher
    call = getattr(getattr(patcher.model, "diffusion_model", None), "call", None)
    if call is None or not hasattr(call, "recipe"):
        raise ValueError(
            "the GUIDER's model is not the MGPU Loader's MODEL: connect the loader's MODEL output to the guider "
            "(through any LoRA or guidance nodes), or sample it with SamplerCustomAdvanced"
        )
    if _base(call.recipe) != _base(recipe):
        raise ValueError(
            "the GUIDER's MODEL comes from another MGPU Loader than mgpu_model: connect both from the same loader"
        )
    extra_passes, options = _split_options(guider.model_options)
    _refuse_patcher_extras(patcher)
    conds = {name: _conditioning(guider.original_conds[name], name) for name in guider.original_conds}
    if "positive" not in conds:
        raise ValueError("the GUIDER holds no positive conditioning; connect one to the guider")
    patch_token, patches = call.patch_sender.fields(getattr(patcher, "patches", None) or {})
    scales = {
        "cfg": {"cfg": float(getattr(guider, "cfg", 1.0))},
        "dual": {
            "cfg": float(getattr(guider, "video_cfg", 1.0)),
            "cfg_audio": float(getattr(guider, "audio_cfg", 1.0)),
        },
        "basic": {},
    }[kind]
    return GuiderSpec(
        kind=kind,
        positive=conds["positive"],
        negative=None if kind == "basic" else conds.get("negative"),
        options=options,
        extra_passes=tuple(extra_passes),
        patch_token=patch_token,
        patches=patches,
        **scales,
    )


def _base(recipe: MGPUModel) -> MGPUModel:
    # Which loader: the LoRA set and guidance groups are the SP Sampler's mgpu_model's own to set.
    return dataclasses.replace(recipe, loras=(), guidance_groups=0)


def _split_options(model_options: dict) -> tuple[list[dict], dict]:
    """(the extra passes of the post-CFG terms, the wire form of the model_options that travel)."""
    from .group_model.call import carried_options

    extra_passes, out = [], {}
    for key, value in model_options.items():
        if key == "sampler_post_cfg_function":
            extra_passes = [_extra_pass(function) for function in value]
        elif key == "disable_cfg1_optimization":
            out[key] = bool(value)
        elif key == "transformer_options":
            _refuse_functions(value, "transformer_options")
            out[key] = wire.encode(carried_options(value), "the GUIDER's transformer_options", _tensor)
        else:
            raise wire.NotCarried(f"the GUIDER's model_options[{key!r}]", value)
    return extra_passes, out


def _extra_pass(function: Any) -> dict:
    found = EXTRA_PASS_FUNCTIONS.get(getattr(function, "__qualname__", ""))
    if found is None or getattr(function, "__module__", "") != "comfy_extras.nodes_lt":
        raise ValueError(
            f"the GUIDER's MODEL has a post-CFG function {wire.origin_of(function)} that the workers cannot run "
            f"(they rebuild STG, LTXVModalityGuidance and LTXVReferenceAudio's identity guidance): {ELSEWHERE}"
        )
    kind, names = found
    cells = dict(zip(function.__code__.co_freevars, (c.cell_contents for c in function.__closure__ or ())))
    missing = sorted(set(names.values()) - set(cells))
    if missing:
        raise ValueError(
            f"this ComfyUI's {function.__qualname__.split('.')[0]} keeps no {missing}: the SP Sampler reads its "
            f"settings from them; {ELSEWHERE}"
        )
    out: dict[str, Any] = {"kind": kind}
    for field, name in names.items():
        value = cells[name]
        out[field] = sorted(int(b) for b in value) if field == "blocks" else float(value)
    return out


def _refuse_patcher_extras(patcher: Any) -> None:
    if patcher.object_patches:
        raise ValueError(
            f"the GUIDER's MODEL has object patches {sorted(patcher.object_patches)} (e.g. ModelSamplingLTXV), "
            f"which the SP Sampler does not carry to the workers: {ELSEWHERE}"
        )
    _refuse_functions(
        {level: getattr(patcher, level, None) for level in ("wrappers", "callbacks")}, "the GUIDER's MODEL"
    )


def _refuse_functions(holder: dict, where: str) -> None:
    """NotCarried for the first wrapper or callback in `holder` ({"wrappers" | "callbacks": {name: {key:
    [functions]}}}): the guider's loop runs in the ranks, where they would never be called."""
    for level in ("wrappers", "callbacks"):
        for name, by_key in (holder.get(level) or {}).items():
            for functions in by_key.values():
                for function in functions:
                    raise wire.NotCarried(f"{where} {level}[{name!r}]", function)


def _conditioning(entries: list[dict], name: str) -> list:
    """The guider's converted conditioning back as CONDITIONING ([[tensor, extras]]), wire form."""
    out = []
    for entry in entries:
        if "hooks" in entry:
            raise ValueError(
                f"the GUIDER's {name} conditioning has hooks, which the SP Sampler does not run: {ELSEWHERE}"
            )
        extras = {k: v for k, v in entry.items() if k not in ("cross_attn", "uuid")}
        out.append([entry.get("cross_attn"), extras])
    return wire.encode(out, f"the GUIDER's {name} conditioning", _tensor)


def _tensor(value: torch.Tensor, _where: str) -> dict:
    if value.numel() * value.element_size() < wire.INLINE_MAX_BYTES:
        return wire.inline_tensor(value)
    return {wire.TAG_STORE: 0, "value": value.detach().cpu().contiguous()}
