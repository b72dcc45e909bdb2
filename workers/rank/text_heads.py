"""Which code turns Gemma's hidden states into LTX's text features on a rank, per backend.

ltx-core backend: the loaded model's text projection (a Linear) after our copy of ComfyUI's
normalisation (text/text_encoder.py text_features). comfy backend: ComfyUI's own LTXAVTEModel
(engine/comfy/text_projection.py), which also serves LTX-2.3's dual projection. Gemma itself runs
the same way on both (ops_text.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..engine.comfy.model import ComfyModel
from ..engine.ltxcore.checkpoint import read_safetensors_header
from ..text.text_encoder import GemmaFiles, text_features
from .ops import InputRejected

STATE_KEY = "comfy_text_head"
# safetensors dtype names of the weights ComfyUI holds Gemma in unconverted (llama_detect: the dtype
# of model.norm.weight; quantized files keep their layers and hold the rest in that dtype).
_STORED_DTYPES = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32}


def gemma_dtype(model, files: GemmaFiles) -> torch.dtype:
    """The dtype the ranks hold Gemma (and, on the comfy backend, its projection) in.

    comfy backend: the file's, whatever the group's weight dtype, as ComfyUI's text encoder loaders
    hold it (llama_detect sets dtype_llama from the stored norm weight, and LTXAVTEModel uses it for the
    projection too), so the CONDITIONING is CLIPTextEncode's with any MGPU Loader weight_dtype.
    ltx-core backend: the group's weight dtype, or the file's when the group has none."""
    if model.dtype is not None and not isinstance(model, ComfyModel):
        return model.dtype
    file, key = files.tensors["norm.weight"]
    stored = read_safetensors_header(file).dtypes[key]
    return _STORED_DTYPES.get(stored, torch.bfloat16)


def comfy_text_head(job, model: ComfyModel, files: GemmaFiles):
    """ComfyUI's LTXAVTEModel for `model`'s checkpoint projection, made once per checkpoint and dtype
    and kept in the rank's state."""
    from ..engine.comfy.text_projection import ComfyTextHead

    rt = job.runtime
    dtype = gemma_dtype(model, files)
    config = files.config
    key = (model.path, dtype, config.hidden_size, config.num_hidden_states)
    cached = rt.state.get(STATE_KEY)
    if cached is not None and cached[0] == key:
        return cached[1]
    rt.state.pop(STATE_KEY, None)
    try:
        head = ComfyTextHead.load(model.path, config.hidden_size, config.num_hidden_states, dtype, rt.device)
    except ValueError as exc:
        raise InputRejected(str(exc)) from exc
    rt.state[STATE_KEY] = (key, head)
    return head


def project(states: Sequence[torch.Tensor], head, dtype: torch.dtype) -> torch.Tensor:
    """[1, n, C] float32 text features from one prompt's hidden states with either backend's head."""
    if isinstance(head, torch.nn.Linear):
        return text_features(states, head, dtype)
    return head(states)
