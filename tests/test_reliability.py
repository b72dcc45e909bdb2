"""Faults, bad input and load: nothing lost, nothing hangs, nothing left open (issue 10)."""

from __future__ import annotations

import os
import pickle
import re
import sys
import time
import types

import psutil
import pytest
import torch
from safetensors.torch import load_file, save_file

from conftest import assert_no_leaks, tiny_conditioning, worker_children
from ltx2_mgpu.workers.group import client
from ltx2_mgpu.workers.group.manager import MGPUModel
from ltx2_mgpu.workers.wire import errors, shm
from ltx2_mgpu.workers.wire.model_files import read_checkpoint_config

# Bounds the fault tests run with (production defaults: 30 s heartbeat, 10 s grace; see config.py).
HEARTBEAT_S, GRACE_S = 2.0, 1.0


@pytest.fixture
def quick_faults(monkeypatch):
    monkeypatch.setattr(client, "HEARTBEAT_TIMEOUT_S", HEARTBEAT_S)
    monkeypatch.setattr(client, "ERROR_GRACE_S", GRACE_S)


FAULTS = [
    ("exit_one", errors.WorkerDied, r"worker rank 1 \(cpu\) died during the job with exit code 3"),
    ("stop_one", errors.WorkerHung, r"worker rank 1 \(cpu\) stopped responding"),
    ("raise_one", errors.GroupOutOfStep, r"worker rank 1 failed: RuntimeError: raised on purpose on rank 1"),
    ("oom_one", errors.GroupOutOfStep, r"worker rank 1 failed: OutOfMemoryError: simulated out of memory"),
]


@pytest.mark.parametrize(("kind", "error", "message"), FAULTS, ids=[f[0] for f in FAULTS])
def test_fault_ends_job_names_rank_cleans_up_and_next_run_succeeds(
    manager, tiny_path, quick_faults, kind, error, message
):
    model = MGPUModel.create(tiny_path, devices="cpu:2", dtype="float32")
    manager.acquire(model)
    old_pids = manager.group.pids
    started = time.monotonic()
    with pytest.raises(error, match=message) as info:
        manager.run(model, "fault", {"kind": kind, "rank": 1})
    elapsed = time.monotonic() - started
    assert info.value.rank == 1
    # Bounded: detection (heartbeat or grace) plus teardown.
    assert elapsed < HEARTBEAT_S + GRACE_S + 5, elapsed
    assert manager.group is None
    assert not [
        p for p in old_pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
    ]
    assert shm.list_segments(os.getpid()) == []
    assert [r["rank"] for r in manager.run(model, "ping", {})] == [0, 1]  # a fresh group, model reloaded
    print(f"\n[fault] {kind}: reported after {elapsed:.2f} s")


def test_cancel_pressed_repeatedly_then_a_normal_run(manager, tiny_path):
    model = MGPUModel.create(tiny_path, devices="cpu:2", dtype="float32")
    manager.acquire(model)
    for _ in range(3):
        with pytest.raises(errors.JobCancelled):
            manager.run(model, "steps", {"n": 1000, "step_s": 0.01}, should_cancel=lambda: True)
    assert manager.group.is_alive
    assert manager.run(model, "steps", {"n": 2})[0]["steps"] == 2


def test_cancel_while_loading_stops_the_workers_and_next_run_works(manager, tiny_path):
    model = MGPUModel.create(tiny_path, devices="cpu:2", dtype="float32")
    with pytest.raises(errors.LoadCancelled, match="while the workers were loading"):
        manager.acquire(model, should_cancel=lambda: True)
    assert manager.group is None and worker_children() == []
    assert [r["rank"] for r in manager.run(model, "ping", {})] == [0, 1]


def _sample(manager, model, video, positive, negative):
    from ltx2_mgpu.workers.group.client import output_slot

    out = output_slot(video.shape, torch.float32)
    args = {
        "video": video,
        "audio": None,
        "video_mask": None,
        "audio_mask": None,
        "sigmas": torch.tensor([1.0, 0.7, 0.0]),
        "positive": {"tensor": positive[0][0], "unprocessed": True},
        "negative": {"tensor": negative[0][0], "unprocessed": True},
        "frame_rate": 25.0,
        "sampler": "euler",
        "cfg_video": 3.0,
        "cfg_audio": 3.0,
        "seed": 7,
    }
    manager.run(model, "sample", {**args, "out_video": out, "out_audio": None})
    return out.tensor.clone()


def test_back_to_back_prompts_with_different_checkpoints_reload_and_stay_correct(manager, tiny, tmp_path):
    from ltx2_mgpu.workers.embedded.tiny_model import make_tiny
    from ltx2_mgpu.workers.engine.ltxcore.reference import load_in_process, relative_error, sample_in_process

    other = make_tiny(tmp_path / "other", seed=1).checkpoint
    video = torch.zeros(1, 128, 2, 2, 3)
    pos, neg = tiny_conditioning(7, 64, seed=1), tiny_conditioning(5, 64, seed=2)
    sigmas = torch.tensor([1.0, 0.7, 0.0])
    results = {}
    for path in (tiny.checkpoint, other, tiny.checkpoint):
        model = MGPUModel.create(path, devices="cpu:2", dtype="float32")
        got = _sample(manager, model, video, pos, neg)
        want = sample_in_process(
            load_in_process(path), video, None, None, pos, neg, sigmas, "euler", 3.0, seed=7
        )[0]
        assert relative_error(got, want) <= 1e-5
        results.setdefault(str(path), []).append(got)
    assert torch.equal(*results[str(tiny.checkpoint)])
    assert not torch.allclose(results[str(tiny.checkpoint)][0], results[str(other)][0])


