"""Benchmark of the Distributed VAE Decode: time and per-worker peak memory against the rank count,
and the shared-memory hand-back of the decoded frames against a plain memcpy of the same size.

    python bench/bench_vae.py --out vae_cpu.json                      # tiny model, CPU ranks 1 2 3
    python bench/bench_vae.py --gpu --out vae_gpu.json                # LTX-2's VAE at 1024x1536x121, GPUs
    COMFYUI_PATH=... python bench/bench_vae.py --comfy --out vae_comfy.json  # comfy backend vs VAEDecode, 1 GPU

Each case starts a worker group (one process per rank), decodes once to load the decoder (not
timed), then `--repeats` times through the same command the node runs ("vae_decode", auto tiles
unless --tile-size is given). Per case: the client's wall time (best), each rank's seconds per phase
(decode, write into the IMAGE, overlap exchange, blend), tiles, and peak memory during the job
(CPU: peak resident set, which counts the IMAGE pages the rank wrote; CUDA: torch's peak allocated;
`job_memory_bytes` = peak minus the figure when the job started, i.e. without the weights).

Hand-back: ranks write their frames straight into the shared-memory IMAGE the node returns (no
gather, no copy afterwards). `handback_GBps` = bytes a rank wrote / seconds it spent writing (that
includes the channels-last layout change and, on GPUs, the device-to-host copy through a reused
pinned buffer); it is set against a
plain memcpy of a tensor of the IMAGE's size in the bench process, into fresh pages (first touch, as
the IMAGE is fresh each job), into touched pages and into pre-faulted ones, and on --gpu a
device-to-host copy. Each case runs with every `--prefault` setting (default: auto and off, i.e.
with and without pre-faulting the IMAGE pages while decoding, NOTE [shm prefault] in
workers/strategies/shm_prefault.py), the settings interleaved repeat by repeat, and reports them side by side. Per rank:
write_s includes waiting for the pre-fault thread (prefault_wait_s); prefault_s is that thread's time.

CPU ranks get `--threads-per-rank` threads (default 1) so rank counts compare equal work per core;
on a machine with C cores keep ranks <= C. --gpu: the LTX-2 (19B) video decoder's configuration
(conv_in 128->1024, 4 x 5 res blocks, three 2x2x2 residual upsamplers, base 128 channels; diffusers'
LTX-2.0 conversion config) with random weights, in a checkpoint whose other parts are the tiny
model's, bf16, one GPU per rank (ranks default 1, 2, 4, 8 up to the GPUs present).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import torch

from ltx2_mgpu.workers.embedded import tiny_model
from ltx2_mgpu.workers.group import launcher
from ltx2_mgpu.workers.group.client import output_slot
from ltx2_mgpu.workers.group.manager import MGPUModel, get_manager
from ltx2_mgpu.workers.strategies import shm_prefault
from ltx2_mgpu.workers.strategies.vae_tiles import TileSettings
from ltx2_mgpu.workers.wire import shm
from ltx2_mgpu.workers.wire.vae_outputs import image_shape

TINY_LATENT = (4, 16, 24)  # 25 frames of 512 x 768
REAL_LATENT = (16, 32, 48)  # 121 frames of 1024 x 1536 (the figure)
# LTX-2's video decoder, listed pixel side first as the released config lists it (ltx-core runs it
# reversed): 5 res blocks per level, residual 2x2x2 upsamplers that halve the channels.
LTX2_DECODER_BLOCKS = [
    ["res_x", {"num_layers": 5, "inject_noise": False}],
    ["compress_all", {"residual": True, "multiplier": 2}],
    ["res_x", {"num_layers": 5, "inject_noise": False}],
    ["compress_all", {"residual": True, "multiplier": 2}],
    ["res_x", {"num_layers": 5, "inject_noise": False}],
    ["compress_all", {"residual": True, "multiplier": 2}],
    ["res_x", {"num_layers": 5, "inject_noise": False}],
]
LTX2_DECODER_BASE_CHANNELS = 128
GB = 1e9


def real_vae_checkpoint(directory: Path, seed: int = 0) -> Path:
    """The tiny checkpoint with LTX-2's full-size video decoder (random weights, ~1 GB in bf16)."""
    config = tiny_model.tiny_checkpoint_config()
    config["vae"] = {
        **config["vae"],
        "decoder_blocks": LTX2_DECODER_BLOCKS,
        "decoder_base_channels": LTX2_DECODER_BASE_CHANNELS,
    }
    tensors: dict[str, torch.Tensor] = {}
    # The tiny model's own writer (meta modules -> seeded values -> one safetensors file).
    for build, to_file_key in tiny_model._checkpoint_components(config):
        tensors.update(tiny_model._random_tensors(build(), to_file_key, seed))
    path = directory / "ltx2-tiny-with-ltx2-vae.safetensors"
    tiny_model._save(tensors, config, path)
    return path


