"""CUDA graphs of whole model calls on a rank (NOTE [call graphs]).

NOTE [call graphs]: at the token counts of a template's stage 1 (about 3,500 video tokens for LTX-2.3
at 1280x704), a 22B model call is bound by the CPU, not the GPU: measured on an H200 with the fp8
file, 163 ms of kernels in a 600 ms call, the rest Python launching ~5,000 kernels (ComfyUI's
quantized-tensor dispatch, fp8 activation quantizing, AdaLN, RoPE). Native ComfyUI pays the same.
A sampler calls the model with the same shapes at every step, so the second call of a shape captures
the whole forward in a CUDA graph and every later one replays it: the kernels are the same ones, in
the same order, on the same weights, so the result is the eager result bit for bit.

What makes a replay safe:
- The key is everything the forward may read on the host: the call's structure, its Python values
  (frame rate, cond/uncond lists, patch functions), its tensors' shapes/dtypes/strides, and the
  addresses of the model's weights (a reload or a LoRA switch that moves a weight makes a new key;
  a patch written into the same memory is read by the replay, as by an eager call). ComfyUI's cond
  "uuids" are left out (they change every job and the model does not read them).
- Device tensors are copied into the graph's own input buffers before each replay; a forward that
  reads a device value on the host (`.item()`, `if tensor:`) cannot be captured (CUDA refuses the
  sync), and that key then runs eagerly for good.
- The first call of a key runs eagerly, so whatever the model caches on first use (RoPE tables) is
  made outside the graph's memory.
- Only on a single-rank group with replicated weights: the SP exchange and FSDP2's gathers synchronise
  ranks on the host, and offloaded weights are copied from host memory per call.
Each graph keeps its own memory pool (about one forward's activations); the two most recent keys are
kept (a template's stage 1 and stage 2). LTX2_MGPU_CUDA_GRAPHS=1 turns it on, 0 off (DEFAULT).
"""

from __future__ import annotations

import logging
import os
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

ENV = "LTX2_MGPU_CUDA_GRAPHS"
KEEP = 2
WRAPPER_KEY = "ltx2_mgpu_call_graphs"  # our DIFFUSION_MODEL wrapper on a rank's patcher
_UNREAD_OPTIONS = frozenset({"uuids"})  # per-job identities the model does not read
log = logging.getLogger("ltx2_mgpu.call_graphs")


# Opt-in until the GPU parity tests (tests/test_call_graphs.py) have run on a GPU.
DEFAULT = "0"


def graphs_enabled() -> bool:
    return os.environ.get(ENV, DEFAULT).strip().lower() not in ("0", "off", "false", "no")


def attach_call_graphs(patcher: Any, world_size: int) -> CallGraphs | None:
    """Wrap every diffusion-model call of `patcher` (ComfyUI's DIFFUSION_MODEL wrapper: the SP
    Sampler's steps and the loader MODEL's calls alike) in CallGraphs when they can be captured: a
    CUDA device, one rank, replicated weights. Returns the CallGraphs (its counters), else None."""
    import comfy.patcher_extension

    from .weights import SHARDED_ATTR, budget_of

    device = patcher.load_device
    if not graphs_enabled() or not isinstance(device, torch.device) or device.type != "cuda":
        return None
    if world_size != 1 or budget_of(patcher) is not None or getattr(patcher.model, SHARDED_ATTR, 0):
        return None
    graphs = CallGraphs(patcher.model.diffusion_model)
    patcher.add_wrapper_with_key(
        comfy.patcher_extension.WrappersMP.DIFFUSION_MODEL, WRAPPER_KEY, graphs.wrapper
    )
    return graphs


@dataclass
class _Graph:
    graph: torch.cuda.CUDAGraph
    inputs: list[torch.Tensor]
    outputs: list[torch.Tensor]


