"""CUDA graphs of whole model calls (workers/engine/comfy/call_graphs.py, NOTE [call graphs]).

What decides a replay is checked on the CPU: the key leaves out only ComfyUI's per-job cond uuids,
the inputs rebuilt for the capture keep the call's structure, and moving a weight changes the key.
On a GPU (marked `gpu`): the MGPU Loader's MODEL on one GPU worker under ComfyUI's own sampling, with
graphs (LTX2_MGPU_CUDA_GRAPHS=1) and without (=0): the second and third steps replay a
captured graph, and the result is the eager one bit for bit.
"""

from __future__ import annotations

import uuid

import pytest
import torch
from test_comfyui_native_parity import comfy  # noqa: F401
from test_group_model import GRAPHS, errors, run_graph

from conftest import assert_no_leaks
from ltx2_mgpu.workers.engine.comfy.call_graphs import _mapped, _signature, graphs_enabled, weight_addresses
from ltx2_mgpu.workers.group.manager import get_manager


def _call(step: float) -> dict:
    return {
        "streams": [torch.zeros(1, 4, 3), torch.zeros(1, 2)],
        "timestep": [torch.tensor([step]), torch.tensor([step])],
        "kwargs": {"frame_rate": 25.0, "latent_shapes": [torch.Size([1, 128, 2, 3, 4])]},
        "options": {"uuids": [uuid.uuid4()], "cond_or_uncond": [0, 1], "sigmas": torch.tensor([step])},
    }


def test_steps_of_one_sampler_share_a_key_and_other_shapes_or_values_do_not():
    first, second = _call(0.9), _call(0.4)  # other timestep values, other uuids: one graph serves both
    assert _signature(first, []) == _signature(second, [])
    other = _call(0.9)
    other["kwargs"]["frame_rate"] = 24.0  # a Python value the model reads on the host
    assert _signature(other, []) != _signature(first, [])
    other = _call(0.9)
    other["streams"][0] = torch.zeros(1, 4, 5)
    assert _signature(other, []) != _signature(first, [])


def test_while_capturing_later_blocks_read_the_graphs_buffers_and_keep_their_own_hidden_states():
    call = _call(0.9)
    leaves: list[torch.Tensor] = []
    _signature(call, leaves)
    static = {id(t): t.clone() + 1 for t in leaves}
    hidden = torch.ones(1, 4, 3)  # what the previous block returned: not one of block 0's arguments
    later = dict(call, streams=[hidden, call["streams"][1]])
    mapped = _mapped(later, static)
    assert list(mapped) == list(later) and mapped["options"]["uuids"] is call["options"]["uuids"]
    assert isinstance(mapped["kwargs"]["latent_shapes"][0], torch.Size)
    assert mapped["streams"][0] is hidden and mapped["streams"][1] is static[id(call["streams"][1])]
    assert mapped["timestep"][1] is static[id(call["timestep"][1])]
    assert mapped["options"]["sigmas"] is static[id(call["options"]["sigmas"])]


class _Holder:
    """Like ComfyUI's CompressedTimestep: a new object each forward, holding a tensor and ints."""

    __slots__ = ("data", "frames")

    def __init__(self, data: torch.Tensor, frames: int) -> None:
        self.data, self.frames = data, frames


def test_objects_built_every_forward_are_keyed_and_mapped_by_what_they_hold():
    first, second = _call(0.9), _call(0.4)
    first["kwargs"]["v_timestep"] = _Holder(torch.zeros(1, 2, 8), 2)
    second["kwargs"]["v_timestep"] = _Holder(torch.ones(1, 2, 8), 2)
    leaves: list[torch.Tensor] = []
    assert _signature(first, leaves) == _signature(second, [])  # not their identities: one graph serves both
    assert any(t is first["kwargs"]["v_timestep"].data for t in leaves)  # its tensor is a graph input
    other = _call(0.9)
    other["kwargs"]["v_timestep"] = _Holder(torch.zeros(1, 2, 8), 3)  # an int the model reads on the host
    assert _signature(other, []) != _signature(first, [])
    static = {id(t): t.clone() for t in leaves}
    mapped = _mapped(first, static)["kwargs"]["v_timestep"]
    assert type(mapped) is _Holder and mapped.frames == 2
    assert mapped.data is static[id(first["kwargs"]["v_timestep"].data)]
    assert first["kwargs"]["v_timestep"].data is not mapped.data  # the forward's own object is left alone