def _rss(pid: int) -> int:
    return psutil.Process(pid).memory_info().rss


def test_hundred_small_runs_keep_memory_files_and_segments_flat(manager, tiny_path):
    model = MGPUModel.create(tiny_path, devices="cpu:2", dtype="float32")
    video = torch.zeros(1, 128, 2, 2, 3)
    pos, neg = tiny_conditioning(7, 64, seed=1), tiny_conditioning(5, 64, seed=2)
    for _ in range(10):  # warm up allocator caches
        _sample(manager, model, video, pos, neg)
    pids = manager.group.pids
    before = {"ui": _rss(os.getpid()), **{f"rank{i}": _rss(p) for i, p in enumerate(pids)}}
    fds_before = len(os.listdir("/proc/self/fd"))
    for _ in range(100):
        _sample(manager, model, video, pos, neg)
    after = {"ui": _rss(os.getpid()), **{f"rank{i}": _rss(p) for i, p in enumerate(pids)}}
    growth_mb = {k: (after[k] - before[k]) / 2**20 for k in before}
    print(
        f"\n[load] RSS growth over 100 runs (MB): {', '.join(f'{k} {v:+.1f}' for k, v in growth_mb.items())}"
    )
    assert all(v < 20 for v in growth_mb.values()), growth_mb
    assert len(os.listdir("/proc/self/fd")) <= fds_before
    assert shm.list_segments(os.getpid()) == [manager.group._control_name]  # only the control block


class _Bomb:
    """Unpickling this would create a file: a loader that unpickles the checkpoint would trip it."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_bad_checkpoints_are_refused_with_clear_messages(manager, tiny_path, tmp_path):
    marker = tmp_path / "unpickled"
    evil = tmp_path / "evil.safetensors"
    evil.write_bytes(pickle.dumps({"state_dict": _Bomb(str(marker))}))
    with pytest.raises(ValueError, match="safetensors"):
        manager.acquire(MGPUModel.create(evil, devices="cpu:2"))
    assert not marker.exists(), "the file was unpickled"
    tensors = load_file(str(tiny_path))
    metadata = {"config": __import__("json").dumps(read_checkpoint_config(tiny_path))}
    missing = dict(tensors)
    dropped = next(
        k for k in missing if k.startswith("model.diffusion_model.transformer_blocks.0.attn1.to_q.weight")
    )
    del missing[dropped]
    save_file(missing, str(tmp_path / "missing.safetensors"), metadata=metadata)
    with pytest.raises(ValueError, match=re.escape("transformer_blocks.0.attn1.to_q.weight")):
        manager.acquire(MGPUModel.create(tmp_path / "missing.safetensors", devices="cpu:2", dtype="float32"))
    misshaped = dict(tensors)
    misshaped[dropped] = torch.zeros(3, 3, dtype=tensors[dropped].dtype)
    save_file(misshaped, str(tmp_path / "misshaped.safetensors"), metadata=metadata)
    with pytest.raises(ValueError, match=re.escape("transformer_blocks.0.attn1.to_q.weight")):
        manager.acquire(
            MGPUModel.create(tmp_path / "misshaped.safetensors", devices="cpu:2", dtype="float32")
        )
    good = MGPUModel.create(tiny_path, devices="cpu:2", dtype="float32")
    assert [r["rank"] for r in manager.run(good, "ping", {})] == [0, 1]


def test_model_names_outside_the_model_folders_are_refused(monkeypatch, tmp_path, tiny_path):
    from ltx2_mgpu.nodes import comfy

    fake = types.ModuleType("folder_paths")
    fake.get_full_path = lambda folder, name: str(tiny_path) if name == tiny_path.name else None
    monkeypatch.setitem(sys.modules, "folder_paths", fake)
    monkeypatch.setitem(sys.modules, "comfy.model_management", types.ModuleType("comfy.model_management"))
    assert comfy.full_path(("checkpoints",), tiny_path.name) == tiny_path
    for name in ("../../etc/passwd", "/etc/passwd", "sub/../../x.safetensors"):
        with pytest.raises(ValueError, match="outside ComfyUI's model folders"):
            comfy.full_path(("checkpoints",), name)
    with pytest.raises(ValueError, match="is not in ComfyUI's checkpoints folders"):
        comfy.full_path(("checkpoints",), "nope.safetensors")
    assert_no_leaks()


def test_more_workers_than_attention_heads_is_refused_before_any_start(manager, tiny_path):
    # The tiny model has 8 heads per attention; 9 CPU workers cannot split them.
    with pytest.raises(
        ValueError, match=r"9 workers cannot share this model's 8 attention heads.*at most 8 GPUs"
    ):
        manager.acquire(MGPUModel.create(tiny_path, devices="cpu:9"))
    assert manager.group is None and worker_children() == []
