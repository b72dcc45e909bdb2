"""The wire form of one diffusion-model call of native sampling on the group (the MODEL output path).

NOTE [model call]: ComfyUI's sampler, guider and conditioning run in the UI process on a weightless
model; every diffusion-model call (what LTXAVModel.forward receives: the noised latent streams, the
timesteps, the context and the extra conditioning, transformer_options) travels to the ranks, which
call their ComfyUI model with the same arguments under sequence parallelism. Pure standard library
and torch; the commands are requests.ComfyModelCall / ComfyTextEmbeds. The UI side (nodes/group_model/call.py) encodes, the ranks (workers/engine/comfy/
model_call.py) decode.

What travels, recursively: None, bool, int, float, str, bytes; list, tuple, dict, set, frozenset of
those; torch.Size and uuid.UUID (tagged: the control channel refuses every global); tensors, as
- `{TAG_INLINE: bytes}`: under INLINE_MAX_BYTES, in the message itself (timesteps, sigmas, masks);
- `{TAG_STORE: id, "value": tensor}`: sent once in shared memory, kept on the ranks under `id`;
- `{TAG_CACHED: id}`: a tensor equal to one the ranks keep (the context, every step).
Anything else (a function, a module, another pack's object) cannot be carried and is refused by
`NotCarried` with where it sat and the module that defines it, never dropped.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import torch

TAG_INLINE, TAG_STORE, TAG_CACHED = "__inline__", "__store__", "__cached__"
TAG_SIZE, TAG_UUID = "__size__", "__uuid__"
# A weight adapter of a ComfyUI weight patch (NOTE [node patches] in nodes/group_model/patches.py):
# its class name in comfy.weight_adapter, "loaded_keys" and "weights".
TAG_ADAPTER = "__adapter__"
# Tensors below this travel inside the pickled message: a shared-memory segment costs an open,
# ftruncate, mmap and unlink on each side (~50 us), more than copying 64 KiB through the socket.
INLINE_MAX_BYTES = 64 * 1024
# The registered name (comfy.ldm.modules.attention.REGISTERED_ATTENTION_FUNCTIONS) of the attention
# function a MODEL chose (ComfyUI's ModelAttentionBackend): its closure in transformer_options
# ["optimized_attention_override"] travels as this key (NOTE [attention backend] in
# workers/engine/comfy/attention_backend.py).
ATTENTION_BACKEND_KEY = "ltx2_mgpu_attention_backend"
# The worker environment variable naming the attention function ComfyUI was started with
# (--use-sage-attention, --use-flash-attention, --use-ck-attention...): the workers' default too.
ATTENTION_ENV = "LTX2_MGPU_ATTENTION"


def registered_name(registry: dict[str, Any], function: Any) -> str | None:
    """The name under which `registry` (ComfyUI's REGISTERED_ATTENTION_FUNCTIONS) holds `function`."""
    return next((name for name, known in registry.items() if known is function), None)


# A rank refusing a cached id it does not hold (a restarted group) starts its message with this;
# the UI side then forgets its cache and sends the call again with every tensor stored.
CACHE_MISS = "model-call cache miss:"

TensorEncoder = Callable[[torch.Tensor, str], dict]
TensorDecoder = Callable[[dict], torch.Tensor]


class NotCarried(ValueError):
    """A value of a model call that cannot travel to the workers (a Python object from another pack)."""

    def __init__(self, where: str, value: Any) -> None:
        self.where, self.origin = where, origin_of(value)
        super().__init__(
            f"{where} holds {self.origin}, which cannot run in the worker group: the MGPU Loader's MODEL "
            "runs the diffusion model in the workers, where another pack's Python patches do not reach. "
            "Remove the node that adds it (its pack defines the module named here), or sample with "
            "CheckpointLoaderSimple's MODEL on one GPU"
        )


def origin_of(value: Any) -> str:
    """`module.qualname` of a function or object: which pack put it there."""
    target = value if callable(value) and hasattr(value, "__qualname__") else type(value)
    inner = getattr(value, "func", None)  # functools.partial: name what it wraps
    if inner is not None and hasattr(inner, "__qualname__"):
        target = inner
    return f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', repr(target))}"


def encode(value: Any, where: str, tensor: TensorEncoder) -> Any:
    """`value` in its wire form; tensors through `tensor(t, where)`. NotCarried for anything else."""
    if value is None or isinstance(value, bool | int | float | str | bytes):
        return value
    if isinstance(value, torch.Tensor):
        return tensor(value, where)
    if isinstance(value, torch.Size):
        return {TAG_SIZE: list(value)}
    if isinstance(value, uuid.UUID):
        return {TAG_UUID: str(value)}
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str | int | float | bool | tuple):
                raise NotCarried(f"{where} key {key!r}", key)
            out[key] = encode(item, f"{where}[{key!r}]", tensor)
        return out
    if isinstance(value, list | tuple | set | frozenset):
        return type(value)(encode(item, f"{where}[{i}]", tensor) for i, item in enumerate(value))
    raise NotCarried(where, value)


def decode(value: Any, tensor: TensorDecoder) -> Any:
    """The inverse of `encode` on the rank; tensor dicts through `tensor(wire)`."""
    if isinstance(value, dict):
        if TAG_SIZE in value:
            return torch.Size(value[TAG_SIZE])
        if TAG_UUID in value:
            return uuid.UUID(value[TAG_UUID])
        if TAG_INLINE in value or TAG_STORE in value or TAG_CACHED in value:
            return tensor(value)
        return {key: decode(item, tensor) for key, item in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return type(value)(decode(item, tensor) for item in value)
    return value


def inline_tensor(value: torch.Tensor) -> dict:
    flat = value.detach().contiguous().cpu().reshape(-1)
    return {
        TAG_INLINE: flat.view(torch.uint8).numpy().tobytes(),
        "shape": list(value.shape),
        "dtype": str(value.dtype).removeprefix("torch."),
    }


def inline_to_tensor(wire: dict) -> torch.Tensor:
    dtype = getattr(torch, wire["dtype"])
    raw = torch.frombuffer(bytearray(wire[TAG_INLINE]), dtype=torch.uint8) if wire[TAG_INLINE] else None
    if raw is None:
        return torch.empty(wire["shape"], dtype=dtype)
    return raw.view(dtype).reshape(wire["shape"])
