"""A video latent too small for the decoder (a side of one cell) is refused before any work, with the
smallest size that decodes: by the node before the group starts, and by every rank alike (ltx-core path
here; the comfy path in test_comfy_vae.py)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import save_file

from ltx2_mgpu.nodes.vae_decode import decode_latent
from ltx2_mgpu.workers.engine.ltxcore.vae_job import validate
from ltx2_mgpu.workers.rank.ops import InputRejected, read_request
from ltx2_mgpu.workers.strategies.decode_limits import check_decodable, min_decode_cells
from ltx2_mgpu.workers.strategies.vae_tiles import TileSettings
from ltx2_mgpu.workers.wire.requests import VaeDecode

SMALLEST = "[B, 128, F, 2, 2]"


@pytest.mark.parametrize("hw", [(1, 1), (1, 4), (4, 1)])
def test_a_side_of_one_cell_is_refused_with_the_smallest_size(hw):
    with pytest.raises(ValueError, match=r"\[B, 128, F, 2, 2\] \(64 x 64 px\)"):
        check_decodable((1, 128, 2, *hw))


def test_two_cells_decode_and_zero_padding_takes_one():
    check_decodable((1, 128, 1, 2, 2))
    check_decodable((1, 128, 1, 1, 1), padding_mode="zeros")
    assert min_decode_cells("reflect") == 2


def _checkpoint_with(path, key: str) -> SimpleNamespace:
    """An MGPU_MODEL stand-in whose file holds only `key`: the node may read the file's header, any
    other use of the model (world_size: starting workers) raises AttributeError."""
    save_file({key: torch.zeros(1)}, str(path))
    return SimpleNamespace(checkpoint=str(path))


def test_the_node_refuses_before_starting_any_worker(tmp_path):
    started = _checkpoint_with(tmp_path / "conv.safetensors", "vae.decoder.conv_in.conv.weight")
    latent = {"samples": torch.zeros(1, 128, 2, 1, 1)}
    with pytest.raises(ValueError, match=r"\[B, 128, F, 2, 2\]"):
        decode_latent(started, latent)


def test_the_node_lets_one_cell_through_to_the_diffusion_decoder(tmp_path):
    # LTX-2.5's diffusion decoder pads nothing: ComfyUI decodes a 1 x 1 latent with it.
    started = _checkpoint_with(tmp_path / "na.safetensors", "vae.decoder.conv_in_x_t.weight")
    latent = {"samples": torch.zeros(1, 128, 2, 1, 1)}
    # Past the size check, on to the workers (which the stand-in cannot start).
    with pytest.raises(AttributeError) as failed:
        decode_latent(started, latent)
    assert "'checkpoint'" not in str(failed.value) and "no attribute" in str(failed.value)


def test_ranks_refuse_it_alike_before_any_collective():
    args = {
        "video": torch.zeros(1, 128, 2, 1, 1),
        "audio": None,
        "tiles": dataclasses.asdict(TileSettings()),
        "out_image": torch.zeros(9, 32, 32, 3),
        "out_audio": None,
    }
    with pytest.raises(InputRejected, match=r"\[B, 128, F, 2, 2\]"):
        validate(read_request(VaeDecode, args), world_size=2)
