"""The wire form of the loader MODEL's model calls (workers/wire/model_call.py) and the UI side's
conditioning cache (nodes/group_model/call.py), without ComfyUI or workers: a fake rank decodes what
the UI side sends, as the real ranks do (workers/engine/comfy/model_call.py)."""

from __future__ import annotations

import functools
import gc
import os
import uuid

import pytest
import torch

from ltx2_mgpu.nodes.group_model.call import CACHE_ENTRIES, GroupModelCall, carried_options
from ltx2_mgpu.workers.group import kept_slots
from ltx2_mgpu.workers.group.client import _slots_to_wire
from ltx2_mgpu.workers.group.manager import MGPUModel
from ltx2_mgpu.workers.wire import model_call as wire
from ltx2_mgpu.workers.wire import protocol, shm
from ltx2_mgpu.workers.wire.backend import BACKEND_COMFY
from ltx2_mgpu.workers.wire.errors import JobInputError
from ltx2_mgpu.workers.wire.requests import ComfyModelCall


def other_pack_patch(*args):
    return args


class OtherPackObject:
    pass


def test_values_travel_through_the_control_channel_exactly():
    """Everything ComfyUI's LTX sampling puts in a call, through pickle with no globals and back."""
    options = {
        "cond_or_uncond": [1, 0],
        "uuids": [uuid.UUID(int=5), uuid.UUID(int=9)],
        "sigmas": torch.tensor([0.9, 0.9]),
        "stg_self_attn_blocks": frozenset({1, 29}),
        "a2v_cross_attn": False,
        "latent_shapes": [torch.Size([1, 128, 3, 2, 3]), torch.Size([1, 8, 18, 16])],
        "timestep": (torch.rand(2, 18, dtype=torch.bfloat16), torch.rand(2, 18)),
        "patches": {},
    }
    sent = protocol.decode(protocol.encode({"kind": "request", "call": wire.encode(options, "t", _inline)}))
    back = wire.decode(sent["call"], wire.inline_to_tensor)
    assert back.keys() == options.keys()
    assert (
        back["uuids"] == options["uuids"] and back["stg_self_attn_blocks"] == options["stg_self_attn_blocks"]
    )
    assert back["latent_shapes"] == options["latent_shapes"] and isinstance(
        back["latent_shapes"][0], torch.Size
    )
    assert isinstance(back["timestep"], tuple)
    for a, b in zip(back["timestep"], options["timestep"]):
        assert a.dtype == b.dtype and torch.equal(a, b)
    assert torch.equal(back["sigmas"], options["sigmas"])


def _inline(value: torch.Tensor, where: str) -> dict:
    return wire.inline_tensor(value)


@pytest.mark.parametrize(
    ("value", "named"),
    [
        (other_pack_patch, "test_model_call_wire.other_pack_patch"),
        (functools.partial(other_pack_patch, 1), "test_model_call_wire.other_pack_patch"),
        (OtherPackObject(), "test_model_call_wire.OtherPackObject"),
    ],
)
def test_a_python_object_is_refused_with_where_and_who(value, named):
    options = {"patches": {"attn1_patch": [value]}}
    with pytest.raises(wire.NotCarried) as caught:
        wire.encode(options, "transformer_options", _inline)
    message = str(caught.value)
    assert "transformer_options['patches']['attn1_patch'][0]" in message and named in message


def test_only_the_diffusion_model_wrappers_are_refused():
    ui_level = {"wrappers": {"outer_sample": {"x": [other_pack_patch]}}, "callbacks": {"y": {"z": [print]}}}
    assert carried_options({**ui_level, "sigmas": 1}) == {"sigmas": 1}
    inner = {"wrappers": {"diffusion_model": {"other_pack": [other_pack_patch]}}}
    with pytest.raises(wire.NotCarried, match=r"\['diffusion_model'\]\['other_pack'\].*other_pack_patch"):
        carried_options(inner)


class FakeRanks:
    """Decodes as the ranks do, keeps stored tensors, answers the velocity 2 * x + context mean."""

    def __init__(self) -> None:
        self.cache: dict[int, torch.Tensor] = {}
        self.calls: list[dict] = []

    def __call__(self, request: ComfyModelCall) -> list[dict]:
        # As WorkerGroup.run and a rank see it: tensors shared for the job, slots mapped by name.
        names: list[str] = []
        wired = protocol.share_tensors(_slots_to_wire(request.to_wire(), names), names)
        try:
            self.calls.append(wired)
            args = protocol.attach_tensors(wired)
            for key in args["drop"]:
                self.cache.pop(key)

            def tensor(value: dict) -> torch.Tensor:
                if wire.TAG_INLINE in value:
                    return wire.inline_to_tensor(value)
                if wire.TAG_STORE in value:
                    self.cache[value[wire.TAG_STORE]] = value["value"].clone()
                    return self.cache[value[wire.TAG_STORE]]
                if value[wire.TAG_CACHED] not in self.cache:
                    raise JobInputError(f"{wire.CACHE_MISS} {value[wire.TAG_CACHED]}")
                return self.cache[value[wire.TAG_CACHED]]

            call = wire.decode(args["call"], tensor)
            for slot, x in zip(args["out"], args["streams"]):
                slot.copy_(2 * x + call["context"].mean())
            return [{"split_forwards": 0, "forward_ms": 0.0}]
        finally:
            for name in names:
                shm.unlink(name)


