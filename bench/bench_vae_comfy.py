"""`bench_vae.py --comfy`: the comfy backend's exact decode against ComfyUI's own VAEDecode, one GPU,
in one process, side by side.

    COMFYUI_PATH=/path/to/ComfyUI python bench/bench_vae.py --comfy --out vae_comfy_h200.json

LTX-2's video decoder configuration (bench_vae.LTX2_DECODER_BLOCKS) with random weights, loaded by
ComfyUI's checkpoint loader (comfy.sd.load_checkpoint_guess_config, as CheckpointLoaderSimple), a
random latent of --latent cells (default 16 x 32 x 48: 121 frames of 1024 x 1536). Per repeat, in
alternating order: native `VAE.decode` (what VAEDecode runs; frames land in its float32 output on the
CPU) and ours (workers/engine/comfy/vae_slab_decode.py with one slab; frames land in a float32 CPU tensor of
the IMAGE's shape, as in the shared-memory IMAGE). Reported: best wall seconds, CUDA peak allocated
during each decode above the weights, and the largest difference between the two IMAGEs. More GPUs
need the worker group on the comfy backend (MGPU Loader's backend setting): run bench_vae.py --gpu
with that loader once it lands.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from bench_report import timed_peak

from ltx2_mgpu.workers.engine.comfy.bootstrap import import_comfyui
from ltx2_mgpu.workers.wire.comfyui_root import check_comfyui_root


def run(checkpoint: Path, latent_fhw: tuple[int, int, int], repeats: int) -> dict:
    """Load the checkpoint's VAE through ComfyUI on cuda:0 and time both decodes (see the module doc)."""
    device = torch.device("cuda", 0)
    import_comfyui(check_comfyui_root(os.environ["COMFYUI_PATH"]), device)
    from ltx2_mgpu.workers.engine.comfy.model import ComfyModel
    from ltx2_mgpu.workers.engine.comfy.vae_slab_decode import SlabDecoder, decode_plan, padding_mode
    from ltx2_mgpu.workers.strategies.halo_exchange import HaloExchange
    from ltx2_mgpu.workers.strategies.vae_decode import to_image

    vae = ComfyModel.load(checkpoint, device, None).vae
    latent = torch.randn((1, 128, *latent_fhw), generator=torch.Generator().manual_seed(0))
    plan = decode_plan(latent_fhw, 1, padding_mode(vae.first_stage_model.decoder))
    frames, height, width = 1 + 8 * (latent_fhw[0] - 1), 32 * latent_fhw[1], 32 * latent_fhw[2]
    ours_image = torch.empty((1, frames, height, width, 3), dtype=torch.float32, pin_memory=True)

    def native() -> torch.Tensor:
        return vae.decode(latent)

    def ours() -> torch.Tensor:
        def write(first: int, pixels: torch.Tensor) -> None:
            values = to_image(pixels).permute(0, 2, 3, 4, 1)
            ours_image[:, first : first + values.shape[1]].copy_(values)

        SlabDecoder(vae, plan, 0, HaloExchange(plan, 0, comm_on_device=True)).run(latent, write)
        return ours_image

    runs: dict[str, list] = {"native": [], "ours": []}
    with torch.inference_mode():
        for fn in (native, ours):  # warm-up: kernels, allocator
            timed_peak(fn, device)
        for repeat in range(repeats):
            order = (
                (("native", native), ("ours", ours))
                if repeat % 2 == 0
                else (("ours", ours), ("native", native))
            )
            for name, fn in order:
                seconds, peak, _ = timed_peak(fn, device)
                runs[name].append((seconds, peak))
        difference = (native().reshape(ours_image.shape) - ours_image).abs().max().item()
    return {
        "latent_fhw": list(latent_fhw),
        "image": [frames, height, width],
        "vae_dtype": str(vae.vae_dtype),
        "gpu": torch.cuda.get_device_name(device),
        **{
            name: {
                "wall_s_best": round(min(s for s, _ in r), 4),
                "wall_s": [round(s, 4) for s, _ in r],
                "peak_bytes_above_weights": max(p for _, p in r),
            }
            for name, r in runs.items()
        },
        "max_abs_difference": difference,
    }
