"""The tiny LTX-2.3 files and ComfyUI's own loaders on them, shared by the LTX-2.3 test modules.

`comfy23` (module scope): ComfyUI imported in this process (tests/comfyui_harness.py), the session's
tiny 2.3 (conftest's `tiny23`, written by `make-tiny --family 2.3`) loaded as the official LTX-2.3
templates load the 22B files: CheckpointLoaderSimple, LTXVAudioVAELoader,
LTXAVTextEncoderLoader, LatentUpscaleModelLoader.

ComfyUI's Gemma 3 config is sized for 12B (comfy/text_encoders/llama.py); the text encoder loader
gets the tiny Gemma's sizes through sd1_clip's config override while it builds, nothing else changed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from comfyui_harness import comfyui_in_process, comfyui_root

from ltx2_mgpu.workers.text.text_encoder import open_gemma

# A 17-frame 96x64 clip at 24 fps: video latent [1, 128, 3, 2, 3], audio latent [1, 8, 18, 16].
WIDTH, HEIGHT, FRAMES, FPS = 96, 64, 17, 24.0


def tiny_gemma_sizes(gemma: Path) -> dict[str, int]:
    config = open_gemma(gemma).config
    return {
        "vocab_size": config.vocab_size,
        "hidden_size": config.hidden_size,
        "intermediate_size": config.intermediate_size,
        "num_hidden_layers": config.num_layers,
        "num_attention_heads": config.num_heads,
        "num_key_value_heads": config.num_kv_heads,
        "head_dim": config.head_dim,
    }


@contextlib.contextmanager
def comfyui_loads_tiny_gemma(gemma: Path) -> Iterator[None]:
    """While held, ComfyUI's text encoder loaders build Gemma 3 at the tiny file's sizes (ComfyUI's
    config is sized for 12B) and without the vision tower, which is not on the text path and takes
    minutes to build on the CPU. Needs ComfyUI imported."""
    import comfy.clip_model
    import comfy.sd
    import comfy.text_encoders.llama as llama

    patches = pytest.MonkeyPatch()
    patches.setattr(comfy.clip_model, "CLIPVision", lambda *a, **k: torch.nn.Module())
    patches.setattr(llama, "Gemma3MultiModalProjector", lambda *a, **k: torch.nn.Module())
    sizes = tiny_gemma_sizes(gemma)
    patches.setattr(llama.Gemma3_12B_Config, "head_dim", sizes.pop("head_dim"))  # a class constant
    load_clip = comfy.sd.load_clip

    def load_clip_at_tiny_sizes(*args, model_options=None, **kwargs):
        # sd1_clip reads "<model_name>_model_config" overrides; Gemma's model has no name set.
        return load_clip(
            *args, model_options={**(model_options or {}), "_model_config": dict(sizes)}, **kwargs
        )

    patches.setattr(comfy.sd, "load_clip", load_clip_at_tiny_sizes)
    try:
        yield
    finally:
        patches.undo()


@pytest.fixture(scope="module")
def comfy23(tiny23) -> Iterator[SimpleNamespace]:
    with comfyui_in_process(comfyui_root()):
        import comfy.clip_model
        import comfy.nested_tensor
        import comfy.sd
        import folder_paths
        from comfy_extras import nodes_custom_sampler as cs
        from comfy_extras import nodes_hunyuan as hunyuan
        from comfy_extras import nodes_lt as lt
        from comfy_extras import nodes_lt_audio as lt_audio

        import nodes  # ComfyUI's nodes.py (its root is first on sys.path), not our nodes/ package

        files, gemma, lora, text_lora = tiny23.files, tiny23.gemma, tiny23.lora, tiny23.text_lora
        for kind, path in (
            ("checkpoints", files.checkpoint),
            ("text_encoders", gemma),
            ("latent_upscale_models", files.spatial_upscaler_x2),
            ("loras", lora),
        ):
            folder_paths.add_model_folder_path(kind, str(path.parent))
        name = files.checkpoint.name
        model, _clip, vae = nodes.CheckpointLoaderSimple().load_checkpoint(name)
        (audio_vae,) = lt_audio.LTXVAudioVAELoader.execute(name)
        with comfyui_loads_tiny_gemma(gemma):
            (clip,) = lt_audio.LTXAVTextEncoderLoader.execute(gemma.name, name)
            upscalers = {
                scale: hunyuan.LatentUpscaleModelLoader.execute(path.name)[0]
                for scale, path in ((2.0, files.spatial_upscaler_x2), (1.5, files.spatial_upscaler_x15))
            }
            yield SimpleNamespace(
                files=files, gemma=gemma, lora=lora, text_lora=text_lora,
                nodes=nodes, cs=cs, lt=lt, lt_audio=lt_audio,
                NestedTensor=comfy.nested_tensor.NestedTensor,
                model=model, vae=vae, audio_vae=audio_vae, clip=clip, upscalers=upscalers,
            )  # fmt: skip
