"""Running worker jobs from a node: progress bar, Cancel, and errors a user can act on."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ..workers.group.manager import MGPUModel, get_manager
from ..workers.wire.errors import JobCancelled, JobInputError
from ..workers.wire.requests import Request
from . import comfy


@contextmanager
def cancel_as_interrupt() -> Iterator[None]:
    """Cancel agreed by the workers (Cancel, or Unload Models during the run) becomes ComfyUI's
    interrupt: the UI shows "interrupted", not an error."""
    try:
        yield
    except JobCancelled:
        comfy.raise_interrupted()
        raise


@contextmanager
def as_comfy_errors() -> Iterator[None]:
    """`cancel_as_interrupt`, and input the workers rejected becomes ValueError with their message.
    Fatal group errors pass through: the group is already stopped and the next run starts a fresh one."""
    try:
        with cancel_as_interrupt():
            yield
    except JobInputError as exc:
        raise ValueError(str(exc)) from None


def run_job(model: MGPUModel, request: Request, *, node_id: str | None, total: int) -> list[dict]:
    """Run `request` on the group for `model` (starting/reloading it as needed); rank results by index.
    `total`: the progress bar's length until the workers report theirs."""
    progress = comfy.Progress(total, node_id)
    with as_comfy_errors():
        return get_manager().run(
            model, request, on_progress=progress.update, should_cancel=comfy.interrupt_requested
        )


def load(model: MGPUModel, *, node_id: str | None) -> None:
    """Start the group and load `model` (a cancel during loading stops the workers at once)."""
    progress = comfy.Progress(2, node_id)
    with as_comfy_errors():
        get_manager().acquire(model, on_progress=progress.update, should_cancel=comfy.interrupt_requested)
