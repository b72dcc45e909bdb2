"""Benchmark commands: random weights of a released shape and timed model calls, on the engine each
command names (ltx-core: load_random_model, bench_forward; ComfyUI's: comfy_load_random_model,
comfy_bench_step). The work is the engine's (Engine.bench)."""

from __future__ import annotations

from ..wire.backend import BACKEND_COMFY, BACKEND_LTXCORE
from ..wire.released_configs import LTX2_19B_TRANSFORMER
from ..wire.requests import BenchForward, ComfyBenchStep, ComfyLoadRandomModel, LoadRandomModel
from .ops import op


@op(LoadRandomModel)
def load_random_model(job, request: LoadRandomModel) -> dict:
    """Replace the loaded model with a random-weight ltx-core one of `config` (default: the 19B shape),
    its keys filled in over the tiny model's full key set."""
    from ..embedded.tiny_model import tiny_checkpoint_config  # imports ltx-core: on its engine only

    full = {**tiny_checkpoint_config()["transformer"], **(request.config or LTX2_19B_TRANSFORMER)}
    return job.runtime.engine_for(BACKEND_LTXCORE).bench(job, request, full)


@op(BenchForward)
def bench_forward(job, request: BenchForward) -> dict:
    return job.runtime.engine_for(BACKEND_LTXCORE).bench(job, request)


@op(ComfyLoadRandomModel)
def comfy_load_random_model(job, request: ComfyLoadRandomModel) -> dict:
    return job.runtime.engine_for(BACKEND_COMFY).bench(job, request)


@op(ComfyBenchStep)
def comfy_bench_step(job, request: ComfyBenchStep) -> dict:
    return job.runtime.engine_for(BACKEND_COMFY).bench(job, request)
