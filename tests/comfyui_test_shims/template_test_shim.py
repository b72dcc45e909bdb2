"""TEST SHIM, never installed by users: a custom-node module the template tests put into a throwaway
ComfyUI base directory. It makes ComfyUI's own text-encoder loaders build the tiny Gemma 3, and adds
one test node, TEST_SaveImageTensor, that saves an IMAGE as float32 (PNG or video would round it to
8 bits, too coarse for the decode tolerance).

ComfyUI sizes Gemma 3 for 12B (comfy/text_encoders/llama.py) whatever the file holds; the tiny Gemma's
sizes come from tiny_gemma_sizes.json next to this file (written by the test). The same three changes
as tests/ltx23_fixtures.py makes in process: no 12B vision tower and projector (not on the text path,
minutes to build on a CPU), the tiny head_dim (a class constant) and the tiny sizes through sd1_clip's
"_model_config" override. Applied at import; it adds no nodes.
ComfyUI sizes Gemma 4 for 12B likewise (comfy/text_encoders/gemma4.py): with tiny_gemma4.json next
to this file, its config class takes the tiny head sizes and embedder configs (class constants) and a
Gemma 4 file (found by its audio projector) gets the tiny Gemma 4 sizes instead of Gemma 3's.
"""

import json
from pathlib import Path

import comfy.clip_model
import comfy.sd
import comfy.text_encoders.gemma4 as gemma4
import comfy.text_encoders.llama as llama
import comfy.utils
import folder_paths
import torch
from safetensors import safe_open

SIZES = json.loads((Path(__file__).parent / "tiny_gemma_sizes.json").read_text())
GEMMA4_FILE = Path(__file__).parent / "tiny_gemma4.json"
GEMMA4 = json.loads(GEMMA4_FILE.read_text()) if GEMMA4_FILE.exists() else None
GEMMA4_KEY = "audio_projector.embedding_projection.weight"  # Gemma 4 12B's; Gemma 3 has none

comfy.clip_model.CLIPVision = lambda *a, **k: torch.nn.Module()
llama.Gemma3MultiModalProjector = lambda *a, **k: torch.nn.Module()
llama.Gemma3_12B_Config.head_dim = SIZES["head_dim"]
_load_clip = comfy.sd.load_clip
_MODEL_CONFIG = {k: v for k, v in SIZES.items() if k != "head_dim"}
if GEMMA4 is not None:
    for name, value in GEMMA4["class"].items():
        setattr(gemma4.Gemma4_12B_Config, name, value)


def _is_gemma4(paths) -> bool:
    with safe_open(str(paths[0]), framework="pt") as file:
        return GEMMA4_KEY in file.keys()


def _load_clip_at_tiny_sizes(ckpt_paths, *args, model_options=None, **kwargs):
    # sd1_clip reads "<model_name>_model_config" overrides; Gemma's model has no name set.
    sizes = GEMMA4["sizes"] if GEMMA4 is not None and _is_gemma4(ckpt_paths) else _MODEL_CONFIG
    return _load_clip(
        ckpt_paths, *args, model_options={**(model_options or {}), "_model_config": dict(sizes)}, **kwargs
    )


comfy.sd.load_clip = _load_clip_at_tiny_sizes
print("[test shim] ComfyUI's Gemma loaders build the tiny Gemma 3 / 4:", SIZES, GEMMA4)


class SaveImageTensor:
    """IMAGE -> output/<prefix>_00001_.safetensors ({"image": float32 [frames, H, W, 3]})."""

    OUTPUT_NODE = True
    RETURN_TYPES = ()
    FUNCTION = "save"
    CATEGORY = "testing"

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {"images": ("IMAGE",), "filename_prefix": ("STRING", {"default": "tensors/image"})}
        }

    def save(self, images, filename_prefix):
        folder, name, counter, subfolder, _ = folder_paths.get_save_image_path(
            filename_prefix, folder_paths.get_output_directory()
        )
        file = f"{name}_{counter:05}_.safetensors"
        comfy.utils.save_torch_file({"image": images.float().contiguous()}, str(Path(folder) / file))
        return {"ui": {"tensors": [{"filename": file, "subfolder": subfolder, "type": "output"}]}}


NODE_CLASS_MAPPINGS = {"TEST_SaveImageTensor": SaveImageTensor}