class CallGraphs:
    """Runs `fn(args)` (args: nested dicts/lists of tensors and plain values; fn returns a list of
    tensors) eagerly the first time a key is seen, captured the second time, replayed after."""

    def __init__(self, weights: torch.nn.Module, keep: int = KEEP) -> None:
        self.weights = weights
        self.keep = keep
        self.graphs: OrderedDict[tuple, _Graph] = OrderedDict()
        self.seen: OrderedDict[tuple, None] = OrderedDict()
        self.failed: set[tuple] = set()
        self.forms: dict[tuple, bool] = {}  # key -> the forward returned one tensor (not a list)
        self._last_key: tuple | None = None
        self.replays = 0
        self.captures = 0

    def wrapper(self, executor: Callable, *args: Any, **kwargs: Any) -> Any:
        """ComfyUI DIFFUSION_MODEL wrapper: the rest of the forward (executor) captured or replayed."""
        single = []

        def forward(call: dict) -> list[torch.Tensor]:
            out = executor(*call["args"], **call["kwargs"])
            single[:] = [torch.is_tensor(out)]
            return [out] if torch.is_tensor(out) else list(out)

        key_args = {"args": list(args), "kwargs": kwargs}
        outputs = self.run(forward, key_args)
        if single:  # ran eagerly or was captured now: remember the output's form for the replays
            self.forms[self._last_key] = single[0]
        return outputs[0] if self.forms.get(self._last_key, False) else outputs

    def run(self, fn: Callable[[Any], list[torch.Tensor]], args: Any) -> list[torch.Tensor]:
        leaves: list[torch.Tensor] = []
        key = (_signature(args, leaves, top=True), weight_addresses(self.weights))
        self._last_key = key
        if key in self.failed:
            return fn(args)
        entry = self.graphs.get(key)
        if entry is None:
            if key not in self.seen:
                self.seen[key] = None
                while len(self.seen) > 4 * self.keep:
                    self.seen.popitem(last=False)
                return fn(args)
            entry = self._capture(fn, args, leaves, key)
            if entry is None:
                return fn(args)
        self.graphs.move_to_end(key)
        for buffer, value in zip(entry.inputs, leaves):
            buffer.copy_(value)
        entry.graph.replay()
        self.replays += 1
        return [o.clone() for o in entry.outputs]  # the next replay overwrites the graph's outputs

    def _capture(self, fn, args, leaves, key) -> _Graph | None:
        inputs = [t.clone() for t in leaves]
        graph = torch.cuda.CUDAGraph()
        torch.cuda.synchronize()
        try:
            # thread_local: a capture error stays on this thread (the shm prefault thread runs meanwhile)
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                outputs = fn(_rebuild(args, iter(inputs)))
        except Exception as exc:  # not capturable: this key runs eagerly from now on
            self.failed.add(key)
            log.info(
                "model call not captured as a CUDA graph (%s: %s); it runs eagerly", type(exc).__name__, exc
            )
            torch.cuda.synchronize()
            return None
        self.captures += 1
        self.graphs[key] = _Graph(graph, inputs, list(outputs))
        while len(self.graphs) > self.keep:
            self.graphs.popitem(last=False)  # its memory pool goes with it
        return self.graphs[key]


def weight_addresses(module: torch.nn.Module) -> int:
    """A hash of where `module`'s parameters and buffers live (the inner tensors of ComfyUI's
    quantized weights included): what a captured graph reads."""
    addresses = []
    for tensor in (*module.parameters(), *module.buffers()):
        _addresses(tensor, addresses)
    return hash(tuple(addresses))


def _addresses(tensor: torch.Tensor, out: list) -> None:
    flatten = getattr(tensor, "__tensor_flatten__", None)
    if flatten is not None and type(tensor) not in (torch.Tensor, torch.nn.Parameter):
        names, _ = flatten()
        for name in names:
            _addresses(getattr(tensor, name), out)
        return
    out.append((tensor.data_ptr(), tuple(tensor.shape), tensor.dtype))


def _signature(value: Any, leaves: list[torch.Tensor], top: bool = False) -> Any:
    if torch.is_tensor(value):
        leaves.append(value)
        return ("T", tuple(value.shape), value.dtype, str(value.device), value.stride())
    if isinstance(value, dict):
        items = sorted(value.items(), key=lambda kv: repr(kv[0]))
        return ("D", tuple((k, _signature(v, leaves)) for k, v in items if k not in _UNREAD_OPTIONS))
    if isinstance(value, list | tuple):
        return (type(value).__name__, tuple(_signature(v, leaves) for v in value))
    if isinstance(value, int | float | bool | str | bytes | type(None) | torch.dtype | torch.device):
        return value
    try:
        hash(value)
        return ("O", value)  # functions, bound methods, SP state objects: the same object, the same key
    except TypeError:
        return ("id", id(value))


def _rebuild(value: Any, tensors) -> Any:
    """`value` with its tensors replaced, in _signature's order, by the next ones from `tensors`."""
    if not _has_tensor(value):
        return value
    if torch.is_tensor(value):
        return next(tensors)
    if isinstance(value, dict):
        items = sorted(value.items(), key=lambda kv: repr(kv[0]))
        rebuilt = {}
        for k, v in items:
            rebuilt[k] = v if k in _UNREAD_OPTIONS else _rebuild(v, tensors)
        return {k: rebuilt[k] for k in value}  # the caller's key order
    if isinstance(value, list | tuple):
        items = [_rebuild(v, tensors) for v in value]
        return items if isinstance(value, list) else tuple(items)
    return value


def _has_tensor(value: Any) -> bool:
    if torch.is_tensor(value):
        return True
    if isinstance(value, dict):
        return any(_has_tensor(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_has_tensor(v) for v in value)
    return False
