"""How a step's guidance passes spread over the ranks: G guidance groups of W/G ranks each.

A sampling step runs P model passes on the same latent (cond, uncond, an STG-perturbed cond, a
modality-isolated cond...). With G groups, group g runs passes g, g + G, ... with sequence parallelism
over its W/G ranks, and one gather per step hands every rank all P outputs. Per rank that is
ceil(P / G) passes over T * G / W tokens, against P passes over T / W tokens with the whole group on
each pass: the token work per rank is ceil(P / G) * G / P of plain SP, equal when G divides P, and
every pass exchanges heads over W / G ranks instead of W (less traffic per rank, none at all when G =
W), with fuller matmuls on the larger token share. So the plan takes the largest G that divides W
and leaves no rank with extra token work; plain SP (G = 1) otherwise. Pure arithmetic, no torch.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GuidancePlan:
    groups: int  # guidance groups
    ranks_per_group: int  # sequence-parallel width inside a group
    passes: int  # model passes per step the plan was made for

    def describe(self, tokens: int | None = None) -> str:
        sp = f"SP over {self.ranks_per_group} rank{'s' if self.ranks_per_group > 1 else ''}"
        where = f" at {tokens:,} video tokens" if tokens is not None else ""
        if self.groups == 1:
            return f"guidance: {self.passes} pass(es) per step one after another, {sp}{where}"
        return f"guidance: {self.passes} passes per step over {self.groups} groups, each {sp}{where}"


def token_work(groups: int, world_size: int, passes: int) -> float:
    """Tokens one rank processes per step, in units of the whole sequence (the plan's cost)."""
    return -(-passes // groups) * groups / world_size


def plan_guidance(world_size: int, passes: int, requested: int = 0) -> GuidancePlan:
    """The plan for `passes` model passes per step on `world_size` ranks. `requested`: 0 chooses
    (module doc); n > 0 asks for n groups (ValueError when n does not divide the ranks)."""
    if world_size < 1 or passes < 1:
        raise ValueError(f"a plan needs at least one rank and one pass, got {world_size} and {passes}")
    if requested:
        if world_size % requested:
            raise ValueError(
                f"{requested} guidance groups cannot split {world_size} ranks evenly; choose a divisor of "
                f"{world_size} ({', '.join(str(d) for d in divisors(world_size))}) or auto"
            )
        return GuidancePlan(requested, world_size // requested, passes)
    best = 1
    for groups in divisors(world_size):
        if groups <= passes and token_work(groups, world_size, passes) <= token_work(
            best, world_size, passes
        ):
            best = max(best, groups)
    return GuidancePlan(best, world_size // best, passes)


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]
