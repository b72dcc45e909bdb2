"""Errors of the worker group, with structured fields.

Recoverable: raised alike on every rank (bad input found before any collective, cancel agreed at
a step boundary). The group stays up and the next job runs on it.
Fatal: a rank died, hung, or failed alone. The group is stopped; the next job starts a fresh one.
"""

from __future__ import annotations

# ComfyUI's error dialog names the type as `module.qualname` (execution.py full_type_name). A pack is
# imported under its folder path, so the real module would read as a path
# (".../ComfyUI-LTX2-MultiGPU.workers.errors.JobError"); every class here shows a short stable name
# instead. Nothing pickles these errors (workers report plain dicts), so the module need not import.
PUBLIC_MODULE = "LTX2MultiGPU"


class WorkerGroupError(RuntimeError):
    """Base of every error the group reports. `rank` is None when the whole group is meant."""

    fatal = False

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        cls.__module__ = PUBLIC_MODULE

    def __init__(self, message: str, *, rank: int | None = None, job_id: int | None = None) -> None:
        super().__init__(message)
        self.rank = rank
        self.job_id = job_id


class JobError(WorkerGroupError):
    """A job failed on every rank alike; the group is still usable."""

    def __init__(
        self, message: str, *, rank: int | None = None, job_id: int | None = None, cause_type: str = ""
    ) -> None:
        super().__init__(message, rank=rank, job_id=job_id)
        self.cause_type = cause_type


class JobInputError(JobError, ValueError):
    """The job's input was rejected (the user can fix it). Also a ValueError for callers."""


class JobCancelled(WorkerGroupError):
    """Every rank agreed to stop at a step boundary after a cancel request."""


class LoadCancelled(JobCancelled):
    """Cancel arrived during a command with no step boundary (loading): the group was stopped."""

    fatal = True


class GroupStartError(WorkerGroupError):
    """The group could not be started (bad device list, worker crashed during start-up)."""

    fatal = True


class WorkerDied(WorkerGroupError):
    """A worker process exited during a job; the group is stopped and rebuilt on the next run."""

    fatal = True


class WorkerHung(WorkerGroupError):
    """A worker stopped answering (no heartbeat); the group is stopped and rebuilt on the next run."""

    fatal = True


class GroupOutOfStep(WorkerGroupError):
    """Ranks disagreed (one failed, others did not): the group cannot continue and is rebuilt."""

    fatal = True


WorkerGroupError.__module__ = PUBLIC_MODULE
