"""The "sample" command (the SP Sampler) and the single "forward" of parity tests and benchmarks.

Inputs arrive replicated on every rank (mapped from the client's shared memory); the group's engine
denoises (NOTE [engine seam]); rank 0 writes the result into the output slots the client allocated.
"""

from __future__ import annotations

from ..wire.capabilities import check_native_guider
from ..wire.checks import check_splittable
from ..wire.requests import Forward, Sample
from .ops import InputRejected, op


def check_split(request: Sample | Forward, world_size: int) -> None:
    """The one check a request cannot run itself (it needs the group size), alike on every rank."""
    try:
        check_splittable(tuple(request.video.shape[2:]), world_size)
    except ValueError as exc:
        raise InputRejected(str(exc)) from exc


@op(Sample)
def sample(job, request: Sample) -> dict:
    engine = job.engine
    check_split(request, job.world_size)
    if request.guider is not None or request.guidance_groups > 1:
        try:  # the node refused it already from the same table; a caller that bypassed it is told here
            check_native_guider(engine.capabilities, "a GUIDER or guidance groups")
        except ValueError as exc:
            raise InputRejected(str(exc)) from exc
    return engine.sample(job, request)


@op(Forward)
def forward(job, request: Forward) -> dict:
    """One transformer forward (no CFG) at request.sigma: velocities written to out_video / out_audio
    as tokens [B, T, C]."""
    engine = job.engine
    check_split(request, job.world_size)
    return engine.forward(job, request)
