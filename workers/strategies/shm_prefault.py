"""Pre-faulting the pages of a shared-memory segment before a rank writes them.

NOTE [shm prefault]: the first write to each page of a fresh segment faults: tmpfs allocates and
zeroes a page and maps it (H200 host: a memcpy into a fresh segment ran at 6.9 GB/s, into touched
pages at 55 GB/s; bench/results/vae_h200x2.json). `prefault` does that work ahead of the writes, on
a thread that overlaps the work producing them. The pages must be populated in the mapping that writes: pages populated
through another process's mapping still take a minor fault each (CI machine, 512 MiB: 1.5 GB/s fresh,
9.0 GB/s populated in the writer's mapping, 2.8 GB/s populated in another mapping, 2.6 GB/s after
fallocate), so each rank pre-faults the bytes it will write, in its own mapping. Methods, the first
that works:
  "madvise": madvise(MADV_POPULATE_WRITE), Linux >= 5.14: allocates and maps the pages; never
      changes a value, safe while anyone writes anywhere;
  "fallocate": fallocate(2) on the segment's file: allocates the pages, maps none; same safety;
  "touch": rewrites one byte per page with its own value: allocates and maps, but the caller must be
      the only writer of those bytes until it returns.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import functools
import mmap
import os
import threading

import torch

from ..wire.shm import _NAME_RE, SHM_DIR

PAGE_BYTES = mmap.PAGESIZE
# include/uapi/asm-generic/mman-common.h (Linux 5.14); older kernels answer EINVAL.
MADV_POPULATE_WRITE = 23
# NOTE [shm prefault]: in the order tried; the first two may run while others write the same pages.
PREFAULT_METHODS = ("madvise", "fallocate", "touch")
CONCURRENT_PREFAULT_METHODS = frozenset({"madvise", "fallocate"})
# "0" turns pre-faulting off (writes then pay their page faults), a method name forces that method;
# a job's "prefault" argument overrides it (bench/bench_vae.py measures on and off in one run).
PREFAULT_ENV = "LTX2_MGPU_PREFAULT"


def prefault_setting(value: str | bool | None = None) -> str:
    """ "auto" (pre-fault with the first method that works), "off", or one of PREFAULT_METHODS
    (forced: tests run every fallback), from a job's argument (True is "auto", False "off") or, when
    None, from PREFAULT_ENV (unset or "1": "auto"; "0": "off")."""
    if value is None:
        value = os.environ.get(PREFAULT_ENV, "auto").strip() or "auto"
        value = {"1": "auto", "0": "off"}.get(value, value)
    elif isinstance(value, bool):
        value = "auto" if value else "off"
    if value not in ("auto", "off", *PREFAULT_METHODS):
        raise ValueError(
            f"pre-fault setting {value!r} ({PREFAULT_ENV} or the job's 'prefault'): use 1/auto (the "
            f"default), 0/off, or force one of {PREFAULT_METHODS}"
        )
    return value


def prefault_in_background(tensors: list[torch.Tensor]) -> threading.Thread | None:
    """Pre-fault `tensors` (views of shared segments this rank alone writes, and not before the thread
    is joined) on a thread, with the PREFAULT_ENV setting; None when that is "off"."""
    setting = prefault_setting()
    if setting == "off":
        return None
    method = None if setting == "auto" else setting
    # Nothing else writes these bytes until the join, so any method (even "touch") is safe.
    thread = threading.Thread(target=lambda: [prefault(t, method=method) for t in tensors], daemon=True)
    thread.start()
    return thread


def byte_ranges(view: torch.Tensor) -> torch.Tensor:
    """int64 [n, 2]: the addresses [start, end) of the contiguous byte runs of a CPU view, in the
    order of its outer indices (ascending for the views of a contiguous tensor)."""
    if view.numel() == 0:
        return torch.empty(0, 2, dtype=torch.int64)
    dims = [(size, stride) for size, stride in zip(view.shape, view.stride()) if size != 1]
    run = 1  # elements in one contiguous run: the innermost dims laid out back to back
    while dims and dims[-1][1] == run:
        run *= dims.pop()[0]
    starts = torch.zeros(1, dtype=torch.int64)
    for size, stride in dims:
        starts = (starts[:, None] + torch.arange(size, dtype=torch.int64) * stride).reshape(-1)
    starts = view.data_ptr() + starts * view.element_size()
    return torch.stack([starts, starts + run * view.element_size()], dim=1)


def range_batches(ranges: torch.Tensor, max_bytes: int) -> list[torch.Tensor]:
    """`ranges` (int64 [n, 2]) in order, cut into consecutive batches of under 2 * `max_bytes` each
    (ranges longer than `max_bytes` are split), so a caller can stop between batches."""
    lengths = ranges[:, 1] - ranges[:, 0]
    pieces = (lengths + max_bytes - 1) // max_bytes
    keep = pieces > 0
    ranges, lengths, pieces = ranges[keep], lengths[keep], pieces[keep]
    within = torch.arange(int(pieces.sum())) - torch.repeat_interleave(
        torch.cumsum(pieces, 0) - pieces, pieces
    )
    starts = torch.repeat_interleave(ranges[:, 0], pieces) + within * max_bytes
    ends = torch.minimum(starts + max_bytes, torch.repeat_interleave(ranges[:, 1], pieces))
    batch = (torch.cumsum(ends - starts, 0) - 1) // max_bytes
    split = torch.stack([starts, ends], dim=1)
    return list(torch.split(split, torch.bincount(batch).tolist())) if len(split) else []


def prefault_method(tensor: torch.Tensor) -> str:
    """The first method of PREFAULT_METHODS that works on `tensor`'s mapping, proven on its first page
    (populating a page never changes a value). Cheap: one or two system calls."""
    base = tensor.untyped_storage().data_ptr()
    probe = torch.tensor([[base, base + 1]], dtype=torch.int64)
    for method in PREFAULT_METHODS[:-1]:
        if _PREFAULTERS[method](tensor, probe):
            return method
    return PREFAULT_METHODS[-1]


def prefault(tensor: torch.Tensor, ranges: torch.Tensor | None = None, method: str | None = None) -> str:
    """Populate the pages under `ranges` (int64 [n, 2] addresses from `byte_ranges`; default: all of
    `tensor`) inside `tensor`'s storage, so that writing there takes no page fault. Never changes a
    value; with "touch" the caller must be the only writer of `ranges` until this returns. `method`:
    one of PREFAULT_METHODS (None: the first that works). Returns the method that ran ("none" when
    there was nothing to do). Blocking; releases the GIL in its system calls."""
    if ranges is None:
        ranges = byte_ranges(tensor)
    ranges = ranges[ranges[:, 1] > ranges[:, 0]]
    if not len(ranges):
        return "none"
    storage = tensor.untyped_storage()
    lo, hi = storage.data_ptr(), storage.data_ptr() + storage.nbytes()
    if int(ranges[:, 0].min()) < lo or int(ranges[:, 1].max()) > hi:
        raise ValueError(f"byte ranges reach outside the tensor's storage [{lo:#x}, {hi:#x})")
    if method is not None and method not in PREFAULT_METHODS:
        raise ValueError(f"prefault method {method!r}: use one of {PREFAULT_METHODS} or None")
    for candidate in PREFAULT_METHODS if method is None else (method,):
        if _PREFAULTERS[candidate](tensor, ranges):
            return candidate
    raise OSError(f"prefault method {method!r} is not available for this mapping; use None to pick one")


@functools.cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    libc.madvise.restype = ctypes.c_int
    return libc


@functools.cache
def _fallocate() -> ctypes._CFuncPtr | None:
    """libc's fallocate with 64-bit offsets (not posix_fallocate, whose fallback writes zeros)."""
    libc = _libc()
    func = getattr(libc, "fallocate64", None) or getattr(libc, "fallocate", None)
    if func is not None:
        func.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
        func.restype = ctypes.c_int
    return func