def test_the_context_travels_once_and_a_restarted_group_gets_it_again():
    ranks = FakeRanks()
    call = GroupModelCall(MGPUModel(checkpoint="unused", backend=BACKEND_COMFY), run=ranks)
    context = torch.randn(2, 1024, 32)  # 256 KiB: over the inline limit
    x = [torch.randn(2, 128, 3, 2, 3), torch.randn(2, 8, 18, 16)]
    first = call.forward(x, torch.tensor([0.9, 0.9]), context, {}, {})
    second = call.forward(x, torch.tensor([0.7, 0.7]), context.clone(), {}, {})  # equal, another object
    assert wire.TAG_STORE in ranks.calls[0]["call"]["context"]
    assert ranks.calls[1]["call"]["context"] == {
        wire.TAG_CACHED: ranks.calls[0]["call"]["context"][wire.TAG_STORE]
    }
    for out, stream in zip(first + second, x + x):
        assert torch.equal(out, 2 * stream + context.mean())
    ranks.cache.clear()  # what a restarted group holds
    third = call.forward(x, torch.tensor([0.5, 0.5]), context, {}, {})
    assert [wire.TAG_CACHED in c["call"]["context"] for c in ranks.calls[2:]] == [True, False]
    assert torch.equal(third[0], first[0]) and call.calls == 3
    assert len(shm.list_segments(os.getpid())) == 4  # the streams in and out, kept for the next call
    call.release()
    assert shm.list_segments(os.getpid()) == []


def test_stream_segments_are_kept_while_the_shapes_match_and_freed_on_change_and_group_stop():
    ranks = FakeRanks()
    call = GroupModelCall(MGPUModel(checkpoint="unused", backend=BACKEND_COMFY), run=ranks)
    x = [torch.randn(2, 128, 3, 2, 3), torch.randn(2, 8, 18, 16)]

    def segments_of(wired: dict) -> list[str]:
        return [s["__tensor__"] for s in [*wired["streams"], *wired["out"]]]

    first = call.forward(x, torch.tensor([0.9, 0.9]), torch.zeros(2, 4, 32), {}, {})
    second = call.forward([2 * s for s in x], torch.tensor([0.7, 0.7]), torch.zeros(2, 4, 32), {}, {})
    kept = segments_of(ranks.calls[0])
    assert segments_of(ranks.calls[1]) == kept and shm.list_segments(os.getpid()) == sorted(kept)
    # A CPU sampler's outputs are its own: the next call's results do not overwrite them.
    assert [torch.equal(f, 2 * s) for f, s in zip(first, x)] == [True, True]
    assert [torch.equal(o, 4 * s) for o, s in zip(second, x)] == [True, True]
    call.forward([x[0][:1], x[1][:1]], torch.tensor([0.5]), torch.zeros(1, 4, 32), {}, {})
    changed = segments_of(ranks.calls[2])
    assert not set(changed) & set(kept) and shm.list_segments(os.getpid()) == sorted(changed)
    kept_slots.release_all()  # what a stopping worker group calls
    assert shm.list_segments(os.getpid()) == []
    again = call.forward(x, torch.tensor([0.9, 0.9]), torch.zeros(2, 4, 32), {}, {})
    assert [torch.equal(a, f) for a, f in zip(again, first)] == [True, True]
    del call
    gc.collect()  # a collected MODEL leaves nothing behind either
    assert shm.list_segments(os.getpid()) == []


def test_the_cache_is_bounded_and_the_ranks_are_told_what_to_forget():
    ranks = FakeRanks()
    call = GroupModelCall(MGPUModel(checkpoint="unused", backend=BACKEND_COMFY), run=ranks)
    x = torch.randn(1, 128, 3, 2, 3)
    for i in range(CACHE_ENTRIES + 3):
        call.forward(x, torch.tensor([0.5]), torch.full((1, 1024, 32), float(i)), {}, {})
    assert len(ranks.cache) == CACHE_ENTRIES
    # An eviction travels with the call that caused it; the ranks drop before they store.
    assert [len(c["drop"]) for c in ranks.calls] == [0] * CACHE_ENTRIES + [1, 1, 1]
