"""A step's guidance passes spread over groups of ranks (the plan: workers/strategies/guidance_plan.py).

Attached at ComfyUI's CALC_COND_BATCH wrapper of the rank's sampling patcher. ComfyUI's
sampling_function calls calc_cond_batch once per step for [cond, uncond]; the post-CFG terms
(guidance.ExtraPass) then call it once each. At the first call the wrapper knows the whole step: the
conds it got and the extra passes active at this sigma. It runs every pass once, pass k on group
k mod G (sequence-parallel over that group's ranks), gathers all outputs to every rank in one
exchange, returns [cond, uncond] and keeps the extra passes' outputs for the calls that follow.
A call it did not plan for (another wrapper's, an unknown term's) runs in every group alike, as
plain SP would, so the result never depends on the plan. Under weights sharded the groups' forward
counts are evened out before the gather (NOTE [sharded lockstep]): a group with a pass fewer, or none,
runs the missing forwards as weight gathers only. Those gathers span all ranks (the FSDP2 mesh is the
whole world); the SP exchange stays inside a group, whose members always run the same forwards.
Import only after bootstrap.import_comfyui.
"""

from __future__ import annotations

from typing import Any

import comfy.patcher_extension
import torch
import torch.distributed as dist

from ....kernels import even_split, make_head_exchange
from .guidance import PASS_KEY, ExtraPass
from .sequence_parallel import SequenceParallel
from .sharded_lockstep import Lockstep, section

WRAPPER_KEY = "ltx2_mgpu_guidance_parallel"


class _OneRank:
    name, rank, world_size = "none", 0, 1


class GuidanceGroups:
    """This rank's place in G equal groups of consecutive ranks, and its group's head exchange.

    Built collectively (every rank calls dist.new_group for every group, in the same order) once per
    group count and kept with the model.
    """

    def __init__(self, groups: int, rank: int, world_size: int, device: torch.device, world: Any) -> None:
        self.groups, self.size = groups, world_size // groups
        self.index, self.member = rank // self.size, rank % self.size
        self.world = world  # the whole group's exchange: the per-step gather
        exchange: Any = _OneRank()
        for g in range(groups):
            members = list(range(g * self.size, (g + 1) * self.size))
            process_group = dist.new_group(members) if self.size > 1 else None
            if g == self.index and process_group is not None:
                exchange = make_head_exchange(process_group, device)
        self.exchange = exchange

    def gather(
        self, mine: list[torch.Tensor], per_group: int, like: torch.Tensor
    ) -> list[list[torch.Tensor]]:
        """Every group's outputs on every rank: group g's list (up to `per_group` tensors shaped like
        `like`). One all-gather over the whole group; each member sends an even share of its
        group's outputs, padded to `per_group` so no rank sends nothing."""
        numel = like.numel()
        block = per_group * numel
        flat = torch.zeros(block, dtype=like.dtype, device=like.device)
        if mine:
            flat[: len(mine) * numel] = torch.cat([t.reshape(-1) for t in mine])
        counts = even_split(block, self.size)
        start = sum(counts[: self.member])
        share = flat[start : start + counts[self.member]].view(1, -1, 1)
        everyone = self.world.all_gather_tokens(share.contiguous(), counts * self.groups).reshape(-1)
        out = []
        for g in range(self.groups):
            chunk = everyone[g * block : (g + 1) * block]
            out.append([chunk[k * numel : (k + 1) * numel].view_as(like) for k in range(per_group)])
        return out


class ParallelPasses:
    """The CALC_COND_BATCH wrapper (module doc). One per sampling job."""

    def __init__(self, groups: GuidanceGroups, lockstep: Lockstep | None = None) -> None:
        self.groups = groups
        self.lockstep = lockstep  # the sharded model's; None otherwise
        self._kept: dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}
        self.parallel_steps = 0  # steps whose passes ran spread over the groups (reported, tested)

    def install(self, patcher: Any) -> None:
        patcher.add_wrapper_with_key(comfy.patcher_extension.WrappersMP.CALC_COND_BATCH, WRAPPER_KEY, self)

    def __call__(self, executor, model, conds, x, timestep, model_options):
        kind = model_options.get("transformer_options", {}).get(PASS_KEY)
        if kind is not None:
            kept = self._kept.pop(kind, None)
            if kept is not None and kept[0] is x and kept[1] is timestep:
                return [kept[2]]
            return executor(model, conds, x, timestep, model_options)
        self._kept.clear()
        calls: list[tuple[str | int, list, dict]] = [
            (i, [cond], model_options) for i, cond in enumerate(conds) if cond is not None
        ]
        for term in model_options.get("sampler_post_cfg_function", []):
            if isinstance(term, ExtraPass) and term.active(timestep) and conds and conds[0] is not None:
                cond, options = term.call_for(conds[0], model_options)
                calls.append((term.kind, [cond], options))
        if len(calls) < 2:
            return executor(model, conds, x, timestep, model_options)
        G = self.groups.groups
        with section(self.lockstep):  # sharded: a group with a pass fewer pads its gathers
            mine = [
                executor(model, batch, x, timestep, options)[0]
                for k, (_, batch, options) in enumerate(calls)
                if k % G == self.groups.index
            ]
        per_group = -(-len(calls) // G)
        gathered = self.groups.gather(mine, per_group, x)
        outputs = {name: gathered[k % G][k // G] for k, (name, _, _) in enumerate(calls)}
        self.parallel_steps += 1
        for name, value in outputs.items():
            if isinstance(name, str):
                self._kept[name] = (x, timestep, value)
        return [outputs[i] if i in outputs else torch.zeros_like(x) for i in range(len(conds))]


def group_patcher(
    patcher: Any, groups: GuidanceGroups, model: torch.nn.Module, lockstep: Lockstep | None = None
) -> tuple[Any, SequenceParallel, ParallelPasses]:
    """`patcher` cloned with SP over this rank's guidance group and the pass-spreading wrapper;
    `lockstep` for a sharded model (NOTE [sharded lockstep])."""
    parallel = SequenceParallel.for_model(groups.exchange, model)
    clone = parallel.patch(patcher)
    passes = ParallelPasses(groups, lockstep)
    passes.install(clone)
    return clone, parallel, passes