def _merged_pages(ranges: torch.Tensor) -> torch.Tensor:
    """The pages under `ranges`, as sorted, disjoint, page-aligned [start, end) address ranges."""
    pages = ranges.clone()
    pages[:, 0] -= pages[:, 0] % PAGE_BYTES
    pages[:, 1] += (-pages[:, 1]) % PAGE_BYTES
    pages = pages[torch.argsort(pages[:, 0])]
    ends = torch.cummax(pages[:, 1], dim=0).values
    first = torch.ones(len(pages), dtype=torch.bool)
    first[1:] = pages[1:, 0] > ends[:-1]  # a gap before this range: it starts a new merged range
    last = torch.ones(len(pages), dtype=torch.bool)
    last[:-1] = first[1:]
    return torch.stack([pages[first, 0], ends[last]], dim=1)


def _prefault_madvise(tensor: torch.Tensor, ranges: torch.Tensor) -> bool:
    libc = _libc()
    for start, end in _merged_pages(ranges).tolist():
        if libc.madvise(start, end - start, MADV_POPULATE_WRITE) != 0:
            # EINVAL: a kernel before 5.14; EPERM/ENOSYS: a sandbox; EFAULT: a full /dev/shm (the
            # next method says so). Pages populated so far stay populated, which changes nothing.
            return False
    return True


