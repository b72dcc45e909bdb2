"""What the ranks' failure reports of one job mean for the group, as the error the UI raises.

A failure raised alike on every rank (the same type and message: a refused input, a cancel agreed
at a step boundary, the same exception everywhere) is recoverable: the group and its model stay.
Anything else (some ranks failed, or they failed differently) leaves the others waiting in a
collective: the group is out of step and must be stopped (fatal).
"""

from __future__ import annotations

import signal

from ..wire.errors import GroupOutOfStep, JobCancelled, JobError, JobInputError, WorkerGroupError


def job_failure(failures: dict[int, dict], world_size: int, job_id: int) -> WorkerGroupError:
    """The error for a job whose ranks in `failures` (rank -> their "failed" message) failed."""
    kinds = {(f["error_type"], f["message"]) for f in failures.values()}
    first = failures[min(failures)]
    if len(failures) != world_size or len(kinds) != 1:
        return out_of_step(failures, job_id)
    if first["error_type"] == "cancelled":
        return JobCancelled("cancelled; every worker stopped at a step boundary", job_id=job_id)
    if first["error_type"] == "input":
        return JobInputError(first["message"], job_id=job_id, cause_type="input")
    return JobError(
        f"the workers' {first.get('op', 'job')!r} command failed on every worker with "
        f"{first['error_type']}: {first['message']}. The workers and the loaded model were kept; "
        "the traceback is in the console. Check this node's inputs and files; if they are right, "
        "report this message with the console output.",
        job_id=job_id,
        cause_type=first["error_type"],
    )


def out_of_step(failures: dict[int, dict], job_id: int) -> GroupOutOfStep:
    """Fatal: the first failed rank's error, with what to do about memory when it ran out."""
    rank = min(failures)
    f = failures[rank]
    hint = ""
    if "out of memory" in f["message"].lower() or f["error_type"] == "OutOfMemoryError":
        hint = " Lower the resolution or frame count, use more GPUs, or free memory used by other programs."
    return GroupOutOfStep(
        f"worker rank {rank} failed: {f['error_type']}: {f['message']}.{hint} The other workers could not "
        f"continue, so the worker group was stopped; the next run starts a fresh one. The traceback is in "
        "the console.",
        rank=rank,
        job_id=job_id,
    )


def exit_text(code: int) -> str:
    """A process's exit status in words: "exit code 3", "signal SIGKILL"."""
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"
