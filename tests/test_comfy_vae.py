"""Distributed VAE Decode / Encode on the comfy backend: native ComfyUI's results on 1, 2 and 3 ranks.

The ranks run the real commands (ops_vae.vae_decode, ops_vae_encode.vae_encode) with ComfyUI's VAE
objects loaded by ComfyModel.load from the tiny checkpoint; the references are ComfyUI's own nodes on
the same file in this process (VAEDecode, VAEDecodeTiled, LTXVAudioVAEDecode, VAEEncode), float32 on
the CPU. Tolerances: exact decode 1e-5 of the IMAGE range (the slabs' convolutions see the same
inputs but run on other shapes, and a CPU's convolution kernels are chosen per shape: bit for bit on
AVX2 machines, up to 3.9e-6 apart on an AVX-512/AMX Xeon); tiled decode 1e-5 (the ranks' shares are
summed after the division by the feather weights); audio bit-exact (one rank runs ComfyUI's decode);
encode 1e-5 of the latent's largest magnitude.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from comfyui_harness import comfyui_in_process, comfyui_root
from rank_job import local_job

from conftest import run_ranks

pytestmark = pytest.mark.comfyui

EXACT_TOLERANCE = 1e-5  # the IMAGE is in [0, 1]: 1e-5 of its range, the bound every node's parity keeps
TILED_TOLERANCE = 1e-5
ENCODE_TOLERANCE = 1e-5
# Latents [B, 128, F, h, w]. "wide": 12 x 16 cells, slabs of rows 12 / 6+6 / 4+4+4 on 1 / 2 / 3 ranks;
# "narrow": 5 x 3 cells, slabs of 2 and 3 rows (a rank idles at 3 ranks: slabs are at least 2 cells).
# Sizes whose slabs hold a multiple of 32 positions per channel at the first level (as every real size
# does: 16 x 32 x 48 cells gives 768 per row): on the CPU, torch's mean over channels (PixelNorm)
# rounds the last bit differently for a tail of fewer positions, so a 8 x 12 latent on 2 ranks
# differs from VAEDecode by up to 1.3e-6 on the IMAGE (measured; the convolutions alone are bit-exact).
DECODE_CASES = {"wide": (1, 128, 3, 12, 16), "narrow": (1, 128, 2, 5, 3)}
# VAEDecodeTiled settings giving 2 x 2 x 3 tiles (time, rows, columns) on "wide", in pixels and frames.
TILES = {"tile_px": 256, "overlap_px": 64, "temporal_frames": 16, "temporal_overlap_frames": 8}
# What VAEDecodeTiled takes and ltx-core's tiles do not: the LTX-2.3 templates' 4-frame overlap, and a
# chunk of 12 frames (step 4). VAEDecodeTiled floors both to whole latent frames: the tiles of TILES.
TILES_STEP4 = {"tile_px": 256, "overlap_px": 64, "temporal_frames": 12, "temporal_overlap_frames": 4}
TILED_CASES = {"wide_tiled": TILES, "wide_tiled4": TILES_STEP4}
AUDIO_FRAMES = 13
ENCODE_PIXELS = (17, 128, 96, 3)  # frames, H, W, C: 4 x 3 cells, 3 latent frames
RANK_TIMEOUT_S = 600


def image_shape(latent_shape: tuple[int, ...]) -> tuple[int, ...]:
    b, _, f, h, w = latent_shape
    return (b * (1 + 8 * (f - 1)), 32 * h, 32 * w, 3)


@pytest.fixture(scope="module")
def cases(tiny, tmp_path_factory) -> Path:
    """Inputs and ComfyUI's own outputs for every case, saved under one folder."""
    folder = tmp_path_factory.mktemp("comfy_vae")
    make_cases(tiny.checkpoint, folder)
    return folder


def make_cases(checkpoint: Path, folder: Path) -> None:
    generator = torch.Generator().manual_seed(7)
    inputs = {name: torch.randn(shape, generator=generator) for name, shape in DECODE_CASES.items()}
    inputs["audio"] = torch.randn((1, 8, AUDIO_FRAMES, 16), generator=generator)
    inputs["pixels"] = torch.rand(ENCODE_PIXELS, generator=generator)
    inputs["tiny_cell"] = torch.randn((1, 128, 2, 1, 1), generator=generator)
    # ComfyUI's executor runs every node under inference_mode (process_output works in place).
    with comfyui_in_process(comfyui_root()), torch.inference_mode():
        import folder_paths
        from comfy_extras import nodes_lt_audio

        import nodes  # ComfyUI's nodes.py, not our package

        folder_paths.add_model_folder_path("checkpoints", str(checkpoint.parent))
        _model, _clip, vae = nodes.CheckpointLoaderSimple().load_checkpoint(checkpoint.name)
        (audio_vae,) = nodes_lt_audio.LTXVAudioVAELoader.execute(checkpoint.name)
        native, seconds = {}, {}

        def timed(name: str, fn):
            start = time.perf_counter()
            native[name] = fn()
            seconds[name] = round(time.perf_counter() - start, 3)

        for name in DECODE_CASES:
            timed(f"{name}_exact", lambda n=name: nodes.VAEDecode().decode(vae, {"samples": inputs[n]})[0])
        for name, tiles in TILED_CASES.items():
            timed(name, lambda t=tiles: nodes.VAEDecodeTiled().decode(
                vae, {"samples": inputs["wide"]}, t["tile_px"], t["overlap_px"],
                t["temporal_frames"], t["temporal_overlap_frames"],
            )[0])  # fmt: skip
        timed(
            "audio",
            lambda: nodes_lt_audio.LTXVAudioVAEDecode.execute({"samples": inputs["audio"]}, audio_vae)[0],
        )
        native["audio"], native["sample_rate"] = native["audio"]["waveform"], native["audio"]["sample_rate"]
        timed("encode", lambda: nodes.VAEEncode().encode(vae, inputs["pixels"])[0]["samples"])
        native["seconds"] = seconds
    torch.save({"inputs": inputs, "native": native, "checkpoint": str(checkpoint)}, folder / "cases.pt")