def test_graphs_are_on_unless_switched_off(monkeypatch):
    monkeypatch.delenv("LTX2_MGPU_CUDA_GRAPHS", raising=False)
    assert graphs_enabled()
    for off in ("0", "off", "false"):
        monkeypatch.setenv("LTX2_MGPU_CUDA_GRAPHS", off)
        assert not graphs_enabled()


def test_a_model_with_another_nodes_block_patches_keeps_them_and_runs_eagerly():
    from types import SimpleNamespace

    from ltx2_mgpu.workers.engine.comfy.call_graphs import attach_call_graphs

    def theirs(args, extra):
        return extra["original_block"](args)

    patches = {"transformer_options": {"patches_replace": {"dit": {("double_block", 3): theirs}}}}
    patcher = SimpleNamespace(
        load_device=torch.device("cuda", 0), model=SimpleNamespace(), model_options=patches
    )
    assert attach_call_graphs(patcher, SimpleNamespace(world_size=1), enabled=True) is None
    assert patches["transformer_options"]["patches_replace"]["dit"] == {("double_block", 3): theirs}


def test_several_ranks_get_graphs_only_over_the_ipc_kernel_and_wrap_sps_block_patches():
    """NOTE [call graphs] on several ranks: the torch.distributed fallback (no capture_key) runs eagerly;
    our block patch calls the patch it wraps (SP's) with the block's own extra, and the exchange's
    buffers' generation is part of the key (a grow moves them)."""
    from types import SimpleNamespace

    from ltx2_mgpu.workers.engine.comfy.call_graphs import BlockGraphs, attach_call_graphs

    patcher = SimpleNamespace(load_device=torch.device("cuda", 0), model=SimpleNamespace(), model_options={})
    fallback = SimpleNamespace(world_size=2, name="torch.distributed")
    assert attach_call_graphs(patcher, fallback, enabled=True) is None
    calls = []

    def sp_patch(args, extra):
        calls.append((args["img"], extra["original_block"]))
        return {"img": args["img"] + 1}

    generation = [0]
    graphs = BlockGraphs(torch.nn.Linear(2, 2), last=1, exchange_key=lambda: ("ipc", generation[0]))
    patch = graphs.block_patch(0, sp_patch)
    original = object()
    out = patch({"img": torch.zeros(2)}, {"original_block": original})  # the first forward runs eagerly
    assert torch.equal(out["img"], torch.ones(2)) and calls[0][1] is original
    first = next(iter(graphs.seen))
    graphs.block_patch(1, sp_patch)({"img": out["img"]}, {"original_block": original})
    generation[0] += 1  # the IPC exchange grew: its buffers moved
    graphs.block_patch(0, sp_patch)({"img": torch.zeros(2)}, {"original_block": original})
    assert len(graphs.seen) == 2 and next(reversed(graphs.seen)) != first and first[-1] == ("ipc", 0)


def test_a_moved_weight_changes_the_key_and_a_weight_patched_in_place_does_not():
    layer = torch.nn.Linear(4, 4)
    before = weight_addresses(layer)
    with torch.no_grad():
        layer.weight.add_(1.0)  # a LoRA written into the same memory: the replay reads it
    assert weight_addresses(layer) == before
    layer.weight = torch.nn.Parameter(
        layer.weight.detach().clone()
    )  # a reload: the graph would read freed memory
    assert weight_addresses(layer) != before