def memcpy_GBps(nbytes: int, device: str = "cpu", repeats: int = 3) -> dict:
    """Best-of copy bandwidth of `nbytes` float32 from `device`: into fresh private pages, touched
    pages, fresh, touched and pre-faulted (shm_prefault.prefault, not timed) shared-memory pages (the IMAGE
    is a fresh segment every job: its first write pays the page faults), and for a GPU source also
    into pinned memory. Also the rate of shm_prefault.prefault itself on a fresh segment."""
    numel = nbytes // 4
    src = torch.rand(numel, device=device)
    out: dict[str, float] = {}
    prefix = "memcpy" if device == "cpu" else "d2h"

    def best(label: str, make_dst) -> None:
        times = []
        for _ in range(repeats):
            dst, release = make_dst()
            if device != "cpu":
                torch.cuda.synchronize()
            start = time.perf_counter()
            dst.copy_(src)
            if device != "cpu":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
            release()
        out[f"{prefix}_{label}_GBps"] = round(nbytes / min(times) / GB, 3)

    prefault_s: list[float] = []

    def shared(prepare: str = ""):
        spec, tensor = shm.create((numel,), torch.float32)
        if prepare == "touch":
            tensor.zero_()
        elif prepare == "prefault":
            start = time.perf_counter()
            out["shm_prefault_method"] = shm_prefault.prefault(tensor)
            prefault_s.append(time.perf_counter() - start)
        return tensor, lambda: shm.unlink(spec.name)

    touched = torch.zeros(numel)
    best("fresh", lambda: (torch.empty(numel), lambda: None))
    best("touched", lambda: (touched, lambda: None))
    best("shm_fresh", lambda: shared())
    best("shm_touched", lambda: shared("touch"))
    best("shm_prefaulted", lambda: shared("prefault"))
    if prefault_s:
        out["shm_prefault_GBps"] = round(nbytes / min(prefault_s) / GB, 3)
    if device != "cpu":
        pinned = torch.empty(numel, pin_memory=True)
        best("pinned", lambda: (pinned, lambda: None))
    return out


RANK_KEYS = ("tiles", "total_s", "decode_s", "write_s", "exchange_s", "finalize_s", "bytes_written")
PREFAULT_KEYS = ("prefault_method", "prefault_s", "prefault_wait_s", "prefault_bytes")