def _fake_job(rank: int, world_size: int, model):
    """The rank's job with ComfyUI's engine holding `model` (tests/rank_job.py)."""
    return local_job(rank, world_size, model)


def _shared(path: Path, shape: tuple[int, ...]) -> torch.Tensor:
    """A float32 tensor every rank maps from one file (the stand-in for the shared-memory slot)."""
    numel = 1
    for size in shape:
        numel *= size
    return torch.from_file(str(path), shared=True, size=numel, dtype=torch.float32).view(shape)


def _ranks(rank: int, world_size: int, init_file: str, folder: str, out_folder: str) -> None:
    from ltx2_mgpu.workers.engine.comfy.bootstrap import import_comfyui
    from ltx2_mgpu.workers.wire.comfyui_root import check_comfyui_root

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world_size)
    import_comfyui(check_comfyui_root(os.environ["COMFYUI_PATH"]), torch.device("cpu"))
    from ltx2_mgpu.workers.engine.comfy.model import ComfyModel
    from ltx2_mgpu.workers.rank.ops import InputRejected
    from ltx2_mgpu.workers.rank.ops_vae import vae_decode
    from ltx2_mgpu.workers.rank.ops_vae_encode import vae_encode

    data = torch.load(Path(folder) / "cases.pt")
    inputs, out = data["inputs"], Path(out_folder)
    model = ComfyModel.load(Path(data["checkpoint"]), torch.device("cpu"), None)
    job = _fake_job(rank, world_size, model)
    results = {}
    runs = [(f"{name}_exact", name, "exact", TILES) for name in DECODE_CASES]
    runs += [(label, "wide", "tiled", tiles) for label, tiles in TILED_CASES.items()]
    for label, name, mode, tiles in runs:
        shape = image_shape(tuple(inputs[name].shape))
        audio = inputs["audio"] if name == "wide" and mode == "exact" else None
        args = {
            "video": inputs[name], "audio": audio, "mode": mode, "tiles": tiles,
            "out_image": _shared(out / f"{label}.f32", shape),
            "out_audio": None if audio is None else _shared(out / "audio.f32", tuple(data["native"]["audio"].shape)),
        }  # fmt: skip
        results[label] = vae_decode(job, args)
    shape = tuple(data["native"]["encode"].shape)
    results["encode"] = vae_encode(
        job,
        {"pixels": inputs["pixels"], "temporal_frames": 0, "out_latent": _shared(out / "encode.f32", shape)},
    )
    try:
        vae_decode(job, {"video": inputs["tiny_cell"], "audio": None, "mode": "exact", "tiles": TILES,
                         "out_image": None, "out_audio": None})  # fmt: skip
        results["tiny_cell"] = "decoded"
    except InputRejected as exc:
        results["tiny_cell"] = str(exc)
    (out / f"results-{rank}.json").write_text(json.dumps(results))
    dist.destroy_process_group()


@pytest.mark.parametrize("world_size", [1, 2, 3])
def test_comfy_backend_decode_and_encode_equal_native(cases, tmp_path, world_size):
    data = torch.load(cases / "cases.pt")
    native = data["native"]
    for name, tensor in [(f"{n}_exact", native[f"{n}_exact"]) for n in DECODE_CASES] + [
        *[(n, native[n]) for n in TILED_CASES],
        ("audio", native["audio"]),
        ("encode", native["encode"]),
    ]:
        torch.full(tuple(tensor.shape), float("nan")).numpy().tofile(tmp_path / f"{name}.f32")
    run_ranks(_ranks, world_size, tmp_path, str(cases), str(tmp_path), timeout_s=RANK_TIMEOUT_S)
    results = [json.loads((tmp_path / f"results-{r}.json").read_text()) for r in range(world_size)]

    def ours(name: str) -> torch.Tensor:
        return _shared(tmp_path / f"{name}.f32", tuple(native[name].shape)).clone()

    report = {}
    for name in [f"{n}_exact" for n in DECODE_CASES] + [*TILED_CASES]:
        error = (ours(name) - native[name]).abs().max().item()
        report[name] = error
        mode = "exact" if name.endswith("exact") else "tiled"
        assert error <= (EXACT_TOLERANCE if mode == "exact" else TILED_TOLERANCE), (name, error)
        assert {r[name]["mode"] for r in results} == {mode}
    assert torch.equal(ours("audio"), native["audio"])
    assert results[-1]["wide_exact"]["sample_rate"] == native["sample_rate"]
    scale = native["encode"].abs().max().item()
    report["encode_relative"] = (ours("encode") - native["encode"]).abs().max().item() / scale
    assert report["encode_relative"] <= ENCODE_TOLERANCE
    for r in results:  # refused alike on every rank, naming the smallest size that decodes
        assert "[B, 128, F, 2, 2]" in r["tiny_cell"], r["tiny_cell"]
    timings = {name: max(r[name]["total_s"] for r in results) for name in results[0] if name != "tiny_cell"}
    print(f"\n{world_size} rank(s): max abs errors {report}; seconds {timings}; native {native['seconds']}")