def _backing_file(address: int) -> tuple[str, int] | None:
    """This pack's segment file mapped at `address` and the file offset there, from /proc/self/maps;
    None when the mapping is not one of our segments or its name is already unlinked."""
    try:
        with open("/proc/self/maps") as f:
            lines = f.readlines()
    except OSError:
        return None
    for line in lines:
        fields = line.rstrip("\n").split(maxsplit=5)
        start, end = (int(a, 16) for a in fields[0].split("-"))
        if start <= address < end:
            path = fields[5] if len(fields) == 6 else ""
            if os.path.dirname(path) != SHM_DIR or not _NAME_RE.match(os.path.basename(path)):
                return None
            return path, int(fields[2], 16) + address - start
    return None


def _prefault_fallocate(tensor: torch.Tensor, ranges: torch.Tensor) -> bool:
    # One call over the ranges' hull: allocating pages other ranks write changes nothing but saves
    # them the allocation; fallocate maps nothing, so only this rank's pages would gain more.
    lo, hi = int(ranges[:, 0].min()), int(ranges[:, 1].max())
    found = _backing_file(lo)
    if found is None or _fallocate() is None:
        return False
    path, offset = found
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return False
    try:
        if _fallocate()(fd, 0, offset, hi - lo) != 0:  # mode 0: allocate, keep every value
            err = ctypes.get_errno()
            if err == errno.ENOSPC:
                raise OSError(
                    err,
                    f"{SHM_DIR} has no room for the {hi - lo} bytes of this output; free shared memory "
                    f"(df {SHM_DIR}) or make the output smaller",
                )
            return False
    finally:
        os.close(fd)
    return True


def touch_addresses(ranges: torch.Tensor) -> torch.Tensor:
    """int64 [m]: the bytes "touch" rewrites for `ranges` (non-empty [start, end) rows): the first
    byte of each range and of every page that starts inside one. All inside `ranges`, so a write by
    another rank to the rest of a page is never undone; at least one in every page under them."""
    starts, ends = ranges[:, 0], ranges[:, 1]
    first_page = starts // PAGE_BYTES + 1
    counts = ((ends - 1) // PAGE_BYTES - first_page + 1).clamp_(min=0)
    page_starts = (
        torch.repeat_interleave(first_page, counts)
        + torch.arange(int(counts.sum()))
        - torch.repeat_interleave(torch.cumsum(counts, 0) - counts, counts)
    ) * PAGE_BYTES
    return torch.cat([starts, page_starts])


def _prefault_touch(tensor: torch.Tensor, ranges: torch.Tensor) -> bool:
    storage = tensor.untyped_storage()
    flat = torch.empty(0, dtype=torch.uint8).set_(storage, 0, (storage.nbytes(),), (1,))
    index = touch_addresses(ranges) - storage.data_ptr()
    flat[index] = flat[index]  # gathers every value before writing any back
    return True


_PREFAULTERS = {
    "madvise": _prefault_madvise,
    "fallocate": _prefault_fallocate,
    "touch": _prefault_touch,
}
