"""CUDA graphs of the transformer blocks of model calls on a rank (NOTE [call graphs]).

NOTE [call graphs]: at the token counts of a template's stage 1 (about 3,500 video tokens for LTX-2.3
at 1280x704), a 22B model call is bound by the CPU, not the GPU: measured on an H200 with the fp8
file, 163 ms of kernels in a 600 ms call, the rest Python launching ~5,000 kernels (ComfyUI's
quantized-tensor dispatch, fp8 activation quantizing, AdaLN, RoPE). Native ComfyUI pays the same.
A sampler calls the model with the same shapes at every step, so the second forward with a key
captures its transformer blocks (block 0 to the last, where nearly all kernels are) as one CUDA graph
and later forwards replay it: the same kernels in the same order on the same weights, so the result is
the eager one bit for bit. Only the blocks: the forward's input stage builds small tensors from Python
values on the host (ComfyUI's latent_to_pixel_coords), which a capture cannot hold.

What makes a replay safe:
- The key is everything the blocks may read on the host: block 0's arguments' structure, Python
  values (transformer_options' patches and flags), shapes/dtypes/strides and which arguments are
  one tensor, and the addresses of the model's weights (a reload or a LoRA switch that moves a weight
  makes a new key; a patch written into the same memory is read by the replay, as by an eager call).
  ComfyUI's cond "uuids" are left out (they change every job and the model does not read them).
- Block 0's tensors are copied into the graph's own input buffers before each replay; the later
  blocks' arguments are the same tensors (mapped onto those buffers while capturing) and the hidden
  states the previous block returned. A block that reads a device value on the host (`.item()`)
  cannot be captured: the forward then reruns eagerly and the key stays eager.
- The first forward with a key runs eagerly, so whatever the model caches on first use is made
  outside the graph's memory (and the IPC exchange grows its buffers to the forward's size). It runs
  on the side stream the capture will use (PyTorch's warm-up rule): a library that sets itself up per
  stream on first use (comfy_kitchen's cuBLAS int8 path at LTX-2.5's audio and text row counts) does
  so there, not inside the capture, where that set-up fails and the key would stay eager.
- Replicated weights only: FSDP2's gathers count calls on the host, and offloaded weights are copied
  from host memory per call.
- On a group of several ranks the graph holds sequence parallelism too: our block patches call SP's
  (which cut the tokens at block 0 and gather them at the last), and the head exchanges inside the
  attention are the IPC kernel's, which a graph can hold: its buffers are fixed (cudaMalloc'd once,
  peers' addresses mapped once), its output tensors come from the graph's pool, and the op counter
  that picks the slot and the arrival word to wait for lives on the device and is bumped by the kernel
  itself (NOTE [epoch] in kernels/csrc/exchange.h), so a replay runs op e+1 where an eager call would.
  Every rank replays the same ops in the same order, so ranks whose capture failed and reran eagerly
  stay in step with ranks that replay. Growing the exchange's buffers (a larger forward) moves them:
  the buffers' generation is part of the key. The torch.distributed fallback counts and stages on the
  host, so a group without the kernel runs eagerly, as do guidance groups.
Each graph keeps its own memory pool (about one forward's activations); the two most recent keys are
kept (a template's stage 1 and stage 2). On by default; LTX2_MGPU_CUDA_GRAPHS=0 turns it off.
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


# On: bit for bit the eager result on an H200 (tests/test_call_graphs.py), 2.3x faster steps at 3,520
# tokens (docs/PERFORMANCE.md). LTX2_MGPU_CUDA_GRAPHS=0 gives the graphs' memory pools back.
DEFAULT = "1"


def graphs_enabled() -> bool:
    return os.environ.get(ENV, DEFAULT).strip().lower() not in ("0", "off", "false", "no")


def attach_call_graphs(patcher: Any, exchange: Any, enabled: bool | None = None) -> BlockGraphs | None:
    """Capture the transformer blocks of `patcher`'s forwards (the SP Sampler's steps and the loader
    MODEL's calls alike) when they can be: a CUDA device, replicated weights, one rank or a group whose
    sequence parallelism (`patcher` patched by SequenceParallel over `exchange`) runs on the IPC kernel.
    Installs a block replace patch on every block (ComfyUI's "dit" double_block patches; on several
    ranks ours call SP's) and a DIFFUSION_MODEL wrapper that reruns a forward whose capture failed.
    Returns the BlockGraphs (its counters), else None. `enabled`: None reads LTX2_MGPU_CUDA_GRAPHS
    (benchmarks pass it)."""
    from .layer_split import layer_range
    from .weights import SHARDED_ATTR, budget_of

    device = patcher.load_device
    if not (graphs_enabled() if enabled is None else enabled):
        return None
    if not isinstance(device, torch.device) or device.type != "cuda":
        return None
    if budget_of(patcher) is not None or getattr(patcher.model, SHARDED_ATTR, 0):
        return None
    if layer_range(patcher.model) is not None:  # NOTE [layers]: hand-overs by torch.distributed broadcast
        return None
    inner = _block_patches(patcher)
    exchange_key, parallel = None, None
    if exchange.world_size > 1:
        exchange_key = getattr(exchange, "capture_key", None)
        if exchange_key is None:  # the torch.distributed fallback stages and counts on the host
            return None
        parallel = _sequence_parallel_over(patcher, exchange)
        if parallel is None:  # guidance groups, another node's block patches
            return None
    elif inner:  # another node's block replace patches: ours would take their place
        return None
    import comfy.patcher_extension

    blocks = patcher.model.diffusion_model.transformer_blocks
    graphs = BlockGraphs(
        patcher.model.diffusion_model,
        len(blocks) - 1,
        exchange_key=exchange_key,
        on_replay=None if parallel is None else parallel.count_replayed_forward,
    )
    for index in range(len(blocks)):
        patch = graphs.block_patch(index, inner.get(("double_block", index)))
        patcher.set_model_patch_replace(patch, "dit", "double_block", index)
    patcher.add_wrapper_with_key(
        comfy.patcher_extension.WrappersMP.DIFFUSION_MODEL, WRAPPER_KEY, graphs.wrapper
    )
    return graphs


def _block_patches(patcher: Any) -> dict:
    options = patcher.model_options.get("transformer_options", {})
    return dict(options.get("patches_replace", {}).get("dit", {}))


def _sequence_parallel_over(patcher: Any, exchange: Any) -> Any:
    """The SequenceParallel whose block patches `patcher` carries on every block, over `exchange`; else None."""
    from .sequence_parallel import SP_KEY

    parallel = patcher.model_options.get("transformer_options", {}).get(SP_KEY)
    blocks = len(patcher.model.diffusion_model.transformer_blocks)
    patched = {key for key in _block_patches(patcher) if key[0] == "double_block"}
    return parallel if getattr(parallel, "exchange", None) is exchange and len(patched) == blocks else None


class CaptureAborted(Exception):
    """A block raised while the blocks were being captured: the forward is run again, eagerly."""


@dataclass
class _Forward:
    """One forward's passage through the blocks: mode "eager", "capture" or "replay"."""

    mode: str
    key: tuple | None = None
    leaves: list[torch.Tensor] | None = None  # the block-0 arguments' tensors (kept alive: ids stay unique)
    static: dict[int, torch.Tensor] | None = None  # id(argument tensor) -> the graph's input buffer
    graph: torch.cuda.CUDAGraph | None = None
    capture: Any = None  # the open torch.cuda.graph context
    outputs: tuple | None = None
    warm_up: Any = None  # the open torch.cuda.stream context of a key's first (eager) forward


class BlockGraphs:
    """NOTE [call graphs]: the transformer blocks of one forward as one CUDA graph, per key.

    The first forward with a key runs eagerly, the second is captured from block 0 to the last block
    (ComfyUI's loop between blocks only builds the next block's arguments) and replayed, later ones
    replay at block 0 and pass the result through the other blocks' patches. The blocks' arguments are
    the same tensors for every block (contexts, timestep embeddings, positions) except the hidden
    states each block returns, so block 0's tensors become the graph's inputs and the later blocks'
    arguments are mapped onto them while capturing."""

    def __init__(
        self,
        weights: torch.nn.Module,
        last: int,
        keep: int = KEEP,
        exchange_key: Callable[[], Any] | None = None,
        on_replay: Callable[[], None] | None = None,
    ) -> None:
        self.weights = weights
        self.last = last
        self.keep = keep
        self.exchange_key = exchange_key  # the IPC exchange's buffers' identity (several ranks), else None
        self.on_replay = on_replay  # counts a replayed forward where the wrapped patches would have (SP)
        self.graphs: OrderedDict[tuple, _Graph] = OrderedDict()
        self.seen: OrderedDict[tuple, None] = OrderedDict()
        self.failed: set[tuple] = set()
        self.replays = 0
        self.captures = 0
        self._now: _Forward | None = None
        self._stream: torch.cuda.Stream | None = None  # the warm-ups' and captures' side stream

    def counts(self) -> list[int]:
        """[replays, captures, keys that could not be captured and run eagerly] (for the replies)."""
        return [self.replays, self.captures, len(self.failed)]

    def block_patch(
        self, index: int, inner: Callable[[dict, dict], dict] | None = None
    ) -> Callable[[dict, dict], dict]:
        """The block replace patch of block `index`; `inner`: the patch it wraps (SP's), else the block."""

        def run(args: dict, extra: dict) -> dict:
            block = extra["original_block"] if inner is None else lambda local: inner(local, extra)
            return self._block(index, args, block)

        return run

    def wrapper(self, executor: Callable, *args: Any, **kwargs: Any) -> Any:
        """DIFFUSION_MODEL wrapper: a forward whose capture failed runs again (its key is now eager);
        a capture left open by an error outside the blocks is closed."""
        try:
            return executor(*args, **kwargs)
        except Exception as exc:
            capturing = self._now is not None and self._now.capture is not None
            if not (capturing or isinstance(exc, CaptureAborted)):
                raise
            self._close(failed=True)  # this key runs eagerly from now on
            return executor(*args, **kwargs)
        finally:
            self._close(failed=True)

    def _block(self, index: int, args: dict, original: Callable[[dict], dict]) -> dict:
        if index == 0:
            self._close(failed=True)  # a forward that never reached its last block
            self._now = self._begin(args)
        now = self._now
        if now is None or now.mode == "eager":
            out = original(args)
        elif now.mode == "replay":
            out = {"img": now.outputs} if index == 0 else {"img": args["img"]}
        else:
            local = _mapped(args, now.static)
            try:
                out = original(local)
            except Exception as exc:
                self._close(failed=True)
                log.warning(  # in the worker's console: a forward that stays eager is slower
                    "transformer blocks not captured as a CUDA graph (%s: %s); eager", type(exc).__name__, exc
                )
                raise CaptureAborted from exc
            if index == self.last:
                now.outputs = tuple(out["img"])
                now.capture.__exit__(None, None, None)
                now.capture = None
                self.captures += 1
                self.graphs[now.key] = _Graph(
                    now.graph, [now.static[id(t)] for t in now.leaves], list(now.outputs)
                )
                while len(self.graphs) > self.keep:
                    self.graphs.popitem(last=False)  # its memory pool goes with it
                now.graph.replay()
        if index == self.last:
            self._now = None
            self._end_warm_up(now)
        return out

    def _begin(self, args: dict) -> _Forward:
        leaves: list[torch.Tensor] = []
        signature = _signature(args, leaves)
        first: dict[int, int] = {}
        aliases = tuple(
            first.setdefault(id(t), i) for i, t in enumerate(leaves)
        )  # which arguments are one tensor
        leaves = [t for i, t in enumerate(leaves) if aliases[i] == i]
        exchange = None if self.exchange_key is None else self.exchange_key()
        key = (signature, aliases, weight_addresses(self.weights), exchange)
        if key in self.failed:
            return _Forward("eager")
        entry = self.graphs.get(key)
        if entry is not None:
            self.graphs.move_to_end(key)
            for buffer, value in zip(entry.inputs, leaves):
                buffer.copy_(value)
            entry.graph.replay()
            self.replays += 1
            if self.on_replay is not None:
                self.on_replay()
            return _Forward("replay", key, outputs=tuple(entry.outputs))
        if key not in self.seen:
            self.seen[key] = None
            while len(self.seen) > 4 * self.keep:
                self.seen.popitem(last=False)
            return _Forward("eager", key, warm_up=self._begin_warm_up(leaves))
        static = {id(t): t.clone() for t in leaves}
        graph = torch.cuda.CUDAGraph()
        torch.cuda.synchronize()
        # thread_local: a capture error stays on this thread (the shm prefault thread runs meanwhile)
        capture = torch.cuda.graph(graph, stream=self._side_stream(), capture_error_mode="thread_local")
        capture.__enter__()
        return _Forward("capture", key, leaves, static, graph, capture)

    def _side_stream(self) -> torch.cuda.Stream:
        if self._stream is None:
            self._stream = torch.cuda.Stream()
        return self._stream

    def _begin_warm_up(self, leaves: list[torch.Tensor]) -> Any:
        """Run the rest of this eager forward on the capture's stream, after all queued work."""
        if not any(t.is_cuda for t in leaves):  # graphs need CUDA; the CPU tests drive the logic only
            return None
        stream = self._side_stream()
        stream.wait_stream(torch.cuda.current_stream())
        context = torch.cuda.stream(stream)
        context.__enter__()
        return context

    def _end_warm_up(self, now: _Forward | None) -> None:
        if now is None or now.warm_up is None:
            return
        context, now.warm_up = now.warm_up, None
        context.__exit__(None, None, None)
        torch.cuda.current_stream().wait_stream(self._side_stream())  # its outputs are read there

    def _close(self, failed: bool) -> None:
        now, self._now = self._now, None
        self._end_warm_up(now)
        if now is None or now.capture is None:
            return
        try:
            now.capture.__exit__(RuntimeError, RuntimeError("capture abandoned"), None)
        except Exception:  # the capture was already invalid: nothing of it is kept
            pass
        torch.cuda.synchronize()
        if failed:
            self.failed.add(now.key)


def _mapped(value: Any, static: dict[int, torch.Tensor]) -> Any:
    """`value` with every tensor that is one of block 0's arguments replaced by its graph buffer."""
    if not _has_tensor(value):
        return value
    if torch.is_tensor(value):
        return static.get(id(value), value)
    if isinstance(value, dict):
        return {k: _mapped(v, static) for k, v in value.items()}
    if isinstance(value, list | tuple):
        items = [_mapped(v, static) for v in value]
        return items if isinstance(value, list) else tuple(items)
    fields = _holder_fields(value)
    if fields is not None:  # a copy of the holder that reads the buffers
        copy = object.__new__(type(value))
        for name, field in fields.items():
            object.__setattr__(copy, name, _mapped(field, static))
        return copy
    return value


def _holder_fields(value: Any) -> dict[str, Any] | None:
    """The attributes of a plain object that carries tensors between blocks (ComfyUI's
    CompressedTimestep: a tensor and the ints that expand it), else None. A new such object is built
    every forward, so it is keyed and mapped by what it holds, not by its identity."""
    if isinstance(value, torch.nn.Module | type) or callable(value):
        return None
    names = getattr(type(value), "__slots__", None)
    if isinstance(names, str):
        names = (names,)
    if names is not None:
        fields = {name: getattr(value, name) for name in names if hasattr(value, name)}
    elif hasattr(value, "__dict__"):
        fields = dict(vars(value))
    else:
        return None
    if not any(torch.is_tensor(v) for v in fields.values()):
        return None
    return fields


@dataclass
class _Graph:
    graph: torch.cuda.CUDAGraph
    inputs: list[torch.Tensor]
    outputs: list[torch.Tensor]


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


def _signature(value: Any, leaves: list[torch.Tensor]) -> Any:
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
    fields = _holder_fields(value)
    if fields is not None:
        items = sorted(fields.items())
        return ("H", type(value).__qualname__, tuple((k, _signature(v, leaves)) for k, v in items))
    try:
        hash(value)
        return ("O", value)  # functions, bound methods, SP state objects: the same object, the same key
    except TypeError:
        return ("id", id(value))


def _has_tensor(value: Any) -> bool:
    if torch.is_tensor(value):
        return True
    if isinstance(value, dict):
        return any(_has_tensor(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_has_tensor(v) for v in value)
    return _holder_fields(value) is not None
