"""`ltx2-mgpu demo`: the official two-stage text-to-video shape on the embedded tiny model.

text -> SP Sampler at half resolution (audio+video) -> TDP Upscaler to full resolution -> Distributed
VAE Decode -> an .mp4 with audio. It calls the functions ComfyUI's node classes call, so it exercises
the whole path; it prints each stage's time and a parity check (stage 1 on the group vs one process).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from .nodes.loader import load_model
from .nodes.sp_sampler import sample_latent
from .nodes.tdp_upscaler import tdp_upscale
from .nodes.text_encode import encode_prompt
from .nodes.vae_decode import decode_latent
from .workers.group.manager import MGPUModel, get_manager

# Full resolution of the tiny demo (stage 2); stage 1 runs at half of it, as the official workflow.
WIDTH, HEIGHT, FRAMES, FPS = 384, 256, 25, 24.0
STAGE1_SIGMAS = (1.0, 0.99375, 0.9875, 0.98125, 0.975, 0.909375, 0.725, 0.421875, 0.0)  # distilled stage 1
TDP_OVERLAP = 4  # latent cells; the tiny full-resolution latent is only 8 x 12 cells
NEGATIVE = "blurry, low quality, distorted"


class _Nested:
    """Stand-in for comfy.nested_tensor.NestedTensor outside ComfyUI (the nodes only read these)."""

    is_nested = True

    def __init__(self, tensors):
        self.tensors = list(tensors)


def _install_standins() -> None:
    import sys
    import types

    if "comfy.nested_tensor" not in sys.modules:
        module = types.ModuleType("comfy.nested_tensor")
        module.NestedTensor = _Nested
        sys.modules["comfy.nested_tensor"] = module


def _stage(name: str, timings: dict[str, float]):
    class _Timer:
        def __enter__(self):
            self.start = time.perf_counter()
            print(f"[{name}] ...", flush=True)

        def __exit__(self, *exc):
            timings[name] = time.perf_counter() - self.start
            if exc[0] is None:
                print(f"[{name}] done in {timings[name]:.2f} s", flush=True)

    return _Timer()


def _conditioning(model: MGPUModel, prompt: str, gemma: Path) -> list:
    (cond,) = encode_prompt(model, str(gemma), prompt)
    return cond


def run_demo(args: argparse.Namespace) -> int:
    from .workers.group.launcher import PACK_ROOT
    from .workers.wire.backend import choose_backend
    from .workers.wire.capabilities import LTXCORE, check_installed

    try:  # a bad COMFYUI_PATH is refused here, before anything is written or any worker starts
        backend = choose_backend(PACK_ROOT)
        check_installed(
            LTXCORE
        )  # the tiny model is written with ltx-core's modules, whichever engine runs it
    except ValueError as exc:
        print(f"ltx2-mgpu demo: {exc}", file=sys.stderr)
        return 2
    from .workers.embedded.tiny_gemma import make_tiny_gemma
    from .workers.embedded.tiny_model import make_tiny

    print(f"backend: {backend.reason}", flush=True)
    _install_standins()
    out = Path(args.out).resolve()
    models = Path(args.models).resolve() if args.models else out / "models"
    out.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    with _stage("tiny model", timings):
        files = make_tiny(models)
        gemma = make_tiny_gemma(models)
    devices = args.devices
    dtype = "float32" if devices.startswith("cpu") else "bfloat16"
    status = 0
    for run in range(1, args.runs + 1):
        print(f"--- run {run} of {args.runs} (devices {devices}) ---")
        with _stage("load", timings):
            model = load_model(str(files.checkpoint), devices, dtype)[0]  # (mgpu_model, model, model_info)
        status = max(status, _run_once(model, files, gemma, args, out, timings))
    get_manager().unload()
    return status


def _run_once(model: MGPUModel, files, gemma: Path, args: argparse.Namespace, out: Path, timings) -> int:
    with _stage("text", timings):
        positive = _with_frame_rate(_conditioning(model, args.prompt, gemma))
        negative = _with_frame_rate(_conditioning(model, NEGATIVE, gemma))
    f_lat = (FRAMES - 1) // 8 + 1
    audio_frames = round(FRAMES / FPS * 25)
    video = torch.zeros(1, 128, f_lat, HEIGHT // 64, WIDTH // 64)
    audio = torch.zeros(1, 8, audio_frames, 16)
    latent = {"samples": _Nested([video, audio])}
    sigmas = torch.tensor(STAGE1_SIGMAS)
    with _stage("stage 1: SP Sampler", timings):
        (stage1,) = sample_latent(
            model, positive, negative, latent, sigmas, "euler_ancestral", 4.0, 4.0, args.seed
        )
    _parity_check(model, positive, negative, latent, sigmas, args.seed, stage1)
    with _stage("stage 2: TDP Upscaler", timings):
        (result,) = tdp_upscale(
            model,
            positive,
            negative,
            stage1,
            str(files.spatial_upscaler),
            "euler",
            1.0,
            args.seed,
            "auto",
            TDP_OVERLAP,
        )
    with _stage("decode", timings):
        images, sound = decode_latent(model, result)
    path = out / "ltx2-mgpu-demo.mp4"
    with _stage("write mp4", timings):
        write_mp4(path, images, FPS, sound)
    print(
        f"video written to {path} ({images.shape[0]} frames {images.shape[2]}x{images.shape[1]}, "
        f"audio {'yes, ' + str(sound['sample_rate']) + ' Hz' if sound is not None else 'no'})"
    )
    return 0


def _with_frame_rate(cond: list) -> list:
    # What LTXVConditioning does: the frame rate travels in the conditioning dict.
    return [[t, {**extras, "frame_rate": FPS}] for t, extras in cond]


def _parity_check(model: MGPUModel, positive, negative, latent, sigmas, seed, stage1) -> None:
    """Stage 1 on the group vs the same job in this process with no workers (the single-GPU answer)."""
    from .workers.engine.ltxcore.reference import load_in_process, relative_error, sample_in_process

    if model.dtype != "float32":
        print("  parity: skipped (the in-process reference runs in float32 on the CPU)")
        return
    reference = load_in_process(model.checkpoint)
    video, audio = latent["samples"].tensors
    expected = sample_in_process(
        reference,
        video,
        audio,
        None,
        positive,
        negative,
        sigmas,
        "euler_ancestral",
        4.0,
        seed,
        frame_rate=FPS,
    )
    # The reference is ltx-core's reproduction of ComfyUI's forward: on the comfy backend the two
    # differ by ComfyUI's own rounding (within 1e-4, tests/test_comfyui_native_parity.py).
    limit = 1e-4 if model.backend == "comfy" else 1e-5
    for name, got, want in zip(("video", "audio"), stage1["samples"].tensors, expected):
        err = relative_error(got, want)
        verdict = "ok" if err <= limit else "MISMATCH"
        print(
            f"  parity stage 1 {name}: {model.world_size} workers vs one process, max relative error {err:.2e} ({verdict})"
        )


def write_mp4(path: Path, images: torch.Tensor, fps: float, audio: dict | None) -> None:
    """IMAGE [F, H, W, 3] in 0..1 (+ AUDIO {waveform [1, C, S], sample_rate}) -> H.264/AAC mp4."""
    import fractions

    import av

    frames = (images.clamp(0, 1) * 255).round().to(torch.uint8).numpy()
    with av.open(str(path), mode="w") as container:
        stream = container.add_stream("libx264", rate=fractions.Fraction(fps).limit_denominator(1000))
        stream.width, stream.height = frames.shape[2], frames.shape[1]
        stream.pix_fmt = "yuv420p"
        a_stream = None
        if audio is not None:
            rate = int(audio["sample_rate"])
            wave = audio["waveform"][0].float().clamp(-1, 1).numpy()
            a_stream = container.add_stream("aac", rate=rate)
            a_stream.layout = "stereo" if wave.shape[0] == 2 else "mono"
        for frame in frames:
            for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
        if a_stream is not None:
            audio_frame = av.AudioFrame.from_ndarray(
                wave.reshape(1, -1) if wave.shape[0] == 1 else wave.T.reshape(1, -1).copy(),
                format="flt",
                layout=a_stream.layout.name,
            )
            audio_frame.sample_rate = rate
            for packet in a_stream.encode(audio_frame):
                container.mux(packet)
            for packet in a_stream.encode():
                container.mux(packet)
