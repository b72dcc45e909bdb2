"""LTX2_MGPU_GPU_MEMORY_GIB, the most GPU memory each worker may use (NOTE [gpu memory cap] in
workers/wire/gpu_memory.py): the value read or refused, the pre-flight planning with the cap instead of
the card, the text encoder's placement and ComfyUI's model management in a capped worker seeing the
cap. CPU with the CUDA queries stood in; GPU (marked): a capped process cannot allocate past it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest
import torch

from ltx2_mgpu.workers.wire import gpu_memory
from ltx2_mgpu.workers.wire.gpu_memory import GPU_MEMORY_ENV, cap_bytes

GIB = 2**30


def test_the_cap_is_read_in_gib_and_other_values_are_refused_naming_the_variable():
    assert cap_bytes({}) is None
    assert cap_bytes({GPU_MEMORY_ENV: ""}) is None
    assert cap_bytes({GPU_MEMORY_ENV: "16"}) == 16 * GIB
    assert cap_bytes({GPU_MEMORY_ENV: " 7.5 "}) == int(7.5 * GIB)
    for bad in ("16GB", "0", "-2", "nan", "inf"):
        with pytest.raises(ValueError, match=rf"^{GPU_MEMORY_ENV}='{bad}' is not a number of GiB; .*=16\)"):
            cap_bytes({GPU_MEMORY_ENV: bad})


def card(total_gib: float):
    return lambda index: SimpleNamespace(total_memory=int(total_gib * GIB), name="stand-in")


def test_the_preflight_plans_with_the_cap_where_it_is_smaller_than_the_card(monkeypatch):
    from ltx2_mgpu.workers.group.preflight import gpu_capacities

    monkeypatch.setattr(torch.cuda, "get_device_properties", card(80))
    monkeypatch.setenv(GPU_MEMORY_ENV, "16")
    assert gpu_capacities(["cuda:0", "cuda:1", "cpu"]) == [16 * GIB, 16 * GIB, None]
    monkeypatch.setenv(GPU_MEMORY_ENV, "100")
    assert gpu_capacities(["cuda:0"]) == [80 * GIB]
    monkeypatch.delenv(GPU_MEMORY_ENV)
    assert gpu_capacities(["cuda:0"]) == [80 * GIB]


def test_a_bad_cap_is_refused_by_the_loader_before_any_worker_starts(tiny, monkeypatch):
    from conftest import worker_children
    from ltx2_mgpu.nodes.loader import load_model

    monkeypatch.setenv(GPU_MEMORY_ENV, "16GB")
    with pytest.raises(ValueError, match=rf"{GPU_MEMORY_ENV}='16GB' is not a number of GiB"):
        load_model(str(tiny.checkpoint), "cpu:2", "float32")
    assert worker_children() == []


@pytest.fixture
def capped_gpu(monkeypatch):
    """A stand-in 80 GiB cuda:0 of which this process holds 6 GiB and may hold 16 GiB (its fraction)."""
    monkeypatch.setattr(torch.cuda, "get_device_properties", card(80))
    monkeypatch.setattr(torch.cuda, "get_per_process_memory_fraction", lambda device: 0.2, raising=False)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: 6 * GIB)
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: 7 * GIB)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (60 * GIB, 80 * GIB))
    return torch.device("cuda:0")


def test_a_capped_worker_may_allocate_what_its_fraction_leaves(capped_gpu):
    assert gpu_memory.process_limit_bytes(capped_gpu) == 16 * GIB
    assert gpu_memory.allocatable_bytes(capped_gpu) == 10 * GIB  # not the card's 60 + 1 GiB


def test_the_text_encoders_placement_gives_a_capped_rank_no_more_than_its_cap(capped_gpu):
    from ltx2_mgpu.workers.text.placement import free_bytes

    job = SimpleNamespace(device=capped_gpu, world_size=1, rank=0, control_group=None)
    assert free_bytes(job) == [("cuda:0", 10 * GIB)]


def test_comfyuis_model_management_in_a_capped_worker_sees_the_cap(capped_gpu, monkeypatch):
    from ltx2_mgpu.workers.engine.comfy.bootstrap import cap_model_management

    def get_free_memory(dev=None, torch_free_too=False):  # ComfyUI's: the card's free + torch's cache
        return (61 * GIB, GIB) if torch_free_too else 61 * GIB

    mm = SimpleNamespace(
        get_free_memory=get_free_memory, get_torch_device=lambda: capped_gpu, total_vram=81920.0
    )
    cap_model_management(mm, capped_gpu)
    assert mm.get_free_memory() == 10 * GIB
    assert mm.get_free_memory(capped_gpu, torch_free_too=True) == (10 * GIB, GIB)
    assert mm.get_free_memory(torch.device("cuda:1")) == 61 * GIB  # another card: ComfyUI's figure
    assert mm.get_free_memory(torch.device("cpu")) == 61 * GIB
    assert mm.total_vram == 16 * 1024

    uncapped = SimpleNamespace(
        get_free_memory=get_free_memory, get_torch_device=lambda: capped_gpu, total_vram=1.0
    )
    monkeypatch.setattr(torch.cuda, "get_per_process_memory_fraction", lambda device: 1.0)
    cap_model_management(uncapped, capped_gpu)
    assert uncapped.get_free_memory is get_free_memory and uncapped.total_vram == 1.0


CAPPED_PROCESS = textwrap.dedent(
    """
    import torch
    from ltx2_mgpu.workers.wire import gpu_memory

    device = torch.device("cuda:0")
    torch.cuda.set_device(device)
    held = gpu_memory.apply_cap(device)
    assert held == 2 * 2**30, held
    assert gpu_memory.allocatable_bytes(device) <= held
    keep = torch.empty(2**30, dtype=torch.uint8, device=device)  # within the cap
    try:
        torch.empty(2 * 2**30, dtype=torch.uint8, device=device)
    except torch.OutOfMemoryError:
        print("refused past the cap")
    """
)


@pytest.mark.gpu
def test_a_capped_gpu_process_cannot_allocate_past_the_cap():
    done = subprocess.run(
        [sys.executable, "-c", CAPPED_PROCESS],
        env={**os.environ, GPU_MEMORY_ENV: "2"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "refused past the cap" in done.stdout
