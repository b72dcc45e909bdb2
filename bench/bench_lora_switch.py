"""What a LoRA switch costs on the 19B shape: fuse, restore from the checkpoint file, both at once.

    python bench/bench_lora_switch.py --layers 8 --out lora_switch.json     # CUDA; ~9 GB of disk

Writes, in --dir, a checkpoint of the 19B transformer's first `--layers` blocks (the real key layout and
widths, random bf16 weights, the non-block layers whole), its fp8 variant (workers/fp8.make_tiny_fp8,
block 0 kept in bf16 as the released files keep theirs), and a rank-384 LoRA over every attention
and feed-forward Linear of those blocks (what the distilled LoRA covers: its 7.4 GB file fits that
coverage at rank 384). Then on cuda:0, per file and fusing formula, with workers/lora.LoraFuser as a
worker runs it: fuse onto the clean base, restore the base, fuse again, change the strength (restore
and fuse in one pass); a restore with a cold page cache (as root: drop_caches); a full reload of the
transformer for comparison. The touched bytes scale with the block count, so `*_per_19b_s` multiply
by 48 / layers. Memory: the largest GPU allocation above the loaded model during switches, and the
process's resident memory before and after (a per-rank copy of the clean weights would add the
touched bytes; the file restore adds none).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from pathlib import Path

import psutil
import torch
from ltx_core.model.transformer import LTXModelConfigurator
from safetensors.torch import save_file

from ltx2_mgpu.workers.embedded.tiny_model import tiny_checkpoint_config
from ltx2_mgpu.workers.embedded.tiny_variants import make_tiny_fp8, make_tiny_lora
from ltx2_mgpu.workers.engine.ltxcore.checkpoint import TRANSFORMER, load_transformer
from ltx2_mgpu.workers.engine.ltxcore.lora import FuseTarget, LoraFuser
from ltx2_mgpu.workers.engine.ltxcore.model_forward import ForwardMode
from ltx2_mgpu.workers.wire.released_configs import LTX2_19B_TRANSFORMER

# The released 19B shape, shared with the other benchmarks (workers/wire/released_configs.py); layers set per run.
REAL_19B = {k: v for k, v in LTX2_19B_TRANSFORMER.items() if k != "num_layers"}
FULL_LAYERS = 48
LORA_RANK = 384  # ltx-2-19b-distilled-lora-384
WEIGHT_STD = 0.02


def write_checkpoint(path: Path, layers: int, device: torch.device) -> None:
    config = tiny_checkpoint_config()
    transformer = {**config["transformer"], **REAL_19B, "num_layers": layers}
    with torch.device("meta"):
        model = LTXModelConfigurator.from_config({"transformer": transformer})
    tensors = {}
    gen = torch.Generator(device=device).manual_seed(0)
    for key, value in model.state_dict().items():
        t = torch.randn(value.shape, generator=gen, device=device, dtype=torch.float32) * WEIGHT_STD
        tensors[f"model.diffusion_model.{key}"] = t.to(torch.bfloat16).cpu()
    save_file(tensors, str(path), metadata={"config": json.dumps({"transformer": transformer})})


def drop_page_cache() -> bool:
    try:
        subprocess.run(["sync"], check=True)
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed_switch(fuser: LoraFuser, targets, loras) -> dict:
    report = fuser.switch(targets, loras)
    return {"seconds": report.seconds, "restored": report.restored, "fused": report.fused}


def measure(checkpoint: Path, lora: Path, mode: ForwardMode, device: torch.device, scale: float) -> dict:
    cuda = device.type == "cuda"
    rss = psutil.Process().memory_info().rss
    sync(device)
    start = time.perf_counter()
    model = load_transformer(checkpoint, device, torch.bfloat16)
    sync(device)
    load_s = time.perf_counter() - start
    model_bytes = torch.cuda.memory_allocated(device) if cuda else 0
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    fuser = LoraFuser(checkpoint, torch.bfloat16, mode)
    targets = [FuseTarget(model, TRANSFORMER)]
    steps = {
        "fuse": timed_switch(fuser, targets, [(str(lora), 1.0)]),
        "restore": timed_switch(fuser, targets, []),
        "fuse_again": timed_switch(fuser, targets, [(str(lora), 1.0)]),
        "change_strength": timed_switch(fuser, targets, [(str(lora), 0.5)]),
    }
    fused_bytes = fuser.switch(targets, [(str(lora), 0.25)]).fused_bytes
    cold = drop_page_cache()
    steps["restore_cold_cache" if cold else "restore_warm_again"] = timed_switch(fuser, targets, [])
    peak_extra = torch.cuda.max_memory_allocated(device) - model_bytes if cuda else 0
    rss_after = psutil.Process().memory_info().rss
    del model, targets
    if cuda:
        torch.cuda.empty_cache()
    return {
        "checkpoint": checkpoint.name,
        "mode": mode.value,
        "load_s": load_s,
        "load_per_19b_s": load_s * scale,
        "touched_bytes": fused_bytes,
        "touched_per_19b_gb": fused_bytes * scale / 1e9,
        "steps": {k: {**v, "per_19b_s": v["seconds"] * scale} for k, v in steps.items()},
        "peak_gpu_above_model_gb": peak_extra / 1e9,
        "rss_growth_gb": (rss_after - rss) / 1e9,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/lora_bench"))
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--device", default="cuda:0", help="cpu: a smoke run of the script itself")
    args = parser.parse_args()
    device = torch.device(args.device)
    args.dir.mkdir(parents=True, exist_ok=True)
    checkpoint, fp8 = args.dir / "ltx2-19b-shape.safetensors", args.dir / "ltx2-19b-shape-fp8.safetensors"
    lora = args.dir / "lora-384.safetensors"
    start = time.perf_counter()
    write_checkpoint(checkpoint, args.layers, device)
    make_tiny_fp8(checkpoint, fp8)
    make_tiny_lora(lora, checkpoint, rank=LORA_RANK, seed=1)
    written_s = time.perf_counter() - start
    scale = FULL_LAYERS / args.layers
    results = {
        "layers": args.layers,
        "scale_to_19b": scale,
        "files_gb": {p.name: p.stat().st_size / 1e9 for p in (checkpoint, fp8, lora)},
        "write_s": written_s,
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "cpu_count": os.cpu_count(),
        "runs": [
            measure(path, lora, mode, device, scale)
            for path in (checkpoint, fp8)
            for mode in (ForwardMode.COMFYUI, ForwardMode.REFERENCE)
        ],
    }
    text = json.dumps(results, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
