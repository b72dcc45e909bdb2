"""NOTE [sharded lockstep]: weights sharded with work that is not the same on every rank.

Under weights sharded every transformer block's forward all-gathers that block's weights over all
ranks (NOTE [sharded] in weights.py), so every rank must put the same number of forwards through the
blocks, in the same order. Two parts of a step give the ranks different work between collectives:
TDP deals its tiles round-robin (a rank may hold one tile more than another, or none), and guidance
groups run different passes (a group may run one pass fewer when the groups do not divide the
passes). ComfyUI's cond batching can also run cond and uncond as one forward or two, from the input
size and the free memory it sees.

The ranks cannot agree on a count first: a rank only knows its own count once its forwards have run,
and they cannot run while another rank waits in a collective of its own. So a section runs in slots.
Inside a section every forward through the blocks opens with a one-integer all-reduce (MAX, over the
default group, the one FSDP2 gathers over) saying "I have a forward"; a rank whose own forwards are
done loops on the same all-reduce saying "I have none", and while any rank still has one it runs a
padding forward: every block unsharded and resharded in block order, which is the collective sequence
of a forward (FSDP2's forward does no other collective; reduce-scatters are backward only). The loop
ends when every rank says none. Each slot is therefore one all-reduce then the blocks' gathers on
every rank, whatever the tiles' or passes' shapes (only weights are gathered) and however ComfyUI
batched cond and uncond. A padding forward computes nothing and changes no number. Replicated and
offloaded models never come here.
Import only after bootstrap.import_comfyui.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

import torch
import torch.distributed as dist

# Key in ComfyModel.extras: the model's Lockstep, made at its first use.
EXTRAS_KEY = "sharded_lockstep"


class Lockstep:
    """Keeps this rank's forwards through the sharded blocks in step with the other ranks' (module NOTE)."""

    def __init__(self, blocks: torch.nn.ModuleList, device: torch.device) -> None:
        self.blocks = list(blocks)
        self.device = device
        self.active = False  # inside a section: forwards announce themselves
        self.padded = 0  # gather-only forwards this rank ran (reported, tested)
        # prepend: the announcement must come before FSDP2's own pre-hook gathers block 0.
        self._hook = self.blocks[0].register_forward_pre_hook(self._announce, prepend=True)

    def _announce(self, module: torch.nn.Module, args: Any) -> None:
        if self.active:
            self._slot(has_forward=True)

    def _slot(self, has_forward: bool) -> bool:
        """One slot's all-reduce: whether any rank has a forward in it."""
        flag = torch.tensor([int(has_forward)], dtype=torch.int32, device=self.device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return has_forward or bool(flag.item())  # a rank with a forward never waits for the answer

    @contextmanager
    def section(self) -> Iterator[None]:
        """Work whose forwards may differ between ranks; on leaving it, pad (collective). An error inside
        only ends the announcing: the other ranks are then stuck in a collective anyway, and later
        forwards outside a section must not announce."""
        self.active = True
        try:
            yield
        finally:
            self.active = False
        self._pad()

    def _pad(self) -> int:
        """Padding forwards until no rank has a forward left; returns how many this rank ran."""
        missing = 0
        while self._slot(has_forward=False):
            for block in self.blocks:
                block.unshard()
                block.reshard()
            missing += 1
        self.padded += missing
        return missing


def section(lockstep: Lockstep | None) -> AbstractContextManager[None]:
    """lockstep.section(), or nothing for a model that is not sharded."""
    return nullcontext() if lockstep is None else lockstep.section()


def lockstep_for(model: Any) -> Lockstep | None:
    """The Lockstep of a sharded ComfyModel (made once, kept with the model); None when not sharded or on
    one rank (nothing to keep step with)."""
    from .weights import is_sharded

    if not is_sharded(model) or dist.get_world_size() == 1:
        return None
    kept = model.extras.get(EXTRAS_KEY)
    if kept is None:
        kept = Lockstep(model.diffusion_model.transformer_blocks, model.patcher.load_device)
        model.extras[EXTRAS_KEY] = kept
    return kept