def summarize(walls: list[float], results: list[dict], image_bytes: int) -> dict:
    """One prefault setting of a case: wall times, and per rank the phases of the last repeat."""
    ranks = []
    for rank, r in enumerate(results):
        ranks.append(
            {
                "rank": rank,
                **{k: r[k] for k in RANK_KEYS + PREFAULT_KEYS},
                "bytes_sent": r["bytes_sent"],
                "handback_GBps": round(r["bytes_written"] / r["write_s"] / GB, 3) if r["write_s"] else None,
                "memory_kind": r["memory_kind"],
                "peak_memory_bytes": r["peak_memory_bytes"],
                "job_memory_bytes": r["peak_memory_bytes"] - r["baseline_memory_bytes"],
                # CPU: the job's own memory without the IMAGE pages the rank wrote (an upper bound).
                "job_private_memory_bytes": r["peak_memory_bytes"]
                - r["baseline_memory_bytes"]
                - r.get("shared_memory_written_bytes", 0),
            }
        )
    return {
        "wall_s": [round(w, 4) for w in walls],
        "wall_s_best": round(min(walls), 4),
        "slowest_rank_total_s": max(r["total_s"] for r in results),
        "max_peak_memory_bytes": max(r["peak_memory_bytes"] for r in ranks),
        "max_job_memory_bytes": max(r["job_memory_bytes"] for r in ranks),
        "max_job_private_memory_bytes": max(r["job_private_memory_bytes"] for r in ranks),
        # The IMAGE is complete when the slowest writer is done: its bytes over the longest write time.
        "aggregate_handback_GBps": round(image_bytes / max(r["write_s"] for r in results) / GB, 3),
        "per_rank": ranks,
    }


