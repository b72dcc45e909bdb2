"""LoRAs fused into a loaded base in place and taken out again, without reloading the base.

LoRA files (the released distilled LoRA, IC-LoRAs, LTX-2 trainer output, ComfyUI's format): for each
weight `W` [out, in] of the diffusion model, `diffusion_model.<name>.lora_A.weight` [rank, in] and
`.lora_B.weight` [out, rank]; ComfyUI also accepts `.lora_down` / `.lora_up`, the bare `<name>`, the
kohya spelling `lora_unet_<name with _>`, and an optional scalar `<name>.alpha`. `<name>` is the
checkpoint key without `model.diffusion_model.` and `.weight` (ltx-core's
LTXV_LORA_COMFY_RENAMING_MAP strips `diffusion_model.` to reach the same module key).

Fusing, per the model's forward mode (the mode decides whose numbers we reproduce):
- comfyui (ComfyUI's LoraLoaderModelOnly): W' = dtype(W.float() + sum_i (s_i * a_i) * (B_i.float() @ A_i.float())),
  added one LoRA after the other, a_i = alpha_i / rank_i when the file has alpha, else 1.
- reference (ltx-core 1.0.0 apply_loras): d_i = dtype((B_i * s_i) @ A_i) in the LoRA's stored dtype,
  W' = dtype(sum_i d_i + W); alpha is ignored, as ltx-core does.
ComfyUI on GPUs where it prefers fp16 rounds its sum through fp16 (lora_compute_dtype); we keep fp32.

Where clean weights live: in the checkpoint file. A switch re-reads the tensors the old set touched
from the (memory-mapped) safetensors file and converts them exactly as loading did (dtype cast, fp8
scale fold), so the restore is bit-exact and costs no resident memory: the page cache that holds the
file is shared by every rank of the host. A per-rank copy of the touched weights would cost up to the
whole transformer (37 GB for the 19B with the distilled LoRA) of host RAM per rank. A checksum of each
clean tensor, taken before fusing, catches a checkpoint that changed on disk since.

fp8 Linears (fp8_linear.Fp8Linear, weight held in fp8): fused in float32 onto the clean weight read from
the file (never onto the once-rounded fp8 copy), the sum quantized per tensor once; restoring quantizes
the clean weight again, which gives back bit for bit what quantize_linears made. Before the first fuse
the file's weight is checked against the module (quantized, it must equal the fp8 weight held).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors import safe_open

from ...wire.lora_files import LoraFile, LoraSpec, LoraTarget, SwitchReport, active_loras, read_lora
from ...wire.model_files import SafetensorsHeader, read_safetensors_header
from .checkpoint import ComponentSpec, with_scaled_fp8
from .fp8_linear import Fp8Linear
from .model_forward import ForwardMode


@dataclass(frozen=True)
class FuseTarget:
    """A module that LoRAs may change and the component spec its weights were loaded with (ours, in
    checkpoint.py: the transformer, the text connectors)."""

    module: torch.nn.Module
    spec: ComponentSpec


@dataclass(frozen=True)
class SwitchPlan:
    """A checked switch: `key` the new set (as compared between jobs), `files` its LoRA files with their
    strengths in order, `terms` checkpoint key -> the LoRAs that change it, `params` every weight to
    write (restored and/or fused) -> (parameter, the spec it was loaded with)."""

    key: LoraSpec
    files: tuple[tuple[LoraFile, float], ...]
    terms: Mapping[str, list[tuple[LoraFile, LoraTarget, float]]]
    params: Mapping[str, tuple[torch.nn.Parameter | Fp8Linear, ComponentSpec]]


@dataclass
class LoraFuser:
    """The LoRA set fused into one loaded base, on one rank. Holds no tensors (only which checkpoint
    keys are fused and a checksum of each one's clean value), so it never keeps a model alive.

    checkpoint: the file the base was loaded from; dtype: the dtype it was loaded in; mode: whose fusing
    formula to follow.
    """

    checkpoint: Path
    dtype: torch.dtype
    mode: ForwardMode
    active: LoraSpec = ()
    fused: dict[str, tuple[float, float]] = field(default_factory=dict)  # checkpoint key -> clean checksum
    header: SafetensorsHeader = field(init=False)
    _specs: dict[str, ComponentSpec] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.header = read_safetensors_header(self.checkpoint)

    def plan(self, targets: Sequence[FuseTarget], loras: Iterable[tuple[str, float]]) -> SwitchPlan | None:
        """Check a LoRA set against the checkpoint and the loaded modules (headers only, no weight is
        changed). None when that set is already fused. Raises ValueError naming what does not fit."""
        key = active_loras(loras)
        if key == self.active:
            return None
        files = tuple((read_lora(path, self.header), strength) for path, strength in key)
        terms: dict[str, list[tuple[LoraFile, LoraTarget, float]]] = {}
        for lora, strength in files:
            for target in lora.targets:
                terms.setdefault(target.weight_key, []).append((lora, target, strength))
        params = self._resolve(targets, sorted(set(self.fused) | set(terms)))
        return SwitchPlan(key, files, terms, params)

    def apply(self, plan: SwitchPlan) -> SwitchReport:
        """Restore the weights the current set touched (from the file) and fuse `plan`'s set, one weight
        at a time. An error here leaves the weights unknown: the caller must drop the model."""
        start = time.perf_counter()
        restored = fused_bytes = 0
        with ExitStack() as stack, torch.no_grad():
            ckpt = stack.enter_context(safe_open(str(self.checkpoint), framework="pt", device="cpu"))
            files = {
                lora.path: stack.enter_context(safe_open(str(lora.path), framework="pt", device="cpu"))
                for lora, _ in plan.files
            }
            for key, (param, spec) in plan.params.items():
                fp8, weight = isinstance(param, Fp8Linear), _weight(param)
                if key in self.fused or fp8:  # an fp8 weight is always fused onto the file's clean one
                    clean = self._read_clean(ckpt, key, spec, param)
                    restored += int(key in self.fused)
                else:
                    clean = param.detach().clone()
                if key in plan.terms:
                    terms = [_term(files[lora.path], t, s, weight.device) for lora, t, s in plan.terms[key]]
                    new = self._fuse(clean.float() if fp8 else clean, terms)
                    self.fused[key] = self.fused.get(key) or checksum(clean)
                    fused_bytes += weight.numel() * weight.element_size()
                else:
                    new = clean
                    self.fused.pop(key, None)
                if fp8:
                    param.set_weight(new)
                else:
                    param.copy_(new)
        if any(_weight(p).device.type == "cuda" for p, _ in plan.params.values()):
            torch.cuda.synchronize()
        self.active = plan.key
        unused = sum(len(lora.unused_keys) for lora, _ in plan.files)
        return SwitchReport(True, restored, len(plan.terms), fused_bytes, time.perf_counter() - start, unused)

    def switch(self, targets: Sequence[FuseTarget], loras: Iterable[tuple[str, float]]) -> SwitchReport:
        """plan + apply (in-process use and tests)."""
        plan = self.plan(targets, loras)
        return SwitchReport(changed=False) if plan is None else self.apply(plan)

    def _resolve(
        self, targets: Sequence[FuseTarget], keys: list[str]
    ) -> dict[str, tuple[torch.nn.Parameter | Fp8Linear, ComponentSpec]]:
        named = [(_weights(t.module), self._loading_spec(t.spec)) for t in targets]
        found = {}
        for key in keys:
            for params, spec in named:
                param = params.get(spec.sd_ops.apply_to_key(key) or "")
                if param is not None:
                    found[key] = (param, spec)
                    break
            else:
                raise ValueError(
                    f"{key} of {self.checkpoint.name} is not a weight of the loaded transformer or text connectors"
                )
        return found

    def _loading_spec(self, spec: ComponentSpec) -> ComponentSpec:
        """`spec` as checkpoint.py loaded this file (fp8 scales folded into self.dtype), made once."""
        if spec.name not in self._specs:
            self._specs[spec.name] = with_scaled_fp8(spec, self.header, self.dtype)
        return self._specs[spec.name]

    def _read_clean(
        self, ckpt, key: str, spec: ComponentSpec, param: torch.Tensor | Fp8Linear
    ) -> torch.Tensor:
        """`key` converted as loading converted it (device, SDOps incl. the fp8 fold, then dtype), before
        any fp8 quantization."""
        fp8 = isinstance(param, Fp8Linear)
        value = ckpt.get_tensor(key).to(device=_weight(param).device)
        (result,) = spec.sd_ops.apply_to_key_value(spec.sd_ops.apply_to_key(key), value)
        clean = result.new_value.to(dtype=param.source_dtype if fp8 else param.dtype)
        if key in self.fused:
            changed = checksum(clean) != self.fused[key]
        else:  # an fp8 weight before its first fuse: the module must hold this file weight, quantized
            changed = fp8 and not param.holds(clean)
        if changed:
            raise RuntimeError(
                f"{self.checkpoint} changed on disk since it was loaded ({key} differs), so its clean weights "
                "cannot be restored; the model is reloaded on the next run"
            )
        return clean

    def _fuse(
        self, clean: torch.Tensor, terms: list[tuple[torch.Tensor, torch.Tensor, float, float]]
    ) -> torch.Tensor:
        if (
            self.mode is ForwardMode.REFERENCE
        ):  # ltx-core 1.0.0 fuse_loras._prepare_deltas / _fuse_delta_with_bfloat16
            deltas = [
                torch.matmul(up * strength, down).to(dtype=clean.dtype) for up, down, strength, _ in terms
            ]
            delta = deltas[0] if len(deltas) == 1 else torch.sum(torch.stack(deltas, dim=0), dim=0)
            return delta.add_(clean).to(dtype=clean.dtype)
        weight = clean.to(
            torch.float32, copy=True
        )  # ComfyUI ModelPatcher.patch_weight_to_device + LoRAAdapter
        for up, down, strength, alpha in terms:
            lora_diff = torch.mm(up.float().flatten(start_dim=1), down.float().flatten(start_dim=1)).reshape(
                weight.shape
            )
            weight += (strength * alpha) * lora_diff
        return weight.to(clean.dtype)


def _weights(module: torch.nn.Module) -> dict[str, torch.nn.Parameter | Fp8Linear]:
    """Parameters by name, and each Fp8Linear by the name of its weight (a buffer, not a Parameter)."""
    found: dict[str, torch.nn.Parameter | Fp8Linear] = dict(module.named_parameters())
    found.update((f"{name}.weight", m) for name, m in module.named_modules() if isinstance(m, Fp8Linear))
    return found


def _weight(param: torch.nn.Parameter | Fp8Linear) -> torch.Tensor:
    return param.weight if isinstance(param, Fp8Linear) else param


def _term(
    f, target: LoraTarget, strength: float, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor, float, float]:
    """(up, down, strength, alpha / rank or 1) of one target, the factors on `device` in their stored dtype."""
    down = f.get_tensor(target.down_key).to(device)
    up = f.get_tensor(target.up_key).to(device)
    alpha = f.get_tensor(target.alpha_key).item() / down.shape[0] if target.alpha_key else 1.0
    return up, down, strength, alpha


def checksum(t: torch.Tensor) -> tuple[float, float]:
    """Sum and sum of squares in float64: equal for equal tensors on one device, different for any
    realistic change of a checkpoint tensor."""
    d = t.detach().double()
    return float(d.sum()), float(d.square().sum())
