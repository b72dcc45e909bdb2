"""Pre-faulting shared-memory outputs (NOTE [shm prefault] in workers/strategies/shm_prefault.py): every method leaves
every value as it was, populates the pages it is given, and the Distributed VAE Decode gives the same
bits with each method as without."""

from __future__ import annotations

import dataclasses
import os
import re

import pytest
import torch

from ltx2_mgpu.workers.group.client import output_slot
from ltx2_mgpu.workers.group.manager import MGPUModel
from ltx2_mgpu.workers.strategies import shm_prefault
from ltx2_mgpu.workers.strategies.vae_decode import copy_through
from ltx2_mgpu.workers.strategies.vae_tiles import TileSettings
from ltx2_mgpu.workers.wire import shm
from ltx2_mgpu.workers.wire.vae_outputs import image_shape

METHODS = shm_prefault.PREFAULT_METHODS
# [B * frames, H, W, 3] float32 of ~2.3 MiB: several pages per row band, rows not page aligned.
SHAPE = (5, 96, 400, 3)


def resident_shared_bytes() -> int:
    with open("/proc/self/status") as f:
        return int(re.search(r"RssShmem:\s+(\d+) kB", f.read()).group(1)) * 1024


@pytest.fixture
def segment():
    """A fresh segment from shm.create; its name is gone (and checked gone) after the test."""
    spec, tensor = shm.create(SHAPE, torch.float32)
    yield spec, tensor
    shm.unlink(spec.name)
    assert spec.name not in shm.list_segments()


def pattern(shape) -> torch.Tensor:
    """Integer-valued floats, no two neighbours alike: a changed byte shows."""
    return (torch.arange(torch.Size(shape).numel()) % 65521).float().view(shape)


@pytest.mark.parametrize("method", METHODS)
def test_prefault_keeps_every_value(segment, method):
    spec, tensor = segment
    values = pattern(SHAPE)
    tensor.copy_(values)
    other = shm.attach(spec)  # another mapping of the same segment, as a worker has
    part = other[1:4, 7:90, 33:301, :]
    assert shm_prefault.prefault(other, shm_prefault.byte_ranges(part), method) == method
    assert shm_prefault.prefault(tensor, method=method) == method
    assert torch.equal(tensor, values) and torch.equal(other, values)


def test_auto_picks_the_first_method_that_works_and_populates_pages(segment):
    _, tensor = segment
    before = resident_shared_bytes()
    method = shm_prefault.prefault(tensor)
    assert method == shm_prefault.prefault_method(tensor)
    kernel = tuple(int(n) for n in re.findall(r"\d+", os.uname().release)[:2])
    if kernel >= (5, 14) and method != "madvise":
        pytest.fail(f"MADV_POPULATE_WRITE is in Linux >= 5.14, yet {method!r} ran")
    # Populated in this mapping: the copy then takes no page fault (madvise, touch); fallocate only
    # allocates the file's pages.
    if method == "fallocate":
        assert os.stat(os.path.join(shm.SHM_DIR, segment[0].name)).st_blocks * 512 >= tensor.nbytes
    else:
        assert resident_shared_bytes() - before >= tensor.nbytes - shm_prefault.PAGE_BYTES
    assert int(tensor.count_nonzero()) == 0  # a fresh segment reads zeros, still


@pytest.mark.parametrize("method", ("madvise", "touch"))
def test_only_the_given_ranges_are_populated(segment, method):
    _, tensor = segment
    part = tensor[2:3, 10:20]  # one contiguous run of 10 rows
    before = resident_shared_bytes()
    shm_prefault.prefault(tensor, shm_prefault.byte_ranges(part), method)
    grown = resident_shared_bytes() - before
    assert part.nbytes <= grown <= part.nbytes + 2 * shm_prefault.PAGE_BYTES


def test_byte_ranges_cover_exactly_the_views_bytes():
    base = torch.zeros(SHAPE, dtype=torch.int32)
    base_bytes = base.view(-1).view(torch.uint8)
    for view in (base, base[1:4, 7:90, 33:301, :], base[:, :, 5:6, 1:2], base[2], base[:0]):
        covered = torch.zeros(base.nbytes, dtype=torch.bool)
        for start, end in shm_prefault.byte_ranges(view).tolist():
            covered[start - base.data_ptr() : end - base.data_ptr()] = True
        base.zero_()
        view.fill_(0x01010101)  # every byte nonzero
        assert torch.equal(covered, base_bytes != 0)


