"""What switching a LoRA on and off between stages costs on the 22B, fused as ComfyUI fuses it and kept
beside the base (engine/comfy/weight_sets.py, NOTE [kept weight sets]), in one run:

    COMFYUI_PATH=/path/to/ComfyUI python bench/bench_lora_sets.py --family 2.3 --weights fp8 --out x.json
    COMFYUI_PATH=/path/to/ComfyUI python bench/bench_lora_sets.py --family 2.5 --weights int8 --out x.json

ComfyUI imported in this process; the 22B transformer of --family with random weights in --weights
(random_model.py: fp8 scaled as the 2.3 template's file, int8 convrot as the 2.5 template's) held by a
ModelPatcher whose backup lives in host memory, as a loaded file's does; a LoRA of --rank (384: the
distilled LoRA's) over every attention and feed-forward Linear of the blocks, its tensors in host
memory as ComfyUI's LoRA loader leaves them, mapped by ComfyUI's own LoRA loading. Then per mode,
--repeats times: switch to the LoRA (stage 2) and back to the base (the next job's stage 1), each
timed to the end of the GPU's work:
- fused: ComfyUI's load_models_gpu on the LoRA's clone, then on the base (what native does);
- kept: weight_sets.make_live (the first switch computes the set, the later ones swap it in).
The weights each mode leaves are compared bit for bit (a digest of every patched tensor's bytes).
`--tiny` runs the tiny configuration on the CPU (a smoke test of the script). Writes JSON (--out).
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import torch
from bench_report import add_comfyui_argument, comfyui_root, finish
from step_sizes import AUDIO_FRAMES, SHAPES, TINY, TINY_SHAPES

from ltx2_mgpu.workers.wire.released_configs import LTX2_19B_TRANSFORMER

GIB = 2**30
TARGETS = (".to_q.", ".to_k.", ".to_v.", ".to_out.0.", ".ff.net.", ".audio_ff.net.")


def random_lora(patcher, rank: int, seed: int) -> dict[str, torch.Tensor]:
    """A LoRA file's tensors (host memory, bf16) for every targeted Linear of the blocks."""
    device = patcher.load_device
    gen = torch.Generator(device=device).manual_seed(seed)
    tensors = {}
    for key, weight in patcher.model.diffusion_model.state_dict().items():
        name = key[: -len(".weight")]
        if not (key.startswith("transformer_blocks.") and key.endswith(".weight") and len(weight.shape) == 2):
            continue
        if not any(t in key for t in TARGETS):
            continue
        out_features, in_features = weight.shape
        down = torch.randn(rank, in_features, generator=gen, device=device) * (0.5 / in_features**0.5)
        up = torch.randn(out_features, rank, generator=gen, device=device) * (0.02 / rank**0.5)
        tensors[f"diffusion_model.{name}.lora_A.weight"] = down.to(torch.bfloat16).cpu()
        tensors[f"diffusion_model.{name}.lora_B.weight"] = up.to(torch.bfloat16).cpu()
    return tensors


def lora_clone(patcher, tensors: dict):
    import comfy.lora
    import comfy.lora_convert

    key_map = comfy.lora.model_lora_keys_unet(patcher.model, {})
    clone = patcher.clone()
    patched = clone.add_patches(comfy.lora.load_lora(comfy.lora_convert.convert_lora(tensors), key_map), 1.0)
    return clone, len(patched)


