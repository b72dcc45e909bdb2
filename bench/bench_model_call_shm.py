"""CPU micro benchmark of the MGPU Loader's MODEL path without a model (issue 21): the wall time of
GroupModelCall.forward at the 19B latent shapes (cond+uncond, float32) with a stand-in rank in this
process that does what a rank's job does with the streams (the wire form, mapping the segments by
name, reading the inputs, writing the outputs, the job's unlinks) and no forward. What it measures
is the shared-memory and copy cost per model call on the host, comparable between two trees.

    PYTHONPATH=<dir holding ltx2_mgpu> python bench/bench_model_call_shm.py [--calls 30]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from ltx2_mgpu.nodes.group_model.call import GroupModelCall
from ltx2_mgpu.workers.group.client import _slots_to_wire
from ltx2_mgpu.workers.group.manager import MGPUModel
from ltx2_mgpu.workers.wire import protocol, shm
from ltx2_mgpu.workers.wire.requests import ComfyModelCall

# Video [B, C, F, H, W] at 6,144 and 24,576 tokens (24 x 16 x 16, 24 x 32 x 32), audio [B, C, T, F].
SHAPES = {6144: (2, 128, 24, 16, 16), 24576: (2, 128, 24, 32, 32)}
AUDIO = (2, 8, 121, 16)


def stand_in_rank(request: ComfyModelCall) -> list[dict]:
    names: list[str] = []
    wired = protocol.share_tensors(_slots_to_wire(request.to_wire(), names), names)
    try:
        args = protocol.attach_tensors(wired)
        for slot, x in zip(args["out"], args["streams"]):
            slot.copy_(x.clone())  # the rank's read of the inputs and its write of the outputs
        return [{"split_forwards": 0, "forward_ms": 0.0}]
    finally:
        for name in names:
            shm.unlink(name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=30)
    args = parser.parse_args()
    for tokens, shape in SHAPES.items():
        call = GroupModelCall(MGPUModel(checkpoint="unused"), run=stand_in_rank)
        x = [torch.randn(shape), torch.randn(AUDIO)]
        context = torch.randn(2, 1024, 64)
        times = []
        for _ in range(args.calls):
            started = time.perf_counter()
            out = call.forward(x, torch.tensor([0.5, 0.5]), context, {}, {})
            times.append((time.perf_counter() - started) * 1e3)
        assert all(torch.equal(o, s) for o, s in zip(out, x))
        release = getattr(call, "release", None)
        if release is not None:
            release()
        steady = times[1:]
        print(json.dumps({"video_tokens": tokens, "median_ms": round(statistics.median(steady), 2),
                          "min_ms": round(min(steady), 2)}))  # fmt: skip


if __name__ == "__main__":
    main()
