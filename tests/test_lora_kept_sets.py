"""LoRA sets kept on the device beside the base (NOTE [kept weight sets], engine/comfy/weight_sets.py).

In this process, each tiny release as ComfyUI loads it (LTX-2's checkpoint and its fp8 variant,
LTX-2.3's checkpoint, LTX-2.5's bf16 and int8 convrot transformers), two copies side by side: one
switched by weight_sets.make_live, one by ComfyUI's own load_models_gpu as native switching does.
After every switch of a sequence that comes back to earlier sets (A, none, A, B, A, A+B, A, none)
both hold the same weights bit for bit, so every forward is the fused one; the sets come back
without fusing again ("kept"), the third set lets the oldest go, and removing the LoRA gives the
fresh base bit for bit. ComfyUI's own unpatching in between, a set that does not fit (fused as
ComfyUI does, saying why) and LTX2_MGPU_LORA_SETS=fused keep the same bits.

Through a worker group (2 CPU workers): the MGPU LoRA switches report how each set was made live,
and the weights equal a fused group's bit for bit (the console line: tests/test_lora_console.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from comfyui_harness import comfyui_in_process, comfyui_root

from ltx2_mgpu.workers.embedded.tiny_variants import make_tiny_lora
from ltx2_mgpu.workers.rank.ops_lora import weights_fingerprint

pytestmark = pytest.mark.comfyui

A, B = "a", "b"
SEQUENCE = [(A,), (), (A,), (B,), (A,), (A, B), (A,), ()]
# With two sets kept: A built, base, A kept, B built, A kept, A+B built (B, the oldest, let go), A kept.
HOW = ["built", "base", "kept", "built", "kept", "built", "kept", "base"]


@pytest.fixture(scope="module")
def comfy() -> Iterator:
    with comfyui_in_process(comfyui_root()) as mm, torch.inference_mode():
        yield mm


@pytest.fixture(scope="module")
def releases(lora_files, tiny23, tiny25, tmp_path_factory) -> dict[str, tuple[Path, dict[str, tuple]]]:
    """file kind -> (the diffusion model's file, set name -> LoRA chain ((path, strength), ...))."""
    folder = tmp_path_factory.mktemp("kept_sets")
    second_23 = make_tiny_lora(folder / "second-23.safetensors", tiny23.checkpoint, rank=3, seed=7)
    two = {A: ((lora_files["lora"], 1.0),), B: ((lora_files["alpha"], 0.7),)}
    return {
        "2": (lora_files["checkpoint"], two),
        "2-fp8": (lora_files["fp8"], two),
        "2.3": (tiny23.checkpoint, {A: ((tiny23.lora, 1.0),), B: ((second_23, -0.6),)}),
        "2.5": (tiny25.transformer, {A: ((tiny25.lora, 1.0),), B: ((tiny25.lora, 0.4),)}),
        "2.5-int8": (tiny25.transformer_int8, {A: ((tiny25.lora, 1.0),), B: ((tiny25.lora, 0.4),)}),
    }


def load(path: Path):
    from ltx2_mgpu.workers.engine.comfy.model import ComfyModel

    dtype = None if ("fp8" in path.name or "int8" in path.name) else torch.float32
    return ComfyModel.load(path, torch.device("cpu"), dtype, with_vae=False)


def chain(sets: dict, names: tuple) -> tuple:
    return tuple(entry for name in names for entry in sets[name])


def fingerprint(model) -> str:
    return weights_fingerprint([model.diffusion_model])


@pytest.mark.parametrize("kind", ["2", "2-fp8", "2.3", "2.5", "2.5-int8"])
def test_kept_sets_hold_the_bits_comfyui_fuses(comfy, releases, kind):
    from ltx2_mgpu.workers.engine.comfy.lora import lora_patcher, set_key
    from ltx2_mgpu.workers.engine.comfy.weight_sets import make_live
    from ltx2_mgpu.workers.engine.comfy.weights import make_resident

    path, sets = releases[kind]
    kept, fused = load(path), load(path)
    base = fingerprint(kept)
    assert fingerprint(fused) == base
    hows, prints = [], set()
    for names in SEQUENCE:
        loras = chain(sets, names)
        kept_patcher, _, _ = lora_patcher(kept.base_patcher, loras)
        fused_patcher, _, _ = lora_patcher(fused.base_patcher, loras)
        hows.append(make_live(kept, kept_patcher, set_key(loras)).how)
        make_resident(fused_patcher)  # native: ComfyUI restores the last set and patches this one
        now = fingerprint(kept)
        assert now == fingerprint(fused), (kind, names)
        assert (now == base) == (not names), (kind, names)
        prints.add(now)
    assert hows == HOW, kind
    assert len(prints) == 4  # base, A, B, A+B: each set changed the weights
    assert fingerprint(kept) == base  # the LoRA removed: the fresh base, bit for bit


def test_comfyuis_own_unpatching_and_fused_sets_keep_the_bits(comfy, releases, monkeypatch):
    from ltx2_mgpu.workers.engine.comfy.lora import lora_patcher, set_key
    from ltx2_mgpu.workers.engine.comfy.weight_sets import ENV, ENV_KEEP_FREE, make_live
    from ltx2_mgpu.workers.engine.comfy.weights import make_resident

    path, sets = releases["2"]
    model, reference = load(path), load(path)
    base = fingerprint(model)

    def switch(names: tuple) -> str:
        loras = chain(sets, names)
        patcher = lora_patcher(model.base_patcher, loras)[0]
        result = make_live(model, patcher, set_key(loras))
        make_resident(lora_patcher(reference.base_patcher, loras)[0])
        assert fingerprint(model) == fingerprint(reference), names
        return result

    assert switch((A,)).how == "built"
    model.patcher.unpatch_model()  # ComfyUI writes its backup back: the base tensors we left there
    assert fingerprint(model) == base
    assert switch((A,)).how == "built"  # what ComfyUI changed is not trusted: built again
    monkeypatch.setenv(ENV_KEEP_FREE, "1.0")
    result = switch((B,))
    assert (result.how, result.kept_bytes) == ("fused", 0)
    assert f"left free ({ENV_KEEP_FREE})" in result.reason and "GiB is free" in result.reason
    monkeypatch.delenv(ENV_KEEP_FREE)
    assert switch((A,)).how == "built"  # from ComfyUI's fused B: the base written back first
    assert switch(()).how == "base" and fingerprint(model) == base
    monkeypatch.setenv(ENV, "fused")
    assert [switch(names).how for names in ((A,), (), (B,))] == ["fused", "base", "fused"]
    monkeypatch.setenv(ENV, "sometimes")
    with pytest.raises(ValueError, match=f"{ENV}='sometimes': use auto"):
        switch((A,))


def test_mgpu_lora_switches_on_the_group_say_how_and_match_a_fused_group(make_group, lora_files, monkeypatch):
    from ltx2_mgpu.workers.wire.lora_files import describe_switch

    a, b = lora_files["lora"], lora_files["alpha"]
    sequence = (((a, 1.0),), (), ((a, 1.0),), ((b, 0.7),), ((a, 1.0),))
    lines, prints = {}, {}
    for mode in ("auto", "fused"):
        monkeypatch.setenv("LTX2_MGPU_LORA_SETS", mode)  # the workers take the environment at start
        group = make_group("cpu:2")
        group.run(
            "load_model",
            {
                "checkpoint": str(lora_files["checkpoint"]),
                "dtype": "float32",
                "backend": "comfy",
                "comfyui_root": str(comfyui_root()),
            },
        )
        lines[mode], prints[mode] = [], []
        for loras in sequence:
            replies = group.run("set_loras", {"loras": [[str(p), s] for p, s in loras]})
            assert len({(r["how"], r["fused"]) for r in replies}) == 1  # every rank alike
            lines[mode].append(describe_switch(replies[0], 2))
            states = group.run("lora_state")
            assert states[0] == states[1]
            prints[mode].append(states[0]["fingerprint"])
    assert [line.split(" in ")[0] for line in lines["auto"]] == [
        "LoRA set fused",
        "LoRA set removed",
        "LoRA set switched",
        "LoRA set fused",
        "LoRA set switched",
    ]
    assert "kept beside the base" in lines["auto"][0] and "nothing fused" in lines["auto"][2]
    assert all("LTX2_MGPU_LORA_SETS=fused" in line for line in lines["fused"] if "removed" not in line)
    assert prints["auto"] == prints["fused"]
    with_a, base, again_a, with_b, last_a = prints["auto"]
    assert with_a == again_a == last_a and len({base, with_a, with_b}) == 3


@pytest.mark.parametrize("kind", ["2", "2.3", "2.5"])
def test_unfused_sets_leave_the_base_and_add_the_lora_in_each_forward(comfy, releases, monkeypatch, kind):
    """LTX2_MGPU_LORA_SETS=unfused (auto's choice when a kept set does not fit but its LoRAs do):
    ComfyUI's bypass injection adds each LoRA in the layer's forward; the weights stay the base's bit
    for bit, and every patched layer's output equals the fused layer's within float32 rounding."""
    import comfy.utils

    from ltx2_mgpu.workers.engine.comfy.lora import lora_patcher, set_key
    from ltx2_mgpu.workers.engine.comfy.weight_sets import ENV, make_live
    from ltx2_mgpu.workers.engine.comfy.weights import make_resident

    monkeypatch.setenv(ENV, "unfused")
    path, sets = releases[kind]
    unfused, fused = load(path), load(path)
    base = fingerprint(unfused)
    hows, worst = [], 0.0
    for names in [(A,), (), (A,), (B,), (A, B)]:
        loras = chain(sets, names)
        patcher = lora_patcher(unfused.base_patcher, loras)[0]
        switch = make_live(unfused, patcher, set_key(loras))
        hows.append(switch.how)
        reference = lora_patcher(fused.base_patcher, loras)[0]
        make_resident(reference)
        assert fingerprint(unfused) == base, names
        for key in reference.patches:
            layer = key[: -len(".weight")]
            ours, theirs = (
                comfy.utils.get_attr(unfused.patcher.model, layer),
                comfy.utils.get_attr(fused.patcher.model, layer),
            )
            x = torch.randn(3, ours.weight.shape[1], generator=torch.Generator().manual_seed(len(hows)))
            expected = theirs(x)
            worst = max(worst, float((ours(x) - expected).abs().max() / expected.abs().max()))
        if names:
            assert switch.patcher is not patcher and not switch.patcher.patches  # sampling loads the clone
    print(f"\n[unfused {kind}] largest layer error vs fused: {worst:.1e}")
    assert hows == ["unfused", "base", "unfused", "unfused", "unfused"]
    # The next model call asks for the same set with the patcher it samples with: nothing to switch.
    again = make_live(unfused, lora_patcher(unfused.base_patcher, loras)[0], set_key(loras))
    assert again.how == "live" and again.patcher is switch.patcher
    assert 0 < worst <= 1e-5
