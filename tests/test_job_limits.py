"""Inputs that used to take the group down or run the machine out of memory are refused in the node, in
under a second, before any allocation (issue 40), and shared memory is never left behind by a failed
allocation. CPU workers, no ComfyUI.

- shm.create: a failure once the segment exists (a size it cannot map) leaves no /dev/shm segment;
- a 0-frame latent: refused naming the axis, nothing allocated, no worker started;
- memory (wire/job_memory.py): an 8192 x 8192 x 9 encode, an oversized decode, and 200,000-character
  and 1 MB prompts into MGPU Text Encode are refused naming the input to lower; the group that ran a
  short prompt before keeps its workers and runs it again after;
- the checks' own arithmetic: what does not fit shared memory, the host (with every CPU worker's part)
  or a GPU (with the weights it holds) is refused with the figures.
"""

from __future__ import annotations

import os
import time

import pytest
import torch

from ltx2_mgpu.nodes.text_encode import encode_prompt
from ltx2_mgpu.nodes.vae_decode import decode_latent
from ltx2_mgpu.nodes.vae_encode import encode_pixels
from ltx2_mgpu.workers.embedded.tiny_gemma import make_tiny_gemma
from ltx2_mgpu.workers.group import preflight
from ltx2_mgpu.workers.group.manager import MGPUModel, get_manager
from ltx2_mgpu.workers.wire import shm
from ltx2_mgpu.workers.wire.job_memory import Capacity, JobNeed, check_need

GIB = 2**30
REFUSAL_S = 1.0
# A machine to refuse against, whatever the test machine has: 16 GiB available, 8 GiB of /dev/shm.
HOST_BYTES, SHM_BYTES = 16 * GIB, 8 * GIB
SHORT = "A red fox runs through fresh snow at dawn."


@pytest.fixture
def small_machine(monkeypatch):
    monkeypatch.setattr(preflight, "available_host_bytes", lambda: HOST_BYTES)
    monkeypatch.setattr(preflight, "shm_free_bytes", lambda: SHM_BYTES)


def refused_quickly(call, match: str) -> float:
    t0 = time.monotonic()
    with pytest.raises(ValueError, match=match):
        call()
    seconds = time.monotonic() - t0
    assert seconds < REFUSAL_S, f"refused after {seconds:.2f} s"
    return seconds


# ----- shared memory ----------------------------------------------------------------------------


def test_a_failed_create_leaves_no_segment(monkeypatch):
    before = shm.list_segments(os.getpid())
    with pytest.raises(ValueError, match=r"shape \(-7, 64, 64, 3\): a size is negative"):
        shm.create((-7, 64, 64, 3), torch.float32)

    def broken(*_args):
        raise RuntimeError("mapping failed on purpose")

    monkeypatch.setattr(shm, "_as_tensor", broken)
    with pytest.raises(RuntimeError, match="on purpose"):
        shm.create((0, 3, 64, 64), torch.float32)
    assert shm.list_segments(os.getpid()) == before


def test_a_zero_frame_latent_is_refused_before_anything_is_allocated(tiny):
    model = MGPUModel.create(tiny.checkpoint, devices="cpu:2", dtype="float32")
    for mode in ("exact", "tiled"):
        refused_quickly(
            lambda mode=mode: decode_latent(model, {"samples": torch.zeros(1, 128, 0, 2, 2)}, mode=mode),
            r"shape \(1, 128, 0, 2, 2\): no frames\. Connect a latent with at least one frame",
        )
    assert get_manager().group is None
    assert shm.list_segments(os.getpid()) == []


# ----- memory -----------------------------------------------------------------------------------


def comfy_model(checkpoint, devices: str = "cpu:2") -> MGPUModel:
    """A recipe on the comfy backend (the checks read only its devices, dtype and files)."""
    return MGPUModel.create(checkpoint, devices=devices, dtype="float32", backend="comfy")


def test_an_8k_encode_is_refused_naming_what_to_lower(tiny, small_machine):
    """9 frames of 8192 x 8192 (issue 40: it ran on to 17.6 GB): 7.2 GiB of frames in shared memory and
    tens of GiB of activations per CPU worker. The IMAGE is a broadcast view: nothing is allocated."""
    pixels = torch.zeros(1, 1, 1, 3).expand(9, 8192, 8192, 3)
    seconds = refused_quickly(
        lambda: encode_pixels(comfy_model(tiny.checkpoint), pixels),
        r"Distributed VAE Encode of 9 frames of 8192 x 8192 px needs about \d+\.\d GiB of host memory .* "
        r"Lower the frame count or the resolution of the IMAGE",
    )
    print(f"\n[limits] 8192 x 8192 x 9 encode refused in {seconds * 1000:.1f} ms")
    assert get_manager().group is None and shm.list_segments(os.getpid()) == []


