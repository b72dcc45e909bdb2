"""Distributed VAE Decode's exact mode with an LTX-2.3-style conv decoder = ComfyUI's VAEDecode, 1-3 CPU ranks.

What 2.3 changed in ComfyUI's conv VAE (causal_video_autoencoder.py, VideoVAE from the file's config):
its decoder upsamples space and time in separate stages ("compress_space", "compress_time", each a
DepthToSpaceUpsample with a residual) as well as jointly ("compress_all"), where LTX-2's tiny and
released decoders use "compress_all" only. The checkpoint is the tiny LTX-2 one with its video VAE
swapped for such a VideoVAE (same channels and padding as the tiny LTX-2 VAE, random weights), detected
by ComfyUI as its LTX VAE by `decoder.up_blocks.0.res_blocks.0.conv1.conv.weight`. The ranks run the
real command (ops_vae.vae_decode, mode exact) with ComfyModel's VAE; the reference is VAEDecode on the
same file in this process. Tolerance as tests/test_comfy_vae.py's exact decode: 1e-5 of the IMAGE.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from comfyui_harness import comfyui_in_process, comfyui_root
from safetensors import safe_open
from test_comfy_vae import _fake_job, _shared, image_shape
from tiny_na_vae import random_state, with_video_vae

from conftest import run_ranks

pytestmark = pytest.mark.comfyui

TOLERANCE = 1e-5  # of the IMAGE's [0, 1] range; the slabs' convolutions may round apart (test_comfy_vae.py)
# 12 x 16 cells, 17 frames: VAEDecodeTiled's default 512 px tiles would cut it 2 x 2; bands of
# 12 / 6+6 / 4+4+4 rows here.
LATENT = (1, 128, 3, 12, 16)
# Pixel side first, as the files list them (the decoder runs them from the latent side).
DECODER_BLOCKS_23 = [
    ["compress_space", {"residual": True, "multiplier": 2}],
    ["compress_time", {"residual": True, "multiplier": 2}],
    ["compress_all", {"residual": True, "multiplier": 2}],
    ["compress_all", {"residual": True, "multiplier": 1}],
    ["res_x", {"num_layers": 1, "inject_noise": False}],
]
RANK_TIMEOUT_S = 600
# Pixels mostly inside VAE.process_output's clamp (9% clamped at gain 1, measured), so the comparison
# sees real values.
OUTPUT_GAIN = 0.5


def _vae_23(tiny_checkpoint: Path, out: Path) -> Path:
    from comfy.ldm.lightricks.vae.causal_video_autoencoder import VideoVAE

    with safe_open(str(tiny_checkpoint), framework="pt") as f:
        config = dict(json.loads(f.metadata()["config"])["vae"], decoder_blocks=DECODER_BLOCKS_23)
    state = random_state(VideoVAE(config=config), seed=0)
    state["decoder.conv_out.conv.weight"] *= OUTPUT_GAIN
    return with_video_vae(tiny_checkpoint, out, config, state)


@pytest.fixture(scope="module")
def case(tiny, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("ltx23_vae")
    latent = torch.randn(LATENT, generator=torch.Generator().manual_seed(5))
    with comfyui_in_process(comfyui_root()), torch.inference_mode():
        import folder_paths

        import nodes  # ComfyUI's nodes.py

        checkpoint = _vae_23(tiny.checkpoint, folder / "ltx23-vae-tiny.safetensors")
        folder_paths.add_model_folder_path("checkpoints", str(folder))
        _model, _clip, vae = nodes.CheckpointLoaderSimple().load_checkpoint(checkpoint.name)
        kinds = {type(block).__name__ for block in vae.first_stage_model.decoder.up_blocks}
        assert kinds == {"UNetMidBlock3D", "DepthToSpaceUpsample"}, kinds
        native = nodes.VAEDecode().decode(vae, {"samples": latent})[0]
    torch.save({"latent": latent, "native": native, "checkpoint": str(checkpoint)}, folder / "case.pt")
    return folder


def _ranks(rank: int, world_size: int, init_file: str, folder: str, out_folder: str) -> None:
    from ltx2_mgpu.workers.engine.comfy.bootstrap import import_comfyui
    from ltx2_mgpu.workers.wire.comfyui_root import check_comfyui_root

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world_size)
    import_comfyui(check_comfyui_root(os.environ["COMFYUI_PATH"]), torch.device("cpu"))
    from ltx2_mgpu.workers.engine.comfy.model import ComfyModel
    from ltx2_mgpu.workers.rank.ops_vae import vae_decode

    data = torch.load(Path(folder) / "case.pt")
    model = ComfyModel.load(Path(data["checkpoint"]), torch.device("cpu"), None)
    args = {
        "video": data["latent"], "audio": None, "mode": "exact", "out_audio": None,
        "out_image": _shared(Path(out_folder) / "image.f32", image_shape(LATENT)),
    }  # fmt: skip
    result = vae_decode(_fake_job(rank, world_size, model), args)
    (Path(out_folder) / f"result-{rank}.json").write_text(json.dumps(result))
    dist.destroy_process_group()


@pytest.mark.parametrize("world_size", [1, 2, 3])
def test_ltx23_conv_decoder_exact_equals_vae_decode(case, tmp_path, world_size):
    native = torch.load(case / "case.pt")["native"]
    torch.full(tuple(native.shape), float("nan")).numpy().tofile(tmp_path / "image.f32")
    run_ranks(_ranks, world_size, tmp_path, str(case), str(tmp_path), timeout_s=RANK_TIMEOUT_S)
    ours = _shared(tmp_path / "image.f32", tuple(native.shape)).clone()
    error = (ours - native).abs().max().item()
    result = json.loads((tmp_path / "result-0.json").read_text())
    print(f"\n{world_size} rank(s): max abs error {error}; plan {result['plan']}; {result['total_s']} s")
    assert error <= TOLERANCE
    assert result["mode"] == "exact" and result["plan"].startswith(f"{world_size} band(s)")
