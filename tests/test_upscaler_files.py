"""What the TDP Upscaler tells an artist about the upscaler file (workers/wire/upscaler_files.py) and its
console line per run (nodes/tdp_upscaler.run_line); no ComfyUI needed."""

from __future__ import annotations

import pytest

from ltx2_mgpu.nodes.tdp_upscaler import run_line
from ltx2_mgpu.workers.wire.upscaler_files import check_upscaler_input, describe_upscaler, release_mismatch

X2 = {"spatial_upsample": True, "temporal_upsample": False, "spatial_scale": 2.0}
X15 = {"spatial_upsample": True, "temporal_upsample": False, "spatial_scale": 1.5, "rational_resampler": True}
TEMPORAL = {"spatial_upsample": False, "temporal_upsample": True, "dims": 3}


def test_describe_upscaler():
    assert describe_upscaler(X2) == "x2"
    assert describe_upscaler(X15) == "x1.5"
    assert describe_upscaler(TEMPORAL).startswith("temporal x2: 2N - 1 frames, save them at twice")
    assert describe_upscaler(TEMPORAL | {"spatial_upsample": True}).startswith("temporal x2 and x2 in space")


def test_a_temporal_upscaler_needs_two_latent_frames():
    check_upscaler_input("t.safetensors", TEMPORAL, 2)
    check_upscaler_input("x2.safetensors", X2, 1)  # one frame upscales in space
    with pytest.raises(ValueError, match=r"t\.safetensors is a temporal upscaler .* at least 9 video frames"):
        check_upscaler_input("t.safetensors", TEMPORAL, 1)


def test_an_upscaler_of_another_release_is_named():
    message = release_mismatch("up25.safetensors", {"model_version": "2.5.0"}, "LTX-2.3")
    assert message is not None
    assert "up25.safetensors says it is for LTX-2.5" in message and "pick an LTX-2.3 upscaler" in message
    assert release_mismatch("up23.safetensors", {"model_version": "2.3.0"}, "LTX-2.3") is None
    assert release_mismatch("plain.safetensors", {}, "LTX-2.3") is None  # most files state nothing
    assert release_mismatch("up25.safetensors", {"model_version": "2.5.0"}, "") is None  # family not read


def test_run_line_says_what_ran_and_what_was_reused():
    ranks = [
        {
            "tiles": [2, 2],
            "steps": 3,
            "preview_tile": None,
            "reused": {"upscaler": True, "upsampled_latent": False},
        }
    ]
    line = run_line("ltx-2.3-spatial-upscaler-x2-1.1.safetensors", "x2", ranks * 2, 1.234)
    assert line == (
        "TDP Upscaler: ltx-2.3-spatial-upscaler-x2-1.1 (x2), 2x2 tiles on 2 workers, 3 steps in 1.23 s; "
        "reused the upscaler"
    )
    first = {
        "tiles": [3, 3],
        "steps": 2,
        "preview_tile": 4,
        "reused": {"upscaler": False, "upsampled_latent": False},
    }
    assert run_line("u.safetensors", "x1.5", [first], 12.0) == (
        "TDP Upscaler: u (x1.5), the centre tile on 1 worker, 2 steps in 12.0 s"
    )
    assert run_line("u.safetensors", "x2", [{"tiles": [1, 1], "steps": 1}], 0.5).endswith("1 step in 0.50 s")
