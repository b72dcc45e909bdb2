"""Cancel, errors and progress agreed by every rank between units of work inside one command.

NOTE [units]: a decode or encode is a loop over units (a convolution of a band of rows, a tile, a
block, a time chunk) that every *active* rank runs in the same order, while ranks without work (a
frame with fewer rows than ranks) run none. Between two units every rank joins one small all_reduce
on the control group (gloo, on the CPU) of three flags: cancel requested (the client's control
block, `Job.cancel_requested`), this rank still has units, this rank failed the unit it just ran. So:
- Cancel reaches a rank within one unit, and every rank raises `Cancelled` at the same boundary: no
  rank is left inside a collective, the group stays usable.
- An error one rank catches in a unit that holds no collective (a tile decoded on its own) travels
  to the others at the next boundary: every rank raises the same `InputRejected`, recoverable.
- Idle ranks call `idle()`, which joins the boundaries until the active ranks `finish()`; active
  ranks all run the same number of units (the strategies guarantee it: their exchanges need it).
- A unit that holds no collective (a tile) may stop early when this rank sees the request
  (`cancel_requested`): the request stays set until the job ends, so the next boundary cancels.
Cost: one all_reduce of three int32 per unit (tens of microseconds between local processes); the
messages of a failure are gathered only when one happened.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from .protocol import Cancelled, InputRejected, Job

CANCEL, WORKING, FAILED = 0, 1, 2


class UnitSteps:
    """One command's unit boundaries on this rank (NOTE [units]). Collective: every rank of the job
    makes the same sequence of step()/finish() calls, or idle() in their place."""

    def __init__(self, job: Job) -> None:
        self.job = job
        self.units = 0  # boundaries this rank has passed
        self._error: str | None = None

    def cancel_requested(self) -> bool:
        """This rank's own view of the cancel request (no collective): a unit may stop early on it, as
        the request stays until the job ends and the next boundary then cancels on every rank."""
        return self.job.cancel_requested()

    def fail(self, message: str) -> None:
        """Record that this rank's current unit failed; the next boundary makes every rank raise it."""
        self._error = self._error or message

    def step(self) -> None:
        """A unit boundary of an active rank: raises Cancelled or InputRejected alike on every rank."""
        self._agree(working=True)

    def finish(self) -> None:
        """After an active rank's last unit (once): releases the idle ranks."""
        self._agree(working=False)

    def idle(self) -> None:
        """A rank without units: join every boundary until the active ranks finish."""
        while self._agree(working=False):
            pass

    def _agree(self, working: bool) -> bool:
        job = self.job
        flags = torch.tensor(
            [
                int(job.cancel_requested()),
                int(working),
                int(self._error is not None),
            ],
            dtype=torch.int32,
        )
        if job.world_size > 1:
            dist.all_reduce(flags, op=dist.ReduceOp.MAX, group=job.control_group)
        self.units += 1
        if int(flags[FAILED]):
            raise InputRejected(self._first_error())
        if int(flags[CANCEL]):
            raise Cancelled(f"job cancelled after {self.units} unit(s) of work")
        return bool(int(flags[WORKING]))

    def _first_error(self) -> str:
        """The failure message of the lowest failed rank (collective; only after a failure)."""
        messages = [self._error]
        if self.job.world_size > 1:
            messages = [None] * self.job.world_size
            dist.all_gather_object(messages, self._error, group=self.job.control_group)
        return next(m for m in messages if m is not None)
