"""Running a worker job from a node: progress bar, Cancel, and errors a user can act on."""

from __future__ import annotations

from typing import Any

from ..workers.errors import JobCancelled, JobInputError
from ..workers.manager import MGPUModel, get_manager
from . import comfy


def run_job(
    model: MGPUModel, op: str, args: dict[str, Any], *, node_id: str | None, total: int
) -> list[dict]:
    """Run `op` on the group for `model` (starting/reloading it as needed); rank results by index.

    Cancel pressed in ComfyUI stops every rank at the next step and raises ComfyUI's interrupt; input
    the workers reject raises ValueError with their message; fatal group errors propagate (the group
    is already stopped and the next run starts a fresh one).
    """
    progress = comfy.Progress(total, node_id)
    try:
        return get_manager().run(
            model, op, args, on_progress=progress.update, should_cancel=comfy.interrupt_requested
        )
    except JobCancelled:
        comfy.raise_interrupted()
        raise
    except JobInputError as exc:
        raise ValueError(str(exc)) from None
