"""A video latent too small for the decoder (a side of one cell) is refused before any work, with the
smallest size that decodes: by the node before the group starts, and by every rank alike (ltx-core path
here; the comfy path in test_comfy_vae.py)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest
import torch

from ltx2_mgpu.nodes.vae_decode import LTX2DistributedVAEDecode
from ltx2_mgpu.workers.rank.ops import InputRejected, read_request
from ltx2_mgpu.workers.rank.ops_vae import validate
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


def test_the_node_refuses_before_starting_any_worker():
    started = SimpleNamespace()  # any use of the model (world_size, checkpoint) would raise AttributeError
    latent = {"samples": torch.zeros(1, 128, 2, 1, 1)}
    with pytest.raises(ValueError, match=r"\[B, 128, F, 2, 2\]"):
        LTX2DistributedVAEDecode().decode(started, latent)


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
