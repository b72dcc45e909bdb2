"""One ComfyUI server for every module that runs prompts on a default ComfyUI (conftest's
`workflow_server`): ComfyUI's main.py --cpu with its default flags, our pack, the test-only node packs
of TEST_PACKS, the tiny LTX-2 under the released file names the LTX-2 workflows name, and the
workflows' inputs (example.png, input.mp4 with audio, stage1.latent). A ComfyUI boot costs ~35 s on the 2-core CI machine; one is enough for all of
them.

A module that needs other files links them in with `comfyui_harness.link_models(server.layout, ...)`
(a running ComfyUI lists a folder again when it changes). At each module's end the fixture frees the
models and the node cache and waits until no worker and no segment of ours is left, so the next module
starts without a loaded group or a cached output, as on a fresh server.
"""

from __future__ import annotations

from pathlib import Path

import torch
from comfyui_harness import PACK_ROOT, ComfyUIServer, comfyui_root, make_layout

API = PACK_ROOT / "example_workflows" / "api"
# Test-only node packs the server carries: {folder under custom_nodes: source file}.
TEST_PACKS = {"ltx2_mgpu_error_drill": Path(__file__).parent / "comfyui_test_shims" / "error_drill.py"}
RELEASED = {
    "checkpoints": "ltx-2-19b-dev.safetensors",
    "latent_upscale_models": "ltx-2-spatial-upscaler-x2-1.0.safetensors",
    "text_encoders": "gemma_3_12B_it_fp4_mixed.safetensors",
    "loras": "ltx-2-19b-distilled-lora-384.safetensors",
}
WIDTH, HEIGHT, FRAMES, FPS = 192, 128, 17, 24


def released_names(staging: Path, sources: dict[str, Path], names: dict[str, str]) -> dict[str, list[Path]]:
    """{folder: [link]}: each source linked in `staging` under the released name `names[folder]`."""
    models = {}
    for folder, source in sources.items():
        named = staging / names[folder]
        named.symlink_to(Path(source).resolve())
        models[folder] = [named]
    return models


def start_workflow_server(base: Path, tiny) -> ComfyUIServer:
    """Lay out `base` (the tiny LTX-2 as released, the inputs) and start ComfyUI on it."""
    from ltx2_mgpu.workers.embedded.tiny_gemma import make_tiny_gemma
    from ltx2_mgpu.workers.embedded.tiny_variants import make_tiny_lora

    staging = base / "released-names"
    staging.mkdir(parents=True)
    sources = {
        "checkpoints": tiny.checkpoint,
        "latent_upscale_models": tiny.spatial_upscaler,
        "text_encoders": make_tiny_gemma(staging / "gemma"),
        "loras": make_tiny_lora(staging / "lora.safetensors", tiny.checkpoint),
    }
    layout = make_layout(
        base / "comfyui-base",
        models=released_names(staging, sources, RELEASED),
        extra_packs={folder: source.read_text() for folder, source in TEST_PACKS.items()},
    )
    _write_inputs(layout.base / "input")
    return ComfyUIServer(comfyui_root(), layout).start()


def _write_inputs(folder: Path) -> None:
    """example.png (i2v), input.mp4 with audio (video upscale), stage1.latent (latent upscale)."""
    import av
    import numpy as np
    from PIL import Image
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    gradient = np.linspace(0, 255, WIDTH * HEIGHT * 3).reshape(HEIGHT, WIDTH, 3).astype(np.uint8)
    Image.fromarray(gradient).save(folder / "example.png")
    with av.open(str(folder / "input.mp4"), "w") as container:
        video = container.add_stream("libx264", rate=FPS)
        video.width, video.height, video.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        audio = container.add_stream("aac", rate=16000)
        audio.layout = "mono"
        for i in range(FRAMES):
            frame = np.roll(gradient, 4 * i, axis=1)
            for packet in video.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                container.mux(packet)
        for packet in video.encode():
            container.mux(packet)
        tone = (0.2 * np.sin(np.arange(int(16000 * FRAMES / FPS)) * 0.05)).astype(np.float32)[None]
        samples = av.AudioFrame.from_ndarray(tone, format="flt", layout="mono")
        samples.sample_rate = 16000
        for packet in audio.encode(samples):
            container.mux(packet)
        for packet in audio.encode():
            container.mux(packet)
    latent = torch.randn(
        1, 128, (FRAMES - 1) // 8 + 1, HEIGHT // 32, WIDTH // 32, generator=torch.Generator().manual_seed(0)
    )
    save_file(
        {"latent_tensor": latent, "latent_format_version_0": torch.tensor([])}, str(folder / "stage1.latent")
    )