def digest(patcher, keys) -> list[int]:
    """Per key: the sum of its bytes read as int32 words, and position-weighted (exact integers)."""
    import comfy.utils

    out = []
    for key in keys:
        tensor = comfy.utils.get_attr(patcher.model, key)
        parts = [getattr(tensor, "_qdata", None)]
        parts = [tensor] if parts[0] is None else [parts[0], *_scales(tensor)]
        for part in parts:
            words = part.detach().contiguous().view(-1).view(torch.uint8)
            words = words[: words.numel() // 4 * 4].view(torch.int32).to(torch.int64)
            weights = torch.arange(words.numel(), device=words.device) % 7 + 1
            out += [int(words.sum()), int((words * weights).sum())]
    return out


def _scales(tensor) -> list[torch.Tensor]:
    params = tensor._params
    return [getattr(params, name) for name in params._tensor_fields()]


def timed(fn, device) -> tuple[float, object]:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    result = fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start, result


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--family", choices=("2", "2.3", "2.5"), default="2.3")
    parser.add_argument("--weights", choices=("bf16", "fp8", "int8"), default="fp8")
    parser.add_argument("--rank", type=int, default=384, help="the LoRA's rank (384: the distilled LoRA's)")
    parser.add_argument("--repeats", type=int, default=3, help="LoRA on / off rounds per mode")
    parser.add_argument("--tiny", action="store_true", help="CPU smoke run with the tiny configuration")
    parser.add_argument(
        "--step-tokens",
        type=int,
        default=0,
        help="also time a CFG step at this video size (6144, 24576; tiny: 96)",
    )
    add_comfyui_argument(parser)
    args = parser.parse_args(argv)
    root = comfyui_root(parser, args)
    device = torch.device("cpu" if args.tiny else "cuda:0")
    from ltx2_mgpu.workers.engine.comfy.bootstrap import import_comfyui

    import_comfyui(root, device)
    import comfy.model_management as mm
    import comfy.model_patcher

    from ltx2_mgpu.workers.engine.comfy.model import ComfyModel
    from ltx2_mgpu.workers.engine.comfy.random_model import family_config, random_base_model
    from ltx2_mgpu.workers.engine.comfy.weight_sets import ENV, make_live
    from ltx2_mgpu.workers.engine.comfy.weights import make_resident

    config = family_config({**LTX2_19B_TRANSFORMER, **(TINY if args.tiny else {})}, args.family)
    dtype = torch.float32 if args.tiny else torch.bfloat16
    base_model = random_base_model(config, device, dtype, seed=0, weights=args.weights)
    # A loaded file's patcher: the backup of patched weights goes to host memory (unet_offload_device).
    base = comfy.model_patcher.ModelPatcher(
        base_model, load_device=device, offload_device=torch.device("cpu")
    )
    mm.load_models_gpu([base], force_full_load=True)
    model = ComfyModel(path=Path("random"), dtype=None, patcher=base)
    tensors = random_lora(base, args.rank, seed=1)
    lora_bytes = sum(t.numel() * t.element_size() for t in tensors.values())
    loaded = torch.cuda.memory_allocated(device) / GIB if device.type == "cuda" else 0.0

    report: dict = {
        "machine": platform.node(),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "comfyui": {"version": root.version},
        "family": args.family,
        "weights": args.weights,
        "config": "tiny"
        if args.tiny
        else {"2": "ltx-2-19b", "2.3": "ltx-2.3-22b", "2.5": "ltx-2.5-22b"}[args.family],
        "lora_rank": args.rank,
        "lora_gib": lora_bytes / GIB,
        "model_gib_on_device": loaded,
    }
    digests = {}
    step = step_timer(args, config, device)
    if step:
        report["base_step_ms"] = step(base)
    for mode in ("fused", "kept", "unfused"):
        os.environ[ENV] = mode
        on, off, hows, steps = [], [], [], []
        for repeat in range(args.repeats):
            # what a LoRA node gives each run: its patches mapped, the tensors in host memory
            clone, patched = lora_clone(base, tensors)
            if mode == "fused":
                seconds, _ = timed(lambda c=clone: make_resident(c), device)
                live = clone
                digests.setdefault(mode, digest(clone, sorted(clone.patches)))
            else:
                seconds, switch = timed(lambda c=clone, m=mode: make_live(model, c, ("bench", m)), device)
                live = switch.patcher
                hows.append(switch.how)
                if mode == "kept":
                    digests.setdefault(mode, digest(clone, sorted(clone.patches)))
                    report["kept_gib"] = switch.kept_bytes / GIB
            on.append(seconds)
            if step and repeat == 0:
                steps = step(live)
            if mode == "fused":
                seconds, _ = timed(lambda: make_resident(base), device)
            else:
                seconds, switch = timed(lambda: make_live(model, base, ()), device)
                hows.append(switch.how)
            off.append(seconds)
        report[mode] = {"lora_on_s": on, "lora_off_s": off, "patched_weights": patched}
        if hows:
            report[mode]["how"] = hows
        if steps:
            report[mode]["step_ms"] = steps
        if device.type == "cuda":
            report[mode]["memory_allocated_gib"] = torch.cuda.memory_allocated(device) / GIB
        print(mode, report[mode], flush=True)
    os.environ.pop(ENV, None)
    report["same_weights_bit_for_bit"] = digests["fused"] == digests["kept"]
    return finish(report, args.out, argv)


def step_timer(args, config: dict, device):
    """fn(patcher) -> ms of 2 CFG steps at --step-tokens (None without): the LoRA's cost per step."""
    if not args.step_tokens:
        return None
    from ltx2_mgpu.workers.engine.comfy.bench import random_job_inputs, time_steps
    from ltx2_mgpu.workers.engine.comfy.random_model import context_width

    shape = (TINY_SHAPES if args.tiny else SHAPES)[args.step_tokens]
    inputs = random_job_inputs(
        list(shape), AUDIO_FRAMES, config["caption_channels"], 0, context_width(config)
    )
    return lambda patcher: time_steps(patcher, inputs, 2, device)


if __name__ == "__main__":
    main()
