"""TEST SHIM, never installed by users: a custom-node module the template tests put into a throwaway
ComfyUI base directory. It makes ComfyUI's own text-encoder loaders build the tiny Gemma 3, and adds
one test node, TEST_SaveImageTensor, that saves an IMAGE as float32 (PNG or video would round it to
8 bits, too coarse for the decode tolerance).

ComfyUI sizes Gemma 3 for 12B (comfy/text_encoders/llama.py) whatever the file holds; the tiny Gemma's
sizes come from tiny_gemma_sizes.json next to this file (written by the test). The same three changes
as tests/ltx23_fixtures.py makes in process: no 12B vision tower and projector (not on the text path,
minutes to build on a CPU), the tiny head_dim (a class constant) and the tiny sizes through sd1_clip's
"_model_config" override. Applied at import; it adds no nodes.
"""

import json
from pathlib import Path

import comfy.clip_model
import comfy.sd
import comfy.text_encoders.llama as llama
import comfy.utils
import folder_paths
import torch

SIZES = json.loads((Path(__file__).parent / "tiny_gemma_sizes.json").read_text())

comfy.clip_model.CLIPVision = lambda *a, **k: torch.nn.Module()
llama.Gemma3MultiModalProjector = lambda *a, **k: torch.nn.Module()
llama.Gemma3_12B_Config.head_dim = SIZES["head_dim"]
_load_clip = comfy.sd.load_clip
_MODEL_CONFIG = {k: v for k, v in SIZES.items() if k != "head_dim"}


def _load_clip_at_tiny_sizes(*args, model_options=None, **kwargs):
    # sd1_clip reads "<model_name>_model_config" overrides; Gemma's model has no name set.
    return _load_clip(
        *args, model_options={**(model_options or {}), "_model_config": dict(_MODEL_CONFIG)}, **kwargs
    )


comfy.sd.load_clip = _load_clip_at_tiny_sizes
print("[test shim] ComfyUI's Gemma 3 loaders build the tiny Gemma:", SIZES)


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
