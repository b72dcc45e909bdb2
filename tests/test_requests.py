"""Typed requests (workers/wire/requests.py): the node checks before any worker starts, the wire form
survives the control channel (no objects, tensors through shared memory) and every rank rebuilds the
same request."""

from __future__ import annotations

import os

import pytest
import torch

from conftest import tiny_conditioning
from ltx2_mgpu.nodes.convert import conditioning_args
from ltx2_mgpu.nodes.sp_sampler import sample_latent
from ltx2_mgpu.workers.group.manager import MGPUModel, get_manager
from ltx2_mgpu.workers.rank import ops
from ltx2_mgpu.workers.wire import protocol, shm
from ltx2_mgpu.workers.wire.capabilities import COMFY, DIAGNOSTICS, LTXCORE
from ltx2_mgpu.workers.wire.requests import (
    REQUESTS,
    LoadModel,
    Sample,
    SetLoras,
    TextConditioning,
    TileSettings,
    VaeDecode,
)


def sample_request(**changes) -> Sample:
    positive, _ = conditioning_args(tiny_conditioning(5, 64, seed=0), "positive")
    fields = {
        "video": torch.randn(1, 128, 2, 3, 4),
        "audio": torch.randn(1, 8, 5, 16),
        "sigmas": torch.tensor([1.0, 0.5, 0.0]),
        "positive": positive,
        "sampler": "euler_ancestral",
        "cfg_video": 3,  # an int where a float belongs: coerced
        "seed": 7,
    }
    return Sample(**{**fields, **changes})


def test_the_wire_form_crosses_the_channel_and_rebuilds_the_same_request():
    request = sample_request()
    names: list[str] = []
    try:
        message = protocol.encode(
            {
                "kind": "request",
                "job_id": 1,
                "op": request.OP,
                "args": protocol.share_tensors(request.to_wire(), names),
            }
        )
        args = protocol.attach_tensors(protocol.decode(message)["args"])  # no globals allowed
        rebuilt = Sample.from_wire(args)
    finally:
        for name in names:
            shm.unlink(name)
    assert isinstance(rebuilt.positive, TextConditioning) and rebuilt.positive.unprocessed
    assert torch.equal(rebuilt.positive.tensor, request.positive.tensor)
    for name in ("video", "audio", "sigmas"):
        assert torch.equal(getattr(rebuilt, name), getattr(request, name))
    assert (rebuilt.sampler, rebuilt.cfg_video, rebuilt.seed) == ("euler_ancestral", 3.0, 7)
    assert isinstance(rebuilt.cfg_video, float)
    assert names, "tensors must travel through shared memory, not inside the message"


def test_nested_settings_travel_as_plain_dicts():
    settings = TileSettings(tile_px=128, overlap_px=32)
    wire = VaeDecode(video=torch.zeros(1, 128, 2, 2, 2), tiles=settings).to_wire()
    assert wire["tiles"] == {
        "tile_px": 128,
        "overlap_px": 32,
        "temporal_frames": 0,
        "temporal_overlap_frames": 24,
    }
    assert VaeDecode.from_wire(wire).tiles == settings
    assert SetLoras.from_wire(SetLoras((("a.safetensors", 1),)).to_wire()).loras == (("a.safetensors", 1.0),)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"sampler": "dpmpp"}, r"sampler 'dpmpp' is not supported; choose one of euler, euler_ancestral"),
        ({"video": torch.zeros(1, 64, 2, 3, 4)}, "has 64 channels; LTX-2 video latents have 128"),
        ({"sigmas": torch.tensor([0.5, 0.9, 0.0])}, "must not increase"),
        ({"max_video_tokens": 10}, r"24 tokens .* over the limit of 10"),
        ({"audio": torch.zeros(2, 8, 5, 16)}, "audio latent has batch 2 but the video latent 1"),
        ({"seed": "seven"}, "sample.seed must be int"),
    ],
)
def test_bad_input_is_refused_where_the_request_is_built(changes, message):
    with pytest.raises((ValueError, TypeError), match=message):
        sample_request(**changes)


def test_the_attention_budget_of_the_diffusion_decode_is_checked():
    video = torch.zeros(1, 128, 2, 2, 2)
    assert VaeDecode(video=video, na_chunk_bytes=2**20).na_chunk_bytes == 2**20
    with pytest.raises(ValueError, match="na_chunk_bytes is -1; use 0"):
        VaeDecode(video=video, na_chunk_bytes=-1)
    with pytest.raises(ops.InputRejected, match="na_chunk_bytes is -1"):
        ops.read_request(VaeDecode, {**VaeDecode(video=video).to_wire(), "na_chunk_bytes": -1})


def test_load_settings_are_checked_before_any_worker_starts():
    with pytest.raises(ValueError, match="weight dtype 'int8' is not supported; choose one of bfloat16"):
        LoadModel("x.safetensors", dtype="int8")
    with pytest.raises(ValueError, match="compile_blocks works with mode 'comfyui' only"):
        LoadModel("x.safetensors", mode="reference", compile=True)
    with pytest.raises(ValueError, match="fp8_matmul computes in bfloat16"):
        LoadModel("x.safetensors", dtype="float32", fp8_matmul=True)


def test_a_rank_refuses_unknown_fields_and_bad_values_as_input_errors():
    with pytest.raises(ops.InputRejected, match=r"no field\(s\) \['cfg'\]"):
        ops.read_request(Sample, {**sample_request().to_wire(), "cfg": 2.0})
    with pytest.raises(ops.InputRejected, match="sampler 'x' is not supported"):
        ops.read_request(Sample, {**sample_request().to_wire(), "sampler": "x"})
    with pytest.raises(ops.InputRejected, match="missing 1 required"):
        ops.read_request(LoadModel, {})


def test_every_typed_request_has_a_handler_on_the_ranks():
    ops.load_all()
    assert set(REQUESTS) <= set(ops.OPS)


def test_every_command_of_the_ranks_is_served_by_an_engine_and_the_diagnostics_by_every_one():
    """A command no engine's row lists is refused before it reaches the ranks (a ComfyUI-engine group
    once refused `ping`)."""
    ops.load_all()
    assert set(ops.OPS) <= set(COMFY.commands) | set(LTXCORE.commands)
    diagnostics = {name for name, fn in ops.OPS.items() if fn.__module__.endswith(".ops_diagnostics")}
    assert diagnostics == set(DIAGNOSTICS)
    assert all(engine.serves(name) for engine in (COMFY, LTXCORE) for name in diagnostics)


def test_the_node_refuses_bad_input_without_starting_workers(monkeypatch, tmp_path, fake_comfy):
    started = []
    monkeypatch.setattr(get_manager(), "run", lambda *a, **k: started.append(a))
    model = MGPUModel(checkpoint=str(tmp_path / "none.safetensors"), devices=("cpu", "cpu"))
    conditioning = tiny_conditioning(5, 64, seed=0)
    latent = {"samples": torch.zeros(1, 128, 2, 3, 4)}
    with pytest.raises(ValueError, match="sampler 'dpmpp' is not supported"):
        sample_latent(model, conditioning, conditioning, latent, torch.tensor([1.0, 0.0]), "dpmpp", 1, 1, 0)
    assert started == []
    assert shm.list_segments(os.getpid()) == [], "a refused input left its output slots in /dev/shm"
