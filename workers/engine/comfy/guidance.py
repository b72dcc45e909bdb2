"""A native GUIDER rebuilt in a rank (NOTE [guider in the workers] in nodes/guider_spec.py).

The UI process described the guider (workers/wire/requests.GuiderSpec); here it becomes ComfyUI's
own CFGGuider (or the dual-scale form of LTXVDualCFGGuider) on this rank's patcher, with the same
conditioning and the same model_options, so ComfyUI's sampling_function composes it as natively.
The post-CFG terms of LTX's guidance nodes are closures in the UI process and cannot travel: each
is rebuilt here as an `ExtraPass`, the same arithmetic on the same arguments (the nodes'
post_cfg_function in comfy_extras/nodes_lt.py). Import only after bootstrap.import_comfyui.
"""

from __future__ import annotations

import math
from typing import Any

import comfy.patcher_extension
import comfy.samplers
import torch

from . import attention_backend
from .model_call import decode_call
from .sampling import DualScaleGuider

# transformer_options key naming which extra pass a model call serves: guidance_parallel.py serves
# those calls from the outputs it computed for the whole step at once.
PASS_KEY = "ltx2_mgpu_guidance_pass"


class ExtraPass:
    """One post-CFG guidance term: denoised + (cond_denoised - pass) * weight, where `pass` is one more
    model call on the positive conditioning with something taken away; active for sigmas in
    [sigma_end, sigma_start]."""

    def __init__(self, kind: str, scale: float, sigma_start: float, sigma_end: float, blocks=()) -> None:
        self.kind, self.scale = kind, float(scale)
        self.sigma_start, self.sigma_end = float(sigma_start), float(sigma_end)
        self.blocks = frozenset(int(b) for b in blocks)

    @classmethod
    def from_spec(cls, extra: dict) -> ExtraPass:
        """From a GuiderSpec.extra_passes entry."""
        return cls(
            extra["kind"], extra["scale"], extra["sigma_start"], extra["sigma_end"], extra.get("blocks", ())
        )

    @property
    def weight(self) -> float:
        # LTXVModalityGuidance pushes by (modality_scale - 1); the others by their scale.
        return self.scale - 1.0 if self.kind == "modality" else self.scale

    def could_run(self) -> bool:
        """False when the node's settings switch the term off at every sigma (no extra pass)."""
        if self.kind == "stg":
            return self.scale != 0 and bool(self.blocks)
        if self.kind == "modality":
            return not math.isclose(self.scale, 1.0)
        return self.scale != 0

    def active(self, sigma: torch.Tensor) -> bool:
        if not self.could_run():
            return False
        value = sigma[0].item()
        return not (value > self.sigma_start or value < self.sigma_end)

    def call_for(self, cond: list, model_options: dict) -> tuple[list, dict]:
        """The conditioning and model_options of this term's model call."""
        options = model_options.copy()
        transformer_options = options.get("transformer_options", {}).copy()
        transformer_options[PASS_KEY] = self.kind
        if self.kind == "stg":
            transformer_options["stg_self_attn_blocks"] = self.blocks
        elif self.kind == "modality":
            transformer_options["a2v_cross_attn"] = False
            transformer_options["v2a_cross_attn"] = False
        else:  # identity: the positive without its reference audio
            cond = [_without_reference_audio(entry) for entry in cond]
        options["transformer_options"] = transformer_options
        return cond, options

    def __call__(self, args: dict) -> torch.Tensor:
        if not self.active(args["sigma"]):
            return args["denoised"]
        cond, options = self.call_for(args["cond"], args["model_options"])
        (pred,) = comfy.samplers.calc_cond_batch(args["model"], [cond], args["input"], args["sigma"], options)
        return args["denoised"] + (args["cond_denoised"] - pred) * self.weight


def _without_reference_audio(entry: dict) -> dict:
    out = entry.copy()
    model_conds = out.get("model_conds", {}).copy()
    model_conds.pop("ref_audio", None)
    out["model_conds"] = model_conds
    return out


def build_guider(patcher: Any, spec: Any, device: torch.device) -> comfy.samplers.CFGGuider:
    """ComfyUI's guider for `spec` (a GuiderSpec) on `patcher`, whose clone takes the spec's
    model_options and extra passes."""
    patcher = patcher.clone()
    # A GuiderSpec stores every tensor (never a cached id): each field decodes with a throwaway cache.
    options = decode_call(spec.options or {}, {}, device)
    transformer_options = options.pop("transformer_options", None)
    attention_backend.check(transformer_options)  # ValueError: a backend this ComfyUI lacks
    if transformer_options:
        patcher.model_options["transformer_options"] = comfy.patcher_extension.merge_nested_dicts(
            patcher.model_options.setdefault("transformer_options", {}), transformer_options
        )
    patcher.model_options.update(options)
    for extra in spec.extra_passes:
        patcher.set_model_sampler_post_cfg_function(ExtraPass.from_spec(extra))
    positive = decode_call(spec.positive, {}, device)
    if spec.kind == "dual":
        guider = DualScaleGuider(patcher)
        guider.set_scales(spec.cfg, spec.cfg_audio)
        guider.set_conds(positive, decode_call(spec.negative, {}, device))
    elif spec.kind == "cfg":
        guider = comfy.samplers.CFGGuider(patcher)
        guider.set_cfg(spec.cfg)
        guider.set_conds(positive, decode_call(spec.negative, {}, device))
    else:  # basic: the positive alone, cfg 1
        guider = comfy.samplers.CFGGuider(patcher)
        guider.inner_set_conds({"positive": positive})
    return guider


def passes_per_step(spec: Any | None, cfg: float, cfg_audio: float | None) -> int:
    """The most model passes one step of this guidance runs (the plan's P)."""
    if spec is None:
        needs_uncond = not math.isclose(cfg, 1.0) or (
            cfg_audio is not None and not math.isclose(cfg_audio, 1.0)
        )
        return 2 if needs_uncond else 1
    options = spec.options or {}
    if spec.kind == "basic":
        base = 1
    elif spec.kind == "dual":
        base = 2  # the dual guider always runs the uncond pass
    else:
        base = 2 if not math.isclose(spec.cfg, 1.0) or options.get("disable_cfg1_optimization") else 1
    extras = [e for e in spec.extra_passes if ExtraPass.from_spec(e).could_run()]
    return base + len(extras)