def run_case(
    checkpoint: Path,
    devices: str,
    dtype: str,
    latent_fhw,
    settings: TileSettings,
    repeats: int,
    prefault: list[str],
) -> dict:
    """`repeats` decodes per prefault setting, interleaved (so drift hits every setting alike)."""
    model = MGPUModel.create(checkpoint, devices=devices, dtype=dtype)
    latent = torch.randn(1, 128, *latent_fhw, generator=torch.Generator().manual_seed(0))
    shape = image_shape(tuple(latent.shape))

    def decode(setting: str) -> tuple[float, list[dict]]:
        out = output_slot(shape, torch.float32)
        args = {
            "video": latent,
            "audio": None,
            "tiles": dataclasses.asdict(settings),
            "out_image": out,
            "out_audio": None,
            "prefault": setting,
        }
        start = time.perf_counter()
        results = get_manager().run(model, "vae_decode", args)
        return time.perf_counter() - start, results

    decode("off")  # starts the group, loads the model and the decoder
    walls: dict[str, list[float]] = {p: [] for p in prefault}
    results: dict[str, list[dict]] = {}
    for _ in range(repeats):
        for setting in prefault:
            wall, results[setting] = decode(setting)
            walls[setting].append(wall)
    image_bytes = 4 * shape[0] * shape[1] * shape[2] * shape[3]
    first = results[prefault[0]]
    return {
        "devices": devices,
        "ranks": model.world_size,
        "dtype": dtype,
        "latent_fhw": list(latent_fhw),
        "image_shape": list(shape),
        "image_bytes": image_bytes,
        "plan": first[0]["plan"],
        "handback_GBps_by_prefault": {
            p: [
                round(r["bytes_written"] / r["write_s"] / GB, 3) if r["write_s"] else None for r in results[p]
            ]
            for p in prefault
        },
        "by_prefault": {p: summarize(walls[p], results[p], image_bytes) for p in prefault},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", required=True, type=Path, help="JSON file to write")
    parser.add_argument("--gpu", action="store_true", help="LTX-2's VAE at 1024x1536x121 on the GPUs (bf16)")
    parser.add_argument(
        "--comfy",
        action="store_true",
        help="comfy backend's exact decode vs ComfyUI's VAEDecode, 1 GPU (bench/bench_vae_comfy.py)",
    )
    parser.add_argument(
        "--real-vae", action="store_true", help="LTX-2's VAE on CPU ranks (float32; small --latent)"
    )
    parser.add_argument(
        "--ranks", type=int, nargs="+", help="rank counts (CPU: 1 2 3; GPU: 1 2 4 8 up to the GPUs)"
    )
    parser.add_argument("--latent", type=int, nargs=3, metavar=("F", "H", "W"), help="latent cells")
    parser.add_argument("--tile-size", type=int, default=0, help="tile long side in px (0: auto)")
    parser.add_argument("--temporal-size", type=int, default=0, help="frames per chunk (0: whole clip)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads-per-rank", type=int, default=1, help="CPU ranks only")
    parser.add_argument(
        "--prefault",
        nargs="+",
        default=["auto", "off"],
        choices=["auto", "off", *shm_prefault.PREFAULT_METHODS],
        help="pre-fault settings to compare (the job's 'prefault'; default: auto off)",
    )
    args = parser.parse_args(argv)
    settings = TileSettings(tile_px=args.tile_size, temporal_frames=args.temporal_size)
    workdir = Path(tempfile.mkdtemp(prefix="bench_vae_"))
    if args.comfy:
        if not torch.cuda.is_available() or not os.environ.get("COMFYUI_PATH"):
            parser.error("--comfy needs a CUDA GPU and COMFYUI_PATH (a ComfyUI with LTX-2)")
        from bench_vae_comfy import run as run_comfy

        report = run_comfy(real_vae_checkpoint(workdir), tuple(args.latent or REAL_LATENT), args.repeats)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2))
        print(json.dumps(report, indent=2))
        return 0
    if args.gpu:
        if not torch.cuda.is_available():
            parser.error("--gpu needs CUDA GPUs")
        gpus = torch.cuda.device_count()
        rank_counts = args.ranks or sorted({n for n in (1, 2, 4, 8) if n <= gpus} | {gpus})
        checkpoint, dtype, latent = (
            real_vae_checkpoint(workdir),
            "bfloat16",
            tuple(args.latent or REAL_LATENT),
        )
        device_lists = [",".join(f"cuda:{i}" for i in range(n)) for n in rank_counts]
    else:
        threads = args.threads_per_rank
        launcher.Placement.threads_per_rank = lambda self: threads  # the group reads it when it starts
        rank_counts = args.ranks or [1, 2, 3]
        checkpoint = (
            real_vae_checkpoint(workdir) if args.real_vae else tiny_model.make_tiny(workdir).checkpoint
        )
        dtype, latent = "float32", tuple(args.latent or TINY_LATENT)
        device_lists = [f"cpu:{n}" for n in rank_counts]
    cases = []
    try:
        for devices in device_lists:
            case = run_case(checkpoint, devices, dtype, latent, settings, args.repeats, args.prefault)
            cases.append(case)
            print(f"{case['ranks']} rank(s) {devices}: {case['plan']}", flush=True)
            for setting, c in case["by_prefault"].items():
                print(
                    f"  prefault {setting:9s} ({c['per_rank'][0]['prefault_method']}): {c['wall_s_best']:.3f} s, "
                    f"hand-back {[r['handback_GBps'] for r in c['per_rank']]} GB/s per rank, "
                    f"{c['aggregate_handback_GBps']} GB/s aggregate, write "
                    f"{[r['write_s'] for r in c['per_rank']]} s (waited {[r['prefault_wait_s'] for r in c['per_rank']]}), "
                    f"peak {c['max_peak_memory_bytes'] / 2**20:.0f} MiB (job {c['max_job_memory_bytes'] / 2**20:.0f} "
                    f"MiB, without IMAGE pages {c['max_job_private_memory_bytes'] / 2**20:.0f} MiB)",
                    flush=True,
                )
    finally:
        get_manager().unload()
    image_bytes = cases[0]["image_bytes"] if cases else 0
    report = {
        "meta": {
            "torch": torch.__version__,
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
            "gpus": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],
            "model": "LTX-2 video VAE, random weights"
            if args.gpu or args.real_vae
            else "embedded tiny LTX-2",
            "threads_per_rank": None if args.gpu else args.threads_per_rank,
            "tiles": dataclasses.asdict(settings),
            "prefault_settings": args.prefault,
        },
        "cases": cases,
        "handback_baseline": {
            "bytes": image_bytes,
            **memcpy_GBps(image_bytes),
            **(memcpy_GBps(image_bytes, "cuda") if args.gpu else {}),
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(f"wrote {args.out}; memcpy baseline {report['handback_baseline']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
