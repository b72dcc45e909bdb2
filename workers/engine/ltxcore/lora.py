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
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from .checkpoint import ComponentSpec, SafetensorsHeader, read_safetensors_header
from .fp8 import with_scaled_fp8
from .fp8_linear import Fp8Linear
from .model_forward import ForwardMode

# (down, up) suffix pairs ComfyUI's LoRAAdapter reads (comfy/weight_adapter/lora.py), ours first.
PAIR_SUFFIXES = ((".lora_A.weight", ".lora_B.weight"), (".lora_down.weight", ".lora_up.weight"))
ALPHA_SUFFIX = ".alpha"
LORA_PREFIX = "diffusion_model."  # ComfyUI / LTX-2 trainer files
KOHYA_PREFIX = "lora_unet_"
CHECKPOINT_PREFIX = "model.diffusion_model."  # where the same weights sit in a full checkpoint
# Worker commands that never run the transformer or its text connectors: the group manager does not
# switch LoRAs before them (a switch costs seconds on the 19B).
LORA_FREE_OPS = frozenset({"encode_text", "vae_decode", "load_model", "unload_model", "set_loras", "lora_state",
                           "ping", "fill_pattern", "sum_input", "steps", "fault"})  # fmt: skip

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
    """A LoRA file checked against one checkpoint. unused_keys: keys that change nothing in it."""

    path: Path
    targets: tuple[LoraTarget, ...]
    unused_keys: tuple[str, ...]


def read_lora(path: Path | str, checkpoint: SafetensorsHeader) -> LoraFile:
    """Read `path`'s header and map its pairs onto `checkpoint`'s weights (no tensor data is read).

    Raises ValueError naming the file when it is not safetensors, a pair is incomplete, shapes do not
    fit the checkpoint's weights (a LoRA for another model), or no key changes anything here.
    """
    lora = read_safetensors_header(path)
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
        weight_key = f"{CHECKPOINT_PREFIX}{name}.weight"
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


def _kohya_names(checkpoint: SafetensorsHeader) -> dict[str, str]:
    names = (
        k[len(CHECKPOINT_PREFIX) : -len(".weight")]
        for k in checkpoint.shapes
        if k.startswith(CHECKPOINT_PREFIX) and k.endswith(".weight")
    )
    return {KOHYA_PREFIX + name.replace(".", "_"): name for name in names}


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


@dataclass(frozen=True)
class SwitchReport:
    """What one switch did. restored: tensors re-read from the checkpoint; fused: tensors now holding
    a LoRA; fused_bytes: their size; seconds: wall time of the switch on this rank."""

    changed: bool
    restored: int = 0
    fused: int = 0
    fused_bytes: int = 0
    seconds: float = 0.0
    unused_keys: int = 0

    def as_dict(self) -> dict:
        return asdict(self)


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


def make_tiny_lora(
    path: Path | str,
    checkpoint: Path | str,
    rank: int = 4,
    seed: int = 0,
    alpha: float | None = None,
    prefixes: tuple[str, ...] = ("transformer_blocks.",),
) -> Path:
    """Write a LoRA for `checkpoint` in the released layout: bf16 `diffusion_model.<name>.lora_A/B.weight`
    for every attention q/k/v/out and feed-forward Linear under `prefixes` (as the distilled LoRA
    covers all of them), random A and B sized so B @ A is about a third of the weights (std 0.5/sqrt(in)
    against the tiny model's 1.5/sqrt(in)). `alpha`: also write `.alpha` scalars (kohya / ComfyUI style)."""
    header = read_safetensors_header(checkpoint)
    gen = torch.Generator().manual_seed(seed)
    tensors: dict[str, torch.Tensor] = {}
    for key in sorted(header.shapes):
        name = key[len(CHECKPOINT_PREFIX) : -len(".weight")] if key.startswith(CHECKPOINT_PREFIX) else ""
        if not name.startswith(prefixes) or not name.endswith(_LINEAR_NAMES):
            continue
        out_features, in_features = header.shapes[key]
        stem = LORA_PREFIX + name
        tensors[stem + ".lora_A.weight"] = (
            torch.randn(rank, in_features, generator=gen) / in_features**0.5
        ).to(torch.bfloat16)
        tensors[stem + ".lora_B.weight"] = (
            torch.randn(out_features, rank, generator=gen) * 0.5 / rank**0.5
        ).to(torch.bfloat16)
        if alpha is not None:
            tensors[stem + ALPHA_SUFFIX] = torch.tensor(float(alpha))
    path = Path(path)
    save_file(tensors, str(path))
    return path


_LINEAR_NAMES = (".to_q", ".to_k", ".to_v", ".to_out.0", "ff.net.0.proj", "ff.net.2")
