"""Shared-memory segments a caller keeps from one job to the next while the shapes stay the same.

NOTE [kept slots]: native sampling (nodes/group_model/call.py) runs one job per diffusion-model call,
each with the same latent shapes. A new segment per call costs create, ftruncate, the first touch
of every page (the kernel zeroes it) and unlink on the UI side, and the same page faults again on
the ranks: at 24,576 video tokens this was most of the 36 ms per call over the rank's forward. Kept
slots are reused while the shapes and dtypes match and unlinked on a shape change, when a worker
group stops (client.WorkerGroup._teardown calls `release_all`), when the owner is collected, and
at exit (shm.close_owner unlinks every segment of the process). Nothing stays in /dev/shm past those.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence

import torch

from ..wire import protocol, shm
from . import shutdown

Layout = tuple[tuple[tuple[int, ...], torch.dtype], ...]

_LOCK = threading.Lock()
_LIVE: weakref.WeakSet[KeptSlots] = weakref.WeakSet()


class KeptSlots:
    """One set of segments (one per tensor of `layout`), made on the first `get` and reused while
    `get` asks for the same layout. Not thread-safe on its own: one caller, one job at a time."""

    def __init__(self) -> None:
        self._layout: Layout | None = None
        self._slots: list[protocol.OutputSlot] = []
        self._finalizer: weakref.finalize | None = None
        with _LOCK:
            _LIVE.add(self)

    def get(self, layout: Sequence[tuple[Sequence[int], torch.dtype]]) -> list[protocol.OutputSlot]:
        wanted = tuple((tuple(int(n) for n in shape), dtype) for shape, dtype in layout)
        if wanted != self._layout or not self._slots:
            self.release()
            shutdown.wait_if_exiting()
            slots = []
            try:
                for shape, dtype in wanted:
                    spec, tensor = shm.create(shape, dtype)
                    slots.append(protocol.OutputSlot(spec=spec, tensor=tensor, kept=True))
            except BaseException:
                _unlink([slot.spec.name for slot in slots])
                raise
            self._layout, self._slots = wanted, slots
            # The names only: the finalizer must not hold `self` (it would never be collected).
            self._finalizer = weakref.finalize(self, _unlink, [slot.spec.name for slot in slots])
        return list(self._slots)

    def release(self) -> None:
        """Unlink the segments (mappings handed out stay valid); the next `get` makes new ones."""
        if self._finalizer is not None:
            self._finalizer()  # runs _unlink once
        self._layout, self._slots, self._finalizer = None, [], None


def release_all() -> None:
    """Unlink every kept segment of this process (a worker group stopped: the next job makes new ones)."""
    with _LOCK:
        live = list(_LIVE)
    for kept in live:
        kept.release()


def _unlink(names: list[str]) -> None:
    for name in names:
        shm.unlink(name)
