"""compile_blocks: the torch.compile'd blocks give the eager numbers, under sequence parallelism too,
and a combination that cannot work is refused before any worker starts."""

from __future__ import annotations

import shutil

import pytest
import torch
from test_sp_parity import CAPTION, forward_args, latent_inputs

from conftest import tiny_conditioning
from ltx2_mgpu.workers.engine.ltxcore.model_forward import ForwardMode
from ltx2_mgpu.workers.engine.ltxcore.reference import denoiser, load_in_process, relative_error
from ltx2_mgpu.workers.group.client import output_slot
from ltx2_mgpu.workers.group.manager import MGPUModel, check_fits

# Inductor fuses elementwise ops and reorders float32 sums: rounding-level differences only.
TOLERANCE = 1e-5


@pytest.mark.skipif(
    not any(shutil.which(c) for c in ("c++", "g++", "clang++")),
    reason="torch.compile on CPU (inductor) needs a C++ compiler",
)
def test_compiled_blocks_match_eager_on_two_ranks(manager, tiny_path):
    reference = load_in_process(tiny_path, ForwardMode.COMFYUI)
    positive = tiny_conditioning(9, CAPTION, seed=3)
    video, audio, mask = latent_inputs((1, 128, 3, 3, 3), with_mask=True)
    model = MGPUModel.create(tiny_path, devices="cpu:2", dtype="float32", compile_blocks=True)
    out_v = output_slot((1, video[0, 0].numel(), 128), torch.float32)
    out_a = output_slot((1, audio.shape[2], 128), torch.float32)
    manager.run(
        model,
        "forward",
        {**forward_args(video, audio, mask, positive), "out_video": out_v, "out_audio": out_a},
    )
    den = denoiser(reference, video, audio, positive, None, 1.0, 1.0, frame_rate=24.0)
    with torch.inference_mode():
        (_, ref_v), ref_a = den.velocity([video, audio], 0.7, [mask, None])
    err_v, err_a = relative_error(out_v.tensor, ref_v), relative_error(out_a.tensor, ref_a[1])
    print(f"compiled vs eager, 2 ranks: video {err_v:.2e}, audio {err_a:.2e}")
    assert err_v <= TOLERANCE and err_a <= TOLERANCE
    # Switching compile off reuses the loaded weights (no reload) and runs eagerly again.
    eager = MGPUModel.create(tiny_path, devices="cpu:2", dtype="float32")
    assert manager.group.run("load_model", {"checkpoint": eager.checkpoint, "dtype": "float32"})[0]["reused"]
    assert manager.group.run("set_compiled", {"compile": False})[0] == {"compiled": False}


def test_compile_with_reference_mode_is_refused(tiny_path):
    model = MGPUModel.create(
        tiny_path, devices="cpu:1", mode=ForwardMode.REFERENCE.value, compile_blocks=True
    )
    with pytest.raises(ValueError, match="compile_blocks works with mode 'comfyui' only"):
        check_fits(model)
