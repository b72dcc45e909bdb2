"""compile_blocks on ComfyUI's engine: torch.compile of the transformer blocks as ComfyUI's model runs
them (NOTE [compiled blocks]).

NOTE [compiled blocks]: each block of ComfyUI's LTXAVModel is compiled in place (nn.Module.compile:
the module's call runs through torch.compile; the module, its parameters and their names stay as they
are, so LoRA patching, offloaded and sharded weights and the CUDA graphs' weight keys see the same
model). ComfyUI's forward and its loop over the blocks stay eager: they build small tensors from
Python values, and the blocks hold nearly all the work. Every way ComfyUI calls a block goes through
the module (its loop, and the block replace patches of sequence parallelism and CUDA graphs, whose
`original_block` calls it), so all of them run the compiled blocks.
Under sequence parallelism the head exchange inside the attention is either our custom ops (the IPC
kernel: kernels/ops.py, traced through with their fake implementations) or, on the torch.distributed
fallback, a collective that Dynamo leaves out of the graph (a graph break: the exchange runs eagerly
between two compiled pieces). The blocks are alike, so one compiled graph serves all of them for a
shape; a new shape (resolution, frame count, batch) compiles again on its first step.
On a CPU torch's inductor needs a C++ compiler (wire/capabilities.py checks it in the node).
"""

from __future__ import annotations

import torch

from .model import ComfyModel

COMPILED_KEY = "compile_blocks"
# Recompiles Dynamo allows per code object before it runs that code eagerly: the blocks share one
# code object, and a job's shapes (cond and uncond batched or apart, stage 1 and 2, with and without
# audio) each need an entry. torch's default (8) was reached by a two-stage workflow with guidance.
RECOMPILE_LIMIT = 64


def set_compiled(model: ComfyModel, enabled: bool) -> None:
    """Compile `model`'s transformer blocks (or return them to eager). Local, no collective; the
    compile itself happens on each new shape's first call."""
    if enabled == is_compiled(model):
        return
    if enabled:
        _raise_recompile_limit()
    for block in model.diffusion_model.transformer_blocks:
        if enabled:
            # Static shapes: each new shape compiles its own graph. Dynamo's automatic dynamic shapes
            # (on the second shape) failed inside inductor for fp8 scaled layers on an H200
            # ("vr must not be None for symbol"), and a job has only a few shapes.
            block.compile(backend="inductor", dynamic=False)
        else:
            # nn.Module.compile keeps the compiled call here; without it the module runs eagerly.
            block._compiled_call_impl = None
    model.extras[COMPILED_KEY] = enabled


def is_compiled(model: ComfyModel) -> bool:
    return bool(model.extras.get(COMPILED_KEY, False))


def _raise_recompile_limit() -> None:
    config = torch._dynamo.config
    name = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"  # before torch 2.7
    if getattr(config, name) < RECOMPILE_LIMIT:
        setattr(config, name, RECOMPILE_LIMIT)