def test_a_decode_larger_than_shared_memory_is_refused(tiny, small_machine):
    """257 frames of 1536 x 2048: 9 GiB of IMAGE against 8 GiB of /dev/shm."""
    latent = {"samples": torch.zeros(1, 128, 33, 48, 64)}
    refused_quickly(
        lambda: decode_latent(comfy_model(tiny.checkpoint), latent),
        r"Distributed VAE Decode \(exact\) of 1 x 257 frames of 2048 x 1536 px needs 9\.\d GiB of shared "
        r"memory \(/dev/shm\) but 8\.0 GiB is free\. Lower the frame count or the resolution",
    )
    assert shm.list_segments(os.getpid()) == []


@pytest.fixture(scope="module")
def gemma(tiny):
    return make_tiny_gemma(tiny.checkpoint.parent)


def test_long_prompts_are_refused_and_the_group_keeps_its_workers(tiny, gemma, manager):
    """200,000 characters (issue 40: a 40 GB allocation on rank 0 took the group down) and 1 MB: the
    tiny Gemma's tokenizer gives a token a byte, so [L, L] masks and scores of 10^10-10^12 bytes."""
    model = MGPUModel.create(tiny.checkpoint, devices="cpu:2", dtype="float32")
    (short,) = encode_prompt(model, str(gemma), SHORT, "layers")
    pids, segments = manager.group.pids, shm.list_segments(os.getpid())
    for chars in (200_000, 1_000_000):
        text = ("Slow dolly shot along a misty river at sunrise; " * (chars // 48 + 1))[:chars]
        seconds = refused_quickly(
            lambda text=text: encode_prompt(model, str(gemma), text, "layers"),
            r"MGPU Text Encode of a prompt of (at least )?[\d,]+ tokens needs about [\d.]+ GiB of host memory .* "
            r"Lower the prompt's length",
        )
        print(f"\n[limits] a {chars:,}-character prompt refused in {seconds * 1000:.0f} ms")
    assert manager.group.pids == pids and shm.list_segments(os.getpid()) == segments
    (again,) = encode_prompt(model, str(gemma), SHORT, "layers")
    assert torch.equal(again[0][0], short[0][0])


# ----- the checks' arithmetic -------------------------------------------------------------------


def capacity(gpus: tuple[int | None, ...], host: int = HOST_BYTES, shm_free: int = SHM_BYTES) -> Capacity:
    devices = tuple("cpu" if g is None else f"cuda:{i}" for i, g in enumerate(gpus))
    return Capacity(shm_free, host, devices, gpus)


def test_each_limit_names_its_figures():
    need = JobNeed("the job", "the size", shared_bytes=2 * GIB, worker_bytes=4 * GIB, resident_bytes=60 * GIB)
    check_need(need, capacity((80 * GIB, 80 * GIB)))  # 64 GiB on each GPU, 2 GiB shared: fits
    with pytest.raises(
        ValueError, match=r"needs 2\.0 GiB of shared memory \(/dev/shm\) but 1\.0 GiB is free"
    ):
        check_need(need, capacity((80 * GIB,), shm_free=GIB))
    with pytest.raises(
        ValueError, match=r"needs about 64\.0 GiB on cuda:1 \(with 60\.0 GiB of weights\) but it has 48\.0"
    ):
        check_need(need, capacity((80 * GIB, 48 * GIB)))
    # CPU workers: each one's part counts against the host, with the shared memory.
    with pytest.raises(
        ValueError, match=r"about 22\.0 GiB of host memory \(2\.0 GiB shared \+ 4\.0 GiB in each of 5"
    ):
        check_need(need, capacity((None,) * 5))
    check_need(need, capacity((None,) * 4))  # 18 GiB: within the estimate's margin of 16 GiB


def test_no_limit_is_checked_against_an_unknown_host():
    need = JobNeed("the job", "the size", shared_bytes=GIB, worker_bytes=10**15)
    check_need(need, Capacity(2 * GIB, None, ("cpu",), (None,)))