def test_range_batches_keep_order_and_bytes():
    ranges = torch.tensor([[0, 10], [20, 20], [100, 125], [200, 203]])
    batches = shm_prefault.range_batches(ranges, 8)
    pieces = torch.cat(batches)
    assert all(int((b[:, 1] - b[:, 0]).sum()) < 16 for b in batches)
    assert pieces.tolist() == sorted(pieces.tolist()) and bool((pieces[:, 1] > pieces[:, 0]).all())
    covered = {x for s, e in pieces.tolist() for x in range(s, e)}
    assert covered == {x for s, e in ranges.tolist() for x in range(s, e)}


def test_touch_rewrites_only_bytes_inside_the_ranges_and_one_in_every_page():
    page = shm_prefault.PAGE_BYTES
    ranges = torch.tensor(
        [[10, 20], [page - 3, 3 * page + 5], [5 * page, 5 * page + 1], [7 * page + 9, 9 * page]]
    )
    addresses = shm_prefault.touch_addresses(ranges)
    assert all(any(s <= a < e for s, e in ranges.tolist()) for a in addresses.tolist())
    assert sorted(set((addresses // page).tolist())) == [0, 1, 2, 3, 5, 7, 8]


def test_settings_say_what_is_allowed(monkeypatch, segment):
    monkeypatch.delenv(shm_prefault.PREFAULT_ENV, raising=False)
    assert shm_prefault.prefault_setting() == "auto"
    for raw, setting in (("0", "off"), ("1", "auto"), ("touch", "touch")):
        monkeypatch.setenv(shm_prefault.PREFAULT_ENV, raw)
        assert shm_prefault.prefault_setting() == setting
    assert (
        shm_prefault.prefault_setting(False) == "off"
        and shm_prefault.prefault_setting("madvise") == "madvise"
    )
    monkeypatch.setenv(shm_prefault.PREFAULT_ENV, "yes")
    with pytest.raises(ValueError, match=r"use 1/auto \(the default\), 0/off"):
        shm_prefault.prefault_setting()
    _, tensor = segment
    outside = torch.tensor([[tensor.data_ptr(), tensor.data_ptr() + tensor.nbytes + 1]])
    with pytest.raises(ValueError, match="outside the tensor's storage"):
        shm_prefault.prefault(tensor, outside)


def test_decode_gives_the_same_bits_with_every_method(manager, tiny_path):
    """2 ranks, 2 x 2 x 2 tiles (shared regions on every axis): each rank pre-faults exactly the
    bytes it writes, and no method changes an output bit."""
    settings = TileSettings(tile_px=128, overlap_px=32, temporal_frames=24, temporal_overlap_frames=8)
    video = torch.randn(1, 128, 4, 4, 6, generator=torch.Generator().manual_seed(3))
    model = MGPUModel.create(tiny_path, devices="cpu:2", dtype="float32")
    images, stats = {}, {}
    for setting in ("off", *METHODS, "auto"):
        out = output_slot(image_shape(tuple(video.shape)), torch.float32)
        args = {"video": video, "audio": None, "tiles": dataclasses.asdict(settings), "out_image": out}
        stats[setting] = manager.run(model, "vae_decode", {**args, "out_audio": None, "prefault": setting})
        images[setting] = out.tensor.clone()
    for setting, image in images.items():
        assert torch.equal(image, images["off"]), f"pre-faulting with {setting!r} changed the frames"
    assert [r["prefault_method"] for r in stats["off"]] == ["off", "off"]
    for method in METHODS:
        assert [r["prefault_method"] for r in stats[method]] == [method, method]
    # touch finishes before the first write, so it covered every byte the rank then wrote
    assert [r["prefault_bytes"] for r in stats["touch"]] == [r["bytes_written"] for r in stats["touch"]]
    assert sum(r["bytes_written"] for r in stats["touch"]) == images["off"].nbytes
    assert {r["prefault_method"] for r in stats["auto"]} <= set(METHODS)


def test_device_writes_go_through_the_staging_buffer_unchanged(segment):
    """The device-to-host path of the decode's writes (copy_through), with a CPU source: every value
    lands where the direct copy puts it, whatever the chunking."""
    _, tensor = segment
    image5 = tensor.view(1, *SHAPE)
    src = pattern((1, 3, 50, 200, 3)) + 0.5
    for staging_frames in (1, 2.5, 3, 8):
        tensor.zero_()
        staging = torch.empty(int(staging_frames * src[0, 0].numel()))
        copy_through(image5[:, 1:4, 20:70, 100:300, :], src, staging)
        expected = torch.zeros(1, *SHAPE)
        expected[:, 1:4, 20:70, 100:300, :] = src
        assert torch.equal(image5, expected)
