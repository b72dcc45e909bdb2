"""Sequence parallelism on a GPU in bf16: 2 and 4 ranks sharing one GPU (gloo for control, the IPC
kernel or the torch.distributed fallback for data) against one rank. Run on the device machine."""

from __future__ import annotations

import pytest
import torch

from conftest import tiny_conditioning
from ltx2_mgpu.workers.group.client import output_slot
from ltx2_mgpu.workers.group.manager import MGPUModel

pytestmark = pytest.mark.gpu

SHAPE = (1, 128, 3, 7, 9)  # 189 video tokens: uneven over 2 and 4 ranks
# bf16 keeps 8 bits of mantissa: a reduction-order change moves values by a few ulp of their magnitude.
BF16_RELATIVE_TOLERANCE = 2e-2


def _forward(manager, model: MGPUModel, video, audio, positive) -> tuple[torch.Tensor, torch.Tensor, str]:
    out_v = output_slot((1, video[0, 0].numel(), 128), torch.float32)
    out_a = output_slot((1, audio.shape[2], 128), torch.float32)
    args = {
        "video": video,
        "audio": audio,
        "video_mask": None,
        "sigma": 0.6,
        "positive": {"tensor": positive[0][0], "unprocessed": True},
        "negative": None,
        "frame_rate": 24.0,
        "out_video": out_v,
        "out_audio": out_a,
    }
    result = manager.run(model, "forward", args)
    return out_v.tensor.clone(), out_a.tensor.clone(), result[0]["exchange"]


def _inputs() -> tuple[torch.Tensor, torch.Tensor, list]:
    g = torch.Generator().manual_seed(0)
    video = torch.randn(SHAPE, generator=g)
    audio = torch.randn(1, 8, 11, 16, generator=g)
    return video, audio, tiny_conditioning(13, 64, seed=1)


@pytest.mark.parametrize("backend", ["auto", "fallback"])
def test_bf16_parity_2_and_4_ranks_on_one_gpu(manager, tiny_path, backend):
    video, audio, positive = _inputs()
    manager.env = {"LTX2_MGPU_ALL2ALL": backend}
    try:
        one = _forward(
            manager, MGPUModel.create(tiny_path, devices="cuda:0", dtype="bfloat16"), video, audio, positive
        )
        for ranks in (2, 4):
            devices = ",".join(["cuda:0"] * ranks)
            many = _forward(
                manager,
                MGPUModel.create(tiny_path, devices=devices, dtype="bfloat16"),
                video,
                audio,
                positive,
            )
            expected = "torch.distributed" if backend == "fallback" else "ipc-kernel"
            assert many[2] == expected
            for name, a, b in (("video", many[0], one[0]), ("audio", many[1], one[1])):
                err = float((a - b).abs().max())
                rel = err / float(b.abs().max())
                print(f"\n[gpu sp] {backend} {ranks} ranks {name}: max abs {err:.3e}, relative {rel:.3e}")
                assert rel <= BF16_RELATIVE_TOLERANCE
    finally:
        manager.env = {}


@pytest.mark.multigpu
def test_bf16_parity_one_rank_per_gpu_against_one_gpu(manager, tiny_path):
    """Two GPUs, NCCL for collectives, the IPC kernel across the GPUs for the head exchange."""
    count = torch.cuda.device_count()
    video, audio, positive = _inputs()
    one = _forward(
        manager, MGPUModel.create(tiny_path, devices="cuda:0", dtype="bfloat16"), video, audio, positive
    )
    for ranks in sorted({2, count}):
        devices = ",".join(f"cuda:{i}" for i in range(ranks))
        many = _forward(
            manager, MGPUModel.create(tiny_path, devices=devices, dtype="bfloat16"), video, audio, positive
        )
        for name, a, b in (("video", many[0], one[0]), ("audio", many[1], one[1])):
            rel = float((a - b).abs().max()) / float(b.abs().max())
            print(
                f"\n[multigpu sp] {many[2]} {ranks} GPUs {name}: max abs {float((a - b).abs().max()):.3e}, relative {rel:.3e}"
            )
            assert rel <= BF16_RELATIVE_TOLERANCE


@pytest.mark.multigpu
def test_compiled_blocks_on_two_gpus_match_eager_on_one(manager, tiny_path):
    """compile_blocks with the IPC kernel across two GPUs: each rank compiles on its own (the kernel's
    wait timeout is raised for that first call) and the result agrees with the eager single GPU."""
    video, audio, positive = _inputs()
    one = _forward(
        manager, MGPUModel.create(tiny_path, devices="cuda:0", dtype="bfloat16"), video, audio, positive
    )
    model = MGPUModel.create(tiny_path, devices="cuda:0,cuda:1", dtype="bfloat16", compile_blocks=True)
    for _ in range(2):  # the first call compiles, the second runs the compiled blocks
        many = _forward(manager, model, video, audio, positive)
        for name, a, b in (("video", many[0], one[0]), ("audio", many[1], one[1])):
            rel = float((a - b).abs().max()) / float(b.abs().max())
            print(f"\n[multigpu sp compiled] {many[2]} {name}: relative {rel:.3e}")
            assert rel <= BF16_RELATIVE_TOLERANCE
