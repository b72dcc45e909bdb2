"""The guidance plan: how many groups a step's passes spread over (workers/strategies/guidance_plan.py)."""

from __future__ import annotations

import pytest

from ltx2_mgpu.workers.strategies.guidance_plan import plan_guidance, token_work


@pytest.mark.parametrize(
    ("world_size", "passes", "groups"),
    [
        (1, 2, 1),  # one rank: nothing to spread
        (2, 1, 1),  # cfg 1: one pass, plain SP
        (2, 2, 2),  # cond | uncond, one rank each, no head exchange
        (2, 3, 1),  # STG on 2: 2 passes on one rank would double its work
        (3, 3, 3),
        (4, 2, 2),  # CFG on 4 GPUs: 2 groups x SP 2 (SGLang's CFG x Ulysses 2)
        (4, 3, 1),  # 3 passes do not share 4 GPUs evenly: SP 4
        (4, 4, 4),  # CFG + STG + modality on 4: one pass per GPU
        (8, 2, 2),
        (8, 4, 4),
        (8, 3, 1),
    ],
)
def test_the_plan_never_adds_work_and_prefers_groups(world_size, passes, groups):
    plan = plan_guidance(world_size, passes)
    assert (plan.groups, plan.ranks_per_group) == (groups, world_size // groups)
    # No other divisor gives a rank less token work.
    best = min(token_work(g, world_size, passes) for g in range(1, world_size + 1) if world_size % g == 0)
    assert token_work(plan.groups, world_size, passes) == best


def test_a_requested_count_must_divide_the_gpus():
    assert plan_guidance(4, 3, requested=2).groups == 2  # allowed, if slower: the user asked
    with pytest.raises(
        ValueError, match=r"3 guidance groups cannot split 4 ranks evenly; choose a divisor of 4 \(1, 2, 4\)"
    ):
        plan_guidance(4, 2, requested=3)


def test_the_plan_says_what_it_does():
    assert plan_guidance(4, 2).describe(24576) == (
        "guidance: 2 passes per step over 2 groups, each SP over 2 ranks at 24,576 video tokens"
    )
    assert (
        plan_guidance(2, 3).describe() == "guidance: 3 pass(es) per step one after another, SP over 2 ranks"
    )
