"""Shared memory segments and the control protocol (no worker processes)."""

from __future__ import annotations

import os
import pickle
import stat
import subprocess
import sys

import pytest
import torch

from ltx2_mgpu.workers.wire import protocol, shm


def test_segment_round_trip_owner_only_and_unlink_keeps_mapping():
    spec, t = shm.create((3, 5), torch.bfloat16)
    try:
        mode = os.stat(os.path.join(shm.SHM_DIR, spec.name)).st_mode
        assert stat.S_IMODE(mode) == 0o600
        t.copy_(torch.arange(15, dtype=torch.bfloat16).view(3, 5))
        other = shm.attach(spec)
        assert torch.equal(other, t)
        other[0, 0] = 42
        assert t[0, 0].item() == 42
    finally:
        shm.unlink(spec.name)
    assert spec.name not in shm.list_segments()
    t[1, 1] = 7  # the mapping outlives the name
    assert t[1, 1].item() == 7


def test_segment_names_cannot_escape_shm_dir():
    for bad in ("../etc/passwd", "ltx2mgpu-1-zz", "/dev/shm/ltx2mgpu-1-ab", "other-1-ab"):
        with pytest.raises(ValueError, match="not a segment name"):
            shm.attach(shm.TensorSpec(bad, (1,), "float32"))


def test_sweep_removes_segments_of_dead_owners_only():
    proc = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
    )
    dead_pid = int(proc.stdout)
    stale = f"{shm.SHM_PREFIX}-{dead_pid}-abcdef01"
    fd = os.open(os.path.join(shm.SHM_DIR, stale), os.O_CREAT | os.O_RDWR, 0o600)
    os.close(fd)
    spec, _ = shm.create((1,), torch.float32)
    try:
        removed = shm.sweep_stale_segments()
        assert stale in removed
        assert spec.name in shm.list_segments(os.getpid())
    finally:
        shm.unlink(spec.name)
        shm.unlink(stale)


def test_empty_tensor_travels():
    spec, t = shm.create((0, 4), torch.float32)
    shm.unlink(spec.name)
    assert t.shape == (0, 4)


def test_messages_round_trip_and_refuse_objects():
    msg = {"kind": "request", "job_id": 3, "op": "x", "args": {"a": [1, 2.5, "s", None, b"b", (1, 2)]}}
    assert protocol.decode(protocol.encode(msg)) == msg
    evil = pickle.dumps({"kind": "request", "args": os.system})
    with pytest.raises(pickle.UnpicklingError, match="may not reference"):
        protocol.decode(evil)
    with pytest.raises(pickle.UnpicklingError, match="must be a dict"):
        protocol.decode(pickle.dumps([1, 2]))


def test_tensors_in_args_go_through_shared_memory():
    names: list[str] = []
    x = torch.arange(6.0).view(2, 3)
    wire = protocol.share_tensors({"x": x, "nested": [x[0]]}, names)
    try:
        assert protocol.is_tensor_spec(wire["x"]) and len(names) == 2
        back = protocol.attach_tensors(wire)
        assert torch.equal(back["x"], x) and torch.equal(back["nested"][0], x[0])
    finally:
        for name in names:
            shm.unlink(name)


def test_a_kept_segment_is_mapped_once_per_worker():
    """Kept slots (the owner reuses them call after call) keep their worker-side mapping: the same
    memory, no new map or page faults per job; a shape change maps again; old mappings are let go."""
    names = []
    try:
        spec, owner = shm.create((4, 3), torch.float32)
        names.append(spec.name)
        wire = {**spec.to_wire(), protocol.KEPT: True}
        first = protocol.attach_tensors({"x": wire})["x"]
        again = protocol.attach_tensors({"x": wire})["x"]
        assert again is first
        owner.fill_(2.0)
        assert torch.equal(again, owner)  # the same shared memory, not a copy
        plain = protocol.attach_tensors(spec.to_wire())
        assert plain is not first and torch.equal(plain, owner)  # not kept: mapped per job, as before
        for _ in range(protocol.KEPT_MAPPINGS):
            other, _ = shm.create((1,), torch.float32)
            names.append(other.name)
            protocol.attach_tensors({**other.to_wire(), protocol.KEPT: True})
        assert spec.name not in protocol._kept  # least recently used: let go
    finally:
        for name in names:
            shm.unlink(name)
