"""Distributed VAE Decode with LTX-2.5's diffusion decoder = ComfyUI's VAEDecode (exact mode) and
VAEDecodeTiled (tiled mode), 1-3 CPU ranks.

The checkpoint is the tiny LTX-2 one with its video VAE swapped for a tiny CausalDiffusionVAE
(tests/tiny_na_vae.py: the real kernels and upsamples, small widths). The ranks run the real command
(ops_vae.vae_decode) with ComfyModel's VAE; the reference is ComfyUI's VAEDecode on the same file in
this process, float32 on the CPU. "rows": 6 x 4 cells, bands of 6 / 3+3 / 2+2+2 rows; at 3 ranks a
stage-1 window (7 rows) spans all three bands, so every layer's halo comes from two ranks. "columns":
3 x 5 cells, cut along the columns. Each case runs with the whole band per attention call and with
a budget that splits stage 5's attention into runs of rows ("chunked"). Tiled: 3 latent frames of
6 x 4 cells in 2 x 2 tiles (time, rows) that overlap by a frame and a row, dealt 2/1/1 over 3 ranks.
Tolerance: 1e-5 of the largest IMAGE value (the kernels see other shapes: neighbourhood attention
sums its window in another order on a band than on the frame); measured below 1e-6.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from comfyui_harness import comfyui_in_process, comfyui_root
from test_comfy_vae import _fake_job, _shared, image_shape
from tiny_na_vae import make_na_checkpoint

from conftest import run_ranks

pytestmark = pytest.mark.comfyui

TOLERANCE = 1e-5
CASES = {"rows": (1, 128, 2, 6, 4), "columns": (1, 128, 2, 3, 5)}
# Bytes per attention call giving stage 5 of "rows" runs of 8 rows (8 + 10 window rows x 9 frames x
# 32 columns x 32 channels x 4 tensors of float32), about 2 runs per band at 3 ranks, 6 at one.
CHUNK_BYTES = 2_700_000
RUNS = [(name, chunk) for name in CASES for chunk in (0, CHUNK_BYTES)]
RANK_TIMEOUT_S = 900
TILED_LATENT = (1, 128, 3, 6, 4)
# VAEDecodeTiled's settings in pixels and frames: tiles of 2 frames x 4 x 4 cells, overlapping by 1.
TILES = {"tile_px": 128, "overlap_px": 32, "temporal_frames": 16, "temporal_overlap_frames": 8}


@pytest.fixture(scope="module")
def cases(tiny, tmp_path_factory) -> Path:
    """The tiny 2.5 checkpoint, the inputs and VAEDecode's IMAGE for each, under one folder."""
    folder = tmp_path_factory.mktemp("na_decode")
    generator = torch.Generator().manual_seed(11)
    inputs = {name: torch.randn(shape, generator=generator) for name, shape in CASES.items()}
    inputs["one_cell"] = torch.randn((1, 128, 2, 1, 1), generator=generator)
    inputs["no_rows"] = torch.randn((1, 128, 2, 0, 3), generator=generator)
    inputs["tiled"] = torch.randn(TILED_LATENT, generator=generator)
    with comfyui_in_process(comfyui_root()), torch.inference_mode():
        import folder_paths

        import nodes  # ComfyUI's nodes.py

        checkpoint = make_na_checkpoint(tiny.checkpoint, folder / "ltx25-tiny-na.safetensors")
        folder_paths.add_model_folder_path("checkpoints", str(folder))
        _model, _clip, vae = nodes.CheckpointLoaderSimple().load_checkpoint(checkpoint.name)
        assert type(vae.first_stage_model).__name__ == "CausalDiffusionVAE"
        native = {
            name: nodes.VAEDecode().decode(vae, {"samples": inputs[name]})[0] for name in (*CASES, "one_cell")
        }
        untiled = nodes.VAEDecode().decode(vae, {"samples": inputs["tiled"]})[0]
        native["tiled"] = nodes.VAEDecodeTiled().decode(
            vae, {"samples": inputs["tiled"]}, *(TILES[k] for k in ("tile_px", "overlap_px", "temporal_frames",
                                                                   "temporal_overlap_frames"))
        )[0]  # fmt: skip
    torch.save(
        {"inputs": inputs, "native": native, "untiled": untiled, "checkpoint": str(checkpoint)},
        folder / "cases.pt",
    )
    return folder


