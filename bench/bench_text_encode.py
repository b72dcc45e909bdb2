"""MGPU Text Encode at Gemma 3 12B's shape (random bf16 weights): load and encode times on one device.

  1. load: a ComfyUI-layout single file of the 12B language model (bf16, ~23 GB) written to --dir,
     then `open_gemma` (headers) and `load_segment` of all 48 layers, and of half of them (what one
     rank of a 2-GPU "layers" placement reads); the file was just written, so it is read from the
     page cache: this is the host->device part, not the disk;
  2. encode: one prompt (128 and 2,048 tokens; ComfyUI pads the first to 1,024, the workers run its
     128 only) through all layers, as the workers run it (float32 activations, weights cast per
     matmul), then the features and a
     random 188,160 -> 3,840 projection in bfloat16 (ComfyUI's choice on GPUs).
  3. with --pipeline N (N GPUs): the "layers" placement's encode as the workers run it
     (ops_text._encode_layers: blocks of 48/N layers, hidden states sent GPU to GPU over NCCL, rank 0
     gathers the prompt tokens of all states), random weights built on each GPU.
Writes JSON (--out). `--tiny` runs the same on CPU with the tiny Gemma (a smoke test).

    python bench/bench_text_encode.py --dir /tmp/gemma --out text.json
    python bench/bench_text_encode.py --pipeline 2 --out text-pipeline.json
    python bench/bench_text_encode.py --tiny --out text-cpu.json
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import torch
from safetensors.torch import save_file

from ltx2_mgpu.workers.embedded.tiny_gemma import tiny_gemma_config
from ltx2_mgpu.workers.text.gemma3 import GemmaConfig, GemmaSegment, SequenceContext
from ltx2_mgpu.workers.text.text_encoder import feature_dtype, load_segment, open_gemma, text_features
from ltx2_mgpu.workers.text.text_tokenizer import padded_length

TOKENS = (128, 2048)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def write_random_file(config: GemmaConfig, path: Path) -> float:
    """A ComfyUI-layout file (keys under model.) of random bf16 weights; returns seconds."""
    start = time.perf_counter()
    with torch.device("meta"):
        shapes = {
            k: v.shape
            for k, v in GemmaSegment(config, 0, config.num_layers, torch.bfloat16).state_dict().items()
        }
    gen = torch.Generator().manual_seed(0)
    tensors = {}
    for key, shape in shapes.items():
        std = 0.1 if key.endswith("norm.weight") else shape[-1] ** -0.5
        tensors[f"model.{key}"] = (torch.randn(shape, generator=gen) * std).to(torch.bfloat16)
    save_file(tensors, str(path))
    return time.perf_counter() - start


def time_load(path: Path, device: torch.device, stop: int) -> tuple[float, GemmaSegment]:
    _sync(device)
    start = time.perf_counter()
    files = open_gemma(path)
    segment = load_segment(files, 0, stop, device, torch.bfloat16)
    _sync(device)
    return time.perf_counter() - start, segment


def time_encode(segment: GemmaSegment, num_tokens: int, device: torch.device, repeats: int) -> dict:
    config = segment.config
    length = padded_length(num_tokens)  # what ComfyUI runs; the workers run the prompt's tokens only
    ids = torch.randint(4, config.vocab_size, (1, num_tokens), device=device)
    projection = torch.nn.Linear(config.feature_width, 3840 if device.type == "cuda" else 64, bias=False)
    projection = projection.to(device=device, dtype=torch.bfloat16)
    fdtype = feature_dtype(device, torch.bfloat16)
    timings = {"forward_s": [], "features_s": []}
    with torch.inference_mode():
        for i in range(repeats + 1):
            _sync(device)
            start = time.perf_counter()
            context = SequenceContext.build(config, num_tokens, length, device)
            states: list[torch.Tensor] = []
            segment(segment.embed(ids), context, states)
            _sync(device)
            mid = time.perf_counter()
            out = text_features(states, projection, fdtype)
            _sync(device)
            if i > 0:  # the first run warms up kernels and the allocator
                timings["forward_s"].append(mid - start)
                timings["features_s"].append(time.perf_counter() - mid)
    params = sum(p.numel() for n, p in segment.named_parameters() if "embed" not in n)
    forward = min(timings["forward_s"])
    return {
        "tokens": num_tokens,
        "padded_length": length,
        "forward_s": forward,
        "features_s": min(timings["features_s"]),
        "float32_tflops": 2 * params * num_tokens / forward / 1e12,
        "output_shape": list(out.shape),
        "finite": bool(torch.isfinite(out).all()),
    }


class _Job:
    """What ops_text's encode loops use of a worker's JobContext."""

    def __init__(self, rank: int, world: int, device: torch.device) -> None:
        self.rank, self.world_size = rank, world
        self.runtime = type("Runtime", (), {"device": device})()

    def check_cancel(self) -> None:
        pass

    def progress(self, step: int, total: int) -> None:
        pass


def _pipeline_rank(rank: int, world: int, port: int, repeats: int, results) -> None:
    import os

    import torch.distributed as dist

    from ltx2_mgpu.workers.rank.ops_text import ResidentEncoder, _encode_layers, split_layers

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    gpu = torch.cuda.is_available()
    device = torch.device("cuda", rank) if gpu else torch.device("cpu")
    if gpu:
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", rank=rank, world_size=world, device_id=device)
    else:  # CPU smoke test
        dist.init_process_group("gloo", rank=rank, world_size=world)
    config = GemmaConfig() if gpu else tiny_gemma_config()
    width = 3840 if gpu else 64
    blocks = split_layers(config.num_layers, [1] * world)
    segment = GemmaSegment(config, *blocks[rank], torch.bfloat16, device)
    with torch.no_grad():
        for name, p in segment.named_parameters():
            p.normal_(0.0, 0.1 if name.endswith("norm.weight") else p.shape[-1] ** -0.5)
    files = type("Files", (), {"config": config})()
    encoder = ResidentEncoder((), torch.bfloat16, "layers", blocks, files, segment)
    projection = torch.nn.Linear(config.feature_width, width, bias=False).to(device, torch.bfloat16)
    fdtype = feature_dtype(device, torch.bfloat16)
    memory = torch.cuda.memory_allocated(device) / 2**30 if gpu else 0.0
    out = {"rank": rank, "layers": list(blocks[rank]), "weights_gib": memory}
    for tokens in TOKENS:
        ids = [[2, *torch.randint(4, config.vocab_size, (tokens - 1,)).tolist()]]
        outputs = [torch.empty(1, tokens, width)]
        times = []
        for i in range(repeats + 1):
            dist.barrier()
            _sync(device)
            start = time.perf_counter()
            with torch.inference_mode():
                _encode_layers(_Job(rank, world, device), encoder, ids, outputs, projection, fdtype)
            _sync(device)
            dist.barrier()
            if i > 0:
                times.append(time.perf_counter() - start)
        out[f"encode_{tokens}_s"] = min(times)
    out["peak_gib"] = torch.cuda.max_memory_allocated(device) / 2**30 if gpu else 0.0
    results.put(out)
    dist.destroy_process_group()


def pipeline(world: int, repeats: int) -> list[dict]:
    import torch.multiprocessing as mp

    context = mp.get_context("spawn")
    results = context.Queue()
    procs = [
        context.Process(target=_pipeline_rank, args=(r, world, 29571, repeats, results)) for r in range(world)
    ]
    for p in procs:
        p.start()
    found = sorted((results.get(timeout=600) for _ in procs), key=lambda r: r["rank"])
    for p in procs:
        p.join()
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="text_encode.json")
    parser.add_argument("--dir", default="/tmp/gemma-bench")
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--pipeline", type=int, default=0, help="GPUs for the layers placement (0: skip)")
    args = parser.parse_args()
    if args.pipeline:
        result = {"pipeline": pipeline(args.pipeline, args.repeats), "tokens": list(TOKENS)}
        Path(args.out).write_text(json.dumps(result, indent=1))
        print(json.dumps(result, indent=1))
        return
    device = torch.device("cpu" if args.tiny or not torch.cuda.is_available() else "cuda:0")
    config = tiny_gemma_config() if args.tiny else GemmaConfig()
    folder = Path(args.dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "gemma_3_12B_random_bf16.safetensors"
    result: dict = {"device": str(device), "torch": torch.__version__, "host": platform.node()}
    if device.type == "cuda":
        result["gpu"] = torch.cuda.get_device_name(device)
    result["write_file_s"] = write_random_file(config, path)
    result["file_bytes"] = path.stat().st_size
    half_s, half = time_load(path, device, config.num_layers // 2)
    del half
    result["load_half_s"] = half_s
    result["load_all_s"], segment = time_load(path, device, config.num_layers)
    if device.type == "cuda":
        result["weights_gib"] = torch.cuda.memory_allocated(device) / 2**30
    result["encode"] = [time_encode(segment, n, device, args.repeats) for n in TOKENS]
    if device.type == "cuda":
        result["peak_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
    path.unlink()
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
