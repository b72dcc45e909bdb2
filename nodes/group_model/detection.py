"""ComfyUI's model config for a file, found from its header the way the loader a rank uses finds it
(workers/engine/comfy/model.py: a file with VAE weights loads as CheckpointLoaderSimple loads it, a
diffusion model alone as UNETLoader does), so the MGPU Loader's MODEL is configured in this process
exactly as the ranks' models are, without reading the weights.

The two ComfyUI paths differ in what they do first: the checkpoint path detects under the file's
prefix ("model.diffusion_model."); the diffusion-model path strips that prefix when the file has
one, keeps the keys as they are when it has none (LTX-2.5's transformer files are stored either way)
and detects at prefix "". Both turn older quantization layouts into ComfyUI's per-layer `comfy_quant`
entries first (comfy.utils.convert_old_quants): their presence is what gives the config its
quant_config (fp8 scaled, int8 convrot, nvfp4 mixed), as for the native loaders.
Import only inside ComfyUI.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import comfy.model_detection
import comfy.utils
import safetensors
import torch

from ...workers.wire.model_files import read_safetensors_header

# safetensors dtype names -> torch, for the meta tensors ComfyUI's detection looks at.
_FILE_DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "F8_E4M3": torch.float8_e4m3fn, "F8_E5M2": torch.float8_e5m2, "I64": torch.int64, "I32": torch.int32,
    "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool,
}  # fmt: skip
# Prefixes of the VAE weights a single-file checkpoint carries: the rank loads such a file as a
# checkpoint (ComfyModel.load), any other as a diffusion model.
CHECKPOINT_VAE_PREFIXES = ("vae.", "audio_vae.")
# Entries convert_old_quants reads by value (the old scaled-fp8 layout): scalars, read for real.
_READ_BY_VALUE = ("scaled_fp8", ".scale_input")


@dataclass(frozen=True)
class DetectedModel:
    """What ComfyUI's loader detects for a file: `config` is its supported_models entry (LTXAV for
    every LTX release) with quant_config set for quantized files; `state_dict` the meta tensors it
    looked at (keys under `prefix`, as the loader keeps them)."""

    config: Any
    state_dict: dict[str, torch.Tensor]
    prefix: str
    is_checkpoint: bool


def detect_model(path: Path) -> DetectedModel:
    """ComfyUI's model config for `path`, as the rank's loader will detect it. ValueError naming the
    file when ComfyUI recognises no diffusion model in it."""
    header = read_safetensors_header(path)
    state_dict = _meta_state_dict(path, header.shapes, header.dtypes)
    metadata = dict(header.metadata)
    is_checkpoint = any(key.startswith(CHECKPOINT_VAE_PREFIXES) for key in state_dict)
    if is_checkpoint:  # comfy.sd.load_state_dict_guess_config
        prefix = comfy.model_detection.unet_prefix_from_state_dict(state_dict)
        state_dict, metadata = comfy.utils.convert_old_quants(state_dict, prefix, metadata=metadata)
    else:  # comfy.sd.load_diffusion_model_state_dict
        state_dict, metadata = comfy.utils.convert_old_quants(state_dict, "", metadata=metadata)
        found = comfy.model_detection.unet_prefix_from_state_dict(state_dict)
        stripped = comfy.utils.state_dict_prefix_replace(state_dict, {found: ""}, filter_keys=True)
        if stripped:
            state_dict, metadata = comfy.utils.convert_old_quants(stripped, "", metadata=metadata)
        prefix = ""
    config = comfy.model_detection.model_config_from_unet(state_dict, prefix, metadata=metadata)
    if config is None:
        raise ValueError(f"ComfyUI does not recognise a diffusion model in {path}")
    return DetectedModel(config=config, state_dict=state_dict, prefix=prefix, is_checkpoint=is_checkpoint)


def _meta_state_dict(path: Path, shapes, dtypes) -> dict[str, torch.Tensor]:
    state_dict = {
        key: torch.empty(shape, dtype=_FILE_DTYPES.get(dtypes[key], torch.uint8), device="meta")
        for key, shape in shapes.items()
    }
    by_value = [key for key in state_dict if key.endswith(_READ_BY_VALUE)]
    if by_value:
        with safetensors.safe_open(str(path), framework="pt") as f:
            state_dict.update({key: f.get_tensor(key) for key in by_value})
    return state_dict