def _ranks(rank: int, world_size: int, init_file: str, folder: str, out_folder: str) -> None:
    from ltx2_mgpu.workers.engine.comfy.bootstrap import import_comfyui
    from ltx2_mgpu.workers.wire.comfyui_root import check_comfyui_root

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world_size)
    import_comfyui(check_comfyui_root(os.environ["COMFYUI_PATH"]), torch.device("cpu"))
    from ltx2_mgpu.workers.engine.comfy.model import ComfyModel
    from ltx2_mgpu.workers.rank.ops import InputRejected
    from ltx2_mgpu.workers.rank.ops_vae import vae_decode

    data = torch.load(Path(folder) / "cases.pt")
    inputs, out = data["inputs"], Path(out_folder)
    model = ComfyModel.load(Path(data["checkpoint"]), torch.device("cpu"), None)
    job = _fake_job(rank, world_size, model)
    results = {}
    for name, chunk in [*RUNS, ("one_cell", 0)]:
        args = {
            "video": inputs[name], "audio": None, "mode": "exact", "na_chunk_bytes": chunk,
            "out_image": _shared(out / f"{name}-{chunk}.f32", image_shape(tuple(inputs[name].shape))),
            "out_audio": None,
        }  # fmt: skip
        results[f"{name}-{chunk}"] = vae_decode(job, args)
    args = {
        "video": inputs["tiled"], "audio": None, "mode": "tiled", "tiles": TILES, "out_audio": None,
        "out_image": _shared(out / "tiled-0.f32", image_shape(TILED_LATENT)),
    }  # fmt: skip
    results["tiled-0"] = vae_decode(job, args)
    for name, args in {
        "no_rows": {"video": inputs["no_rows"]},
        "bad_chunk": {"video": inputs["rows"], "na_chunk_bytes": -1},
    }.items():
        try:
            vae_decode(job, {"audio": None, "mode": "exact", "out_image": None, "out_audio": None, **args})
            results[name] = "decoded"
        except InputRejected as exc:
            results[name] = str(exc)
    (out / f"results-{rank}.json").write_text(json.dumps(results))
    dist.destroy_process_group()


@pytest.mark.parametrize("world_size", [1, 2, 3])
def test_diffusion_decode_equals_native_vae_decode(cases, tmp_path, world_size):
    data = torch.load(cases / "cases.pt")
    native = data["native"]
    keys = [f"{name}-{chunk}" for name, chunk in [*RUNS, ("one_cell", 0)]]
    for key in [*keys, "tiled-0"]:
        shape = tuple(native[key.split("-")[0]].shape)
        torch.full(shape, float("nan")).numpy().tofile(tmp_path / f"{key}.f32")
    run_ranks(_ranks, world_size, tmp_path, str(cases), str(tmp_path), timeout_s=RANK_TIMEOUT_S)
    results = [json.loads((tmp_path / f"results-{r}.json").read_text()) for r in range(world_size)]

    errors = {}
    for key in keys:
        reference = native[key.split("-")[0]]
        ours = _shared(tmp_path / f"{key}.f32", tuple(reference.shape)).clone()
        errors[key] = (ours - reference).abs().max().item() / reference.abs().max().item()
        assert errors[key] <= TOLERANCE, (key, errors[key])
        assert {r[key]["mode"] for r in results} == {"exact"}
        assert results[0][key]["plan"].startswith("diffusion decoder: "), results[0][key]["plan"]
    # The memory setting changes nothing the user sees.
    for name in CASES:
        chunked = _shared(tmp_path / f"{name}-{CHUNK_BYTES}.f32", tuple(native[name].shape))
        whole = _shared(tmp_path / f"{name}-0.f32", tuple(native[name].shape))
        assert (chunked - whole).abs().max().item() <= TOLERANCE * whole.abs().max().item()
    bands = min(world_size, 6)
    assert results[0]["rows-0"]["plan"].startswith(f"diffusion decoder: {bands} band(s)")
    if world_size > 1:  # a halo at every neighbourhood attention: 6 + 2 layers of the tiny decoder
        assert all(r["rows-0"]["exchanges"] == 8 and r["rows-0"]["bytes_sent"] > 0 for r in results)
    # Tiled: VAEDecodeTiled's frames, each tile decoded once somewhere (4 tiles: 2 / 1 / 1 over 3 ranks).
    tiled = _shared(tmp_path / "tiled-0.f32", tuple(native["tiled"].shape)).clone()
    errors["tiled"] = (tiled - native["tiled"]).abs().max().item() / native["tiled"].abs().max().item()
    assert errors["tiled"] <= TOLERANCE, errors["tiled"]
    assert {r["tiled-0"]["mode"] for r in results} == {"tiled"}
    assert sorted(r["tiled-0"]["tiles"] for r in results) == sorted(
        len(range(r, 4, world_size)) for r in range(world_size)
    )
    # Not VAEDecode's frames: the tiles' own noise and their blending are what the user asked for.
    untiled = data["untiled"]
    assert (tiled - untiled).abs().max().item() > 100 * TOLERANCE * untiled.abs().max().item()
    for r in results:  # refused alike on every rank, before any work
        assert "(1, 128, 2, 0, 3): no height" in r["no_rows"], r["no_rows"]
        assert "na_chunk_bytes is -1" in r["bad_chunk"], r["bad_chunk"]
    seconds = {key: max(r[key]["total_s"] for r in results) for key in keys}
    sent = [r["rows-0"]["bytes_sent"] for r in results]
    print(
        f"\n{world_size} rank(s): max error / max |IMAGE| {errors}; seconds {seconds}; rows-0 bytes sent {sent}"
    )
