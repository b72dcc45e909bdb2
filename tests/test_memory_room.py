"""NOTE [memory room]: a stage that runs out of device memory gives back the rank's resident text
encoders and runs once more; every other failure stays what it was."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from ltx2_mgpu.workers.engine.memory_room import with_room
from ltx2_mgpu.workers.engine.protocol import InputRejected
from ltx2_mgpu.workers.rank.ops_text import STATE_KEY
from ltx2_mgpu.workers.rank.runtime import JobContext

CPU = torch.device("cpu")
# What the tiled decode's agreed error carried on an H100 (engine/comfy/vae_job.py, units.fail).
OOM = (
    "Distributed VAE Decode, tiled mode: tile 1 of 2 (latent [1, 128, 16, 22, 24]) failed: CUDA out of "
    "memory. Tried to allocate 120.00 MiB. GPU 0 has a total capacity of 79.18 GiB of which 88.62 MiB is free."
)


class Attempts:
    def __init__(self, *errors: str | None) -> None:
        self.errors, self.calls = list(errors), 0

    def __call__(self) -> str:
        self.calls += 1
        error = self.errors.pop(0) if self.errors else None
        if error is not None:
            raise InputRejected(error)
        return f"decoded on try {self.calls}"


def test_out_of_memory_gives_back_the_text_encoder_and_runs_again():
    run, released = Attempts(OOM), []
    result, gone = with_room(run, lambda: released.append(1) or ["the text encoder"], CPU)
    assert (result, gone, run.calls, len(released)) == ("decoded on try 2", ["the text encoder"], 2, 1)


def test_a_run_that_fits_gives_nothing_back():
    run = Attempts()
    assert with_room(run, lambda: pytest.fail("nothing to give back when it fits"), CPU) == (
        "decoded on try 1",
        [],
    )


def test_other_errors_and_nothing_to_give_back_stay_errors():
    with pytest.raises(InputRejected, match="Set mode to exact"):
        with_room(
            Attempts("the tiled decode cannot run this VAE. Set mode to exact"),
            lambda: pytest.fail("no"),
            CPU,
        )
    run = Attempts(OOM)
    with pytest.raises(InputRejected, match="out of memory") as caught:
        with_room(run, list, CPU)  # nothing resident: the first failure, unchanged
    assert str(caught.value) == OOM and run.calls == 1
    run = Attempts(OOM, OOM)
    with pytest.raises(InputRejected, match="out of memory"):
        with_room(run, lambda: ["the text encoder"], CPU)  # one more try only
    assert run.calls == 2


def test_the_rank_drops_its_resident_text_encoder_once():
    runtime = SimpleNamespace(state={STATE_KEY: object(), "exchange": "kept"})
    job = JobContext(job_id=1, runtime=runtime)
    assert job.release_text_encoder() == ["the text encoder"]
    assert runtime.state == {"exchange": "kept"}  # only the encoder goes
    assert job.release_text_encoder() == []
