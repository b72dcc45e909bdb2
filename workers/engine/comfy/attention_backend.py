"""The attention function a MODEL names, applied in the ranks.

NOTE [attention backend]: ComfyUI's ModelAttentionBackend node (and any
ModelPatcher.set_model_optimized_attention call with a registered function) keeps its choice as a
closure in transformer_options["optimized_attention_override"]. A closure cannot travel, so the UI
side (nodes/group_model/call.py, attention_backend_name) sends the function's registered name under
wire.ATTENTION_BACKEND_KEY, and each rank looks it up in its own ComfyUI's registry. The ranks'
override slot is SequenceParallel.attention (sequence_parallel.py, on one rank too), which calls
`chosen(...) or func` inside the head exchange and counts the calls it served (the replies report
them, so a bench or test sees the backend ran). No name: ComfyUI's own function, untouched. Import only after bootstrap.import_comfyui.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import comfy.ldm.modules.attention as attention

from ...wire.model_call import ATTENTION_BACKEND_KEY


def chosen(options: dict | None) -> Callable[..., Any] | None:
    """The attention function `options` (transformer_options) name, None when they name none.
    ValueError when this ComfyUI does not provide it (check() says so before a forward)."""
    name = (options or {}).get(ATTENTION_BACKEND_KEY)
    if not name:
        return None
    function = attention.get_attention_function(name, None)
    if function is None:
        available = ", ".join(sorted(attention.REGISTERED_ATTENTION_FUNCTIONS))
        raise ValueError(
            f"the MODEL asks for the attention backend {name!r} (ModelAttentionBackend or another node), "
            f"which the worker processes' ComfyUI does not provide (available there: {available}). "
            "Install what that backend needs in the Python ComfyUI runs with, or choose another backend"
        )
    return function


def check(options: dict | None) -> None:
    """ValueError before any collective when `options` name an attention function the ranks lack."""
    chosen(options)
