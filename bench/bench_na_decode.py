"""LTX-2.5's diffusion VAE decoder on one GPU: ours (workers/engine/comfy/na_decode.py, one band) against
ComfyUI's own VAE.decode (what VAEDecode runs), in one process, side by side. GPU only.

    COMFYUI_PATH=/path/to/ComfyUI python bench/bench_na_decode.py --out na_decode_h200.json

The decoder is ComfyUI's CausalDiffusionVAE at its real configuration (LTX_24_VAE_CONFIG, which ComfyUI
uses when the file names none) with random weights, built by comfy.sd.VAE from a state dict as the
checkpoint loader does, in the dtype ComfyUI picks for the GPU. Latents: 16 x 32 x 48 cells (121 frames
of 1024 x 1536) and 16 x 34 x 60 (121 frames of 1088 x 1920). Per size and repeat, in alternating order:
native VAE.decode (its float32 IMAGE on the CPU) and ours with each --chunk-mb (0: the whole band per
attention call; frames land in a pinned float32 CPU tensor of the IMAGE's shape, as in the shared-memory
IMAGE). Reported: best wall seconds, CUDA peak allocated during each decode above the weights, the
largest difference between the IMAGEs, and whether native VAE.decode ran out of memory and fell back
to its tiled decode (then its frames are not the untiled ones and the difference says so).
--smoke: a tiny decoder on the CPU, to check the script itself (no timings worth keeping).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

import torch
from bench_report import timed_peak

from ltx2_mgpu.workers.engine.comfy.bootstrap import import_comfyui
from ltx2_mgpu.workers.wire.comfyui_root import check_comfyui_root

RESULTS = Path(__file__).with_name("results")
SIZES = {"1024x1536x121": (16, 32, 48), "1920x1088x121": (16, 34, 60)}
SMOKE_SIZES = {"64x96x9": (2, 2, 3)}
# Tiny widths with the real kernels, for --smoke only.
SMOKE_DECODER = {
    "head_dim": 16,
    "stage_channels": [64, 32, 32, 32, 32],
    "stage_depths": [1, 1, 1, 1, 1],
    "upsamples": [[[1, 2, 2], 2], [[2, 1, 1], 1], [[2, 2, 2], 1], [[2, 2, 2], 1]],
    "t_emb_dim": 32,
}
# Output layer scaled so that most pixels land inside VAE.process_output's clamp: the difference then
# compares real values, not two saturated ones.
OUTPUT_GAIN = 0.4


class _FallbackWatch(logging.Handler):
    """Notes VAE.decode's "Ran out of memory ... retrying with tiled VAE decoding" warning."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.fell_back = False

    def emit(self, record: logging.LogRecord) -> None:
        if "tiled VAE decoding" in record.getMessage():
            self.fell_back = True


def load_vae(device: torch.device, smoke: bool):
    """comfy.sd.VAE of a random-weight CausalDiffusionVAE (the real config, or --smoke's)."""
    import comfy.sd
    from comfy.ldm.lightricks.vae.na_diffusion_decoder import LTX_24_VAE_CONFIG, CausalDiffusionVAE

    config = json.loads(json.dumps(LTX_24_VAE_CONFIG))
    if smoke:
        config["decoder"].update(SMOKE_DECODER)
    torch.manual_seed(0)
    model = CausalDiffusionVAE(config=config)
    state = {key: value.detach().float() for key, value in model.state_dict().items()}
    generator = torch.Generator().manual_seed(1)
    state["per_channel_statistics.std-of-means"] = 0.5 + torch.rand(128, generator=generator)
    state["per_channel_statistics.mean-of-means"] = 0.2 * torch.randn(128, generator=generator)
    state["decoder.conv_out.weight"] *= OUTPUT_GAIN
    del model
    metadata = {"config": json.dumps({"vae": config})}
    return comfy.sd.VAE(sd=state, metadata=metadata, device=device), config


def bench_size(vae, device, latent_fhw, chunks_mb: list[int], repeats: int) -> dict:
    from ltx2_mgpu.workers.engine.comfy.na_decode import BandGather, BandNADecoder
    from ltx2_mgpu.workers.strategies.na_bands import band_plan
    from ltx2_mgpu.workers.strategies.vae_decode import to_image

    latent = torch.randn((1, 128, *latent_fhw), generator=torch.Generator().manual_seed(0))
    frames, height, width = 1 + 8 * (latent_fhw[0] - 1), 32 * latent_fhw[1], 32 * latent_fhw[2]
    image = torch.empty((1, frames, height, width, 3), dtype=torch.float32, pin_memory=device.type == "cuda")
    watch = _FallbackWatch()
    logging.getLogger().addHandler(watch)

    def native() -> torch.Tensor:
        return vae.decode(latent)

    def ours(chunk_mb: int):
        plan = band_plan(latent_fhw, 1, chunk_mb * 2**20)

        def write(first: int, pixels: torch.Tensor) -> None:
            values = to_image(pixels).permute(0, 2, 3, 4, 1)
            image[:, first : first + values.shape[1]].copy_(values)

        def run() -> torch.Tensor:
            BandNADecoder(vae, plan, 0, BandGather(plan, 0, comm_on_device=True)).run(latent, write)
            return image

        return run

    named = [("native", native)] + [(f"ours_chunk_{mb}mb", ours(mb)) for mb in chunks_mb]
    runs: dict[str, list] = {name: [] for name, _ in named}
    differences = {}
    try:
        with torch.inference_mode():
            for name, fn in named:  # warm-up (kernels, allocator), and the IMAGEs compared
                _s, _p, out = timed_peak(fn, device)
                if name == "native":
                    reference = out.reshape(image.shape).clone()
                else:
                    differences[name] = (out - reference).abs().max().item()
            for repeat in range(repeats):
                for name, fn in named if repeat % 2 == 0 else named[::-1]:
                    seconds, peak, _ = timed_peak(fn, device)
                    runs[name].append((seconds, peak))
    finally:
        logging.getLogger().removeHandler(watch)
    return {
        "latent_fhw": list(latent_fhw),
        "native_fell_back_to_tiled": watch.fell_back,
        "max_abs_difference_vs_native": differences,
        **{
            name: {
                "best_s": round(min(s for s, _ in values), 3),
                "peak_gib": round(max(p for _, p in values) / 2**30, 2),
            }
            for name, values in runs.items()
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", help="file name under bench/results (default: print only)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--chunk-mb", type=int, nargs="+", default=[0, 4096])
    parser.add_argument("--smoke", action="store_true", help="tiny decoder on the CPU: checks the script")
    args = parser.parse_args(argv)
    if not args.smoke and not torch.cuda.is_available():
        print("bench_na_decode.py times a GPU decode: no CUDA device here (use --smoke to check the script)")
        return 2
    device = torch.device("cpu") if args.smoke else torch.device("cuda", 0)
    import_comfyui(check_comfyui_root(os.environ["COMFYUI_PATH"]), device)
    vae, _config = load_vae(device, args.smoke)
    report = {
        "device": torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu",
        "vae_dtype": str(vae.vae_dtype),
        "weights_gib": round(vae.model_size() / 2**30, 2),
        "smoke": args.smoke,
        "command": " ".join(["python", "bench/bench_na_decode.py", *(argv or sys.argv[1:])]),
        "sizes": {},
    }
    for name, fhw in (SMOKE_SIZES if args.smoke else SIZES).items():
        report["sizes"][name] = bench_size(vae, device, fhw, args.chunk_mb, args.repeats)
        print(name, json.dumps(report["sizes"][name]), flush=True)
    if args.out:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / args.out).write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