def _sample_on_one_gpu(comfy, tiny, name: str) -> tuple[list[torch.Tensor], list]:  # noqa: F811
    from ltx2_mgpu.nodes.loader import load_model

    _mgpu, model, _info = load_model(tiny.checkpoint.name, "cuda:0", "float32")
    call = model.model.diffusion_model.call
    replies, run_job = [], call._run_job
    call._run_job = lambda request: replies.append(run_job(request)) or replies[-1]
    try:
        out = run_graph(comfy, model, GRAPHS[name])
    finally:
        call._run_job = run_job
    return out, [r[0]["cuda_graphs"] for r in replies if "forward_ms" in r[0]]


@pytest.mark.gpu
@pytest.mark.comfyui
@pytest.mark.parametrize("name", ["t2v-cfg3", "keyframe-guide-0.7", "stg-block1"])
def test_replayed_model_calls_equal_eager_ones_bit_for_bit(comfy, tiny, name):  # noqa: F811
    manager = get_manager()
    try:
        manager.env["LTX2_MGPU_CUDA_GRAPHS"] = "1"
        graphed, counts = _sample_on_one_gpu(comfy, tiny, name)
        manager.unload()
        manager.env["LTX2_MGPU_CUDA_GRAPHS"] = "0"
        eager, eager_counts = _sample_on_one_gpu(comfy, tiny, name)
    finally:
        manager.env.pop("LTX2_MGPU_CUDA_GRAPHS", None)
        manager.unload()
    assert_no_leaks()
    native = run_graph(comfy, comfy.model, GRAPHS[name])
    print(
        f"\n[call graphs] {name}: replays/captures per call {counts}; vs native (CPU) {errors(graphed, native)}"
    )
    assert set(eager_counts) == {None}
    assert counts[-1][0] >= 1 and counts[-1][1] >= 1, counts  # the later steps replayed a captured graph
    for a, b in zip(graphed, eager):
        assert torch.equal(a, b), (name, float((a - b).abs().max()))
    assert all(rel <= 1e-4 for _, rel in errors(graphed, native))  # GPU against CPU float32: 1-2e-5


@pytest.mark.gpu
@pytest.mark.comfyui
def test_sp_sampler_steps_replayed_equal_eager_ones_bit_for_bit(tiny):
    """The SP Sampler's loop inside one GPU worker (CFG 3 / 7, euler, 3 steps): the same result with
    its calls replayed from CUDA graphs as with LTX2_MGPU_CUDA_GRAPHS=0."""
    from comfyui_harness import comfyui_root
    from test_guidance_gpu import sample

    from ltx2_mgpu.workers.group.manager import MGPUModel
    from ltx2_mgpu.workers.wire.comfyui_root import check_comfyui_root

    root = check_comfyui_root(comfyui_root())
    model = MGPUModel.create(
        tiny.checkpoint, devices="cuda:0", dtype="float32", backend="comfy",
        comfyui_root=root.path, comfyui_version=root.version,
    )  # fmt: skip
    manager = get_manager()
    try:
        manager.env["LTX2_MGPU_CUDA_GRAPHS"] = "1"
        graphed, reply = sample(model, 1)
        manager.unload()
        manager.env["LTX2_MGPU_CUDA_GRAPHS"] = "0"
        eager, eager_reply = sample(model, 1)
    finally:
        manager.env.pop("LTX2_MGPU_CUDA_GRAPHS", None)
        manager.unload()
    assert_no_leaks()
    print(f"\n[call graphs] SP Sampler: replays/captures {reply['cuda_graphs']}")
    assert eager_reply["cuda_graphs"] is None
    assert reply["cuda_graphs"][0] >= 1 and reply["cuda_graphs"][1] >= 1, reply["cuda_graphs"]
    for a, b in zip(graphed, eager):
        assert torch.equal(a, b), float((a - b).abs().max())
