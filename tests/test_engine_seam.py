"""The engine seam (NOTE [engine seam] in workers/engine/protocol.py): handlers in rank/ never ask which
engine runs; strategies/ plans without ComfyUI or ltx-core; ComfyUI's engine never imports ltx-core's;
each engine's capability table (wire/capabilities.py) says what its code serves; a group on ComfyUI's
engine never imports ltx-core."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest
import torch

from ltx2_mgpu.workers.engine.protocol import Engine
from ltx2_mgpu.workers.wire.capabilities import CAPABILITIES

WORKERS = Path(__file__).resolve().parent.parent / "workers"
ENGINE_TYPES = {"ComfyModel", "LoadedModel", "ComfyEngine", "LtxCoreEngine", "SequenceParallelModel"}
# A command and the Engine method that serves it.
COMMAND_METHODS = {
    "load_model": "load", "set_compiled": "set_compiled", "sample": "sample", "forward": "forward",
    "tdp_upscale": "tdp_upscale", "vae_decode": "vae_decode", "vae_encode": "vae_encode",
    "set_loras": "set_loras", "lora_state": "lora_state", "encode_text": "text_head",
    "encode_gemma4": "encode_gemma4", "comfy_model_call": "model_call", "comfy_text_embeds": "text_embeds",
    "load_random_model": "bench", "bench_forward": "bench", "comfy_load_random_model": "bench",
    "comfy_bench_step": "bench",
}  # fmt: skip


def _imports(path: Path) -> set[str]:
    """Every module `path` imports, anywhere in the file (absolute names; relative ones resolved)."""
    package = list(path.relative_to(WORKERS.parent).with_suffix("").parts[:-1])
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                found.add(".".join([*base, *(node.module or "").split(".")]).rstrip("."))
            else:
                found.add(node.module or "")
    return found


def _files(room: str) -> list[Path]:
    return sorted((WORKERS / room).rglob("*.py"))


def test_strategies_import_neither_comfyui_nor_ltx_core():
    wrong = {
        str(path.relative_to(WORKERS)): sorted(
            m for m in _imports(path) if m.split(".")[0] in ("comfy", "ltx_core")
        )
        for path in _files("strategies")
    }
    assert _files("strategies") and {k: v for k, v in wrong.items() if v} == {}


def test_comfyuis_engine_never_imports_ltx_core_or_its_engine():
    wrong = {}
    for path in _files("engine/comfy"):
        bad = sorted(
            m for m in _imports(path) if m.startswith("ltx_core") or "engine.ltxcore" in m or m == "ltxcore"
        )
        if bad:
            wrong[str(path.relative_to(WORKERS))] = bad
    assert wrong == {}


def test_no_isinstance_on_engine_types_outside_the_engines():
    """A handler that asks which engine it runs on is a seam missing (STYLE.md, "Seams chosen once")."""
    wrong = []
    for room in ("rank", "strategies", "group", "wire", "text"):
        for path in _files(room):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance":
                    names = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
                    names |= {n.attr for n in ast.walk(node.args[1]) if isinstance(n, ast.Attribute)}
                    if names & ENGINE_TYPES:
                        wrong.append(f"{path.relative_to(WORKERS)}:{node.lineno}")
                elif isinstance(node, ast.ImportFrom) and ".engine.comfy" in f".{node.module}":
                    wrong.append(f"{path.relative_to(WORKERS)}:{node.lineno} imports {node.module}")
    assert wrong == []


@pytest.mark.parametrize("name", sorted(CAPABILITIES))
def test_each_engine_serves_what_its_table_says(name):
    """The table the nodes refuse from and the engine's code agree: a command the table lists is a method
    the engine implements; one it does not list answers with the engine's refusal."""
    from ltx2_mgpu.workers.engine.engines import make_engine

    engine = make_engine(name)
    caps = CAPABILITIES[name]
    assert engine.capabilities is caps and engine.name == caps.engine
    for command, method in COMMAND_METHODS.items():
        overridden = getattr(type(engine), method) is not getattr(Engine, method)
        if caps.serves(command):
            assert overridden, f"{name} lists {command} but does not implement Engine.{method}"
        elif method != "bench":
            assert not overridden, f"{name} implements Engine.{method} but its table leaves out {command}"
            arity = len(inspect.signature(getattr(Engine, method)).parameters) - 1
            with pytest.raises(ValueError, match=caps.refusal.split(":")[0]):
                getattr(engine, method)(*[None] * arity)


def test_a_rank_refuses_a_second_engine():
    from rank_job import local_job

    from ltx2_mgpu.workers.rank.ops import InputRejected

    runtime = local_job(0, 1).runtime  # ComfyUI's engine, no model
    assert runtime.engine_for("comfy") is runtime.engine
    with pytest.raises(
        InputRejected, match="this worker group runs ComfyUI's engine; a model for the ltxcore"
    ):
        runtime.engine_for("ltxcore")
    assert torch.device("cpu") == runtime.device


@pytest.mark.comfyui
def test_a_group_on_comfyuis_engine_never_imports_ltx_core(tiny, tmp_path):
    """A 2-rank CPU group on ComfyUI's engine through its commands (load with a LoRA, the SP Sampler's
    loop, a TDP centre-tile preview, Distributed VAE Decode): no rank has imported ltx-core, and the
    same group refuses a model for the ltx-core engine without loading it."""
    from comfyui_harness import comfyui_root
    from test_guidance_gpu import sample

    from conftest import assert_no_leaks
    from ltx2_mgpu.workers.embedded.tiny_variants import make_tiny_lora
    from ltx2_mgpu.workers.group.client import output_slot
    from ltx2_mgpu.workers.group.manager import MGPUModel, get_manager
    from ltx2_mgpu.workers.wire.comfyui_root import check_comfyui_root
    from ltx2_mgpu.workers.wire.model_files import read_checkpoint_config
    from ltx2_mgpu.workers.wire.requests import LoadModel, TdpUpscale, TextConditioning, VaeDecode
    from ltx2_mgpu.workers.wire.vae_outputs import audio_output, image_shape

    root = check_comfyui_root(comfyui_root())
    lora = make_tiny_lora(tmp_path / "lora.safetensors", tiny.checkpoint, seed=3)
    model = MGPUModel.create(
        tiny.checkpoint, devices="cpu:2", dtype="float32", backend="comfy", comfyui_root=root.path,
        comfyui_version=root.version, guidance_groups=1, loras=((str(lora), 0.5),),
    )  # fmt: skip
    manager = get_manager()
    try:
        (video, audio), reply = sample(model, 1)
        assert reply["backend"] == "comfy"
        cond = TextConditioning(torch.randn(1, 9, 64, generator=torch.Generator().manual_seed(2)), True)
        stage1 = video[:, :, :, :2, :3].contiguous()
        preview = TdpUpscale(
            video=stage1, sigmas=torch.tensor([0.625, 0.0]), positive=cond, upscaler=str(tiny.spatial_upscaler),
            tiles_h=2, tiles_w=2, overlap=2, preview="centre tile", out_video=output_slot((1, 128, 3, 3, 4), torch.float32),
        )  # fmt: skip
        assert manager.run(model, preview)[0]["preview_tile"] == 0
        decode = VaeDecode(
            video=video, audio=audio, out_image=output_slot(image_shape(tuple(video.shape)), torch.float32),
            out_audio=output_slot(audio_output(read_checkpoint_config(tiny.checkpoint), audio.shape[2]).shape(1), torch.float32),
        )  # fmt: skip
        manager.run(model, decode)
        pings = manager.group.run("ping")
        assert [p["ltx_core_modules"] for p in pings] == [[], []]
        with pytest.raises(ValueError, match="runs ComfyUI's engine; a model for the ltxcore engine"):
            manager.group.run(LoadModel.OP, LoadModel(checkpoint=str(tiny.checkpoint)).to_wire())
    finally:
        manager.unload()
        assert_no_leaks()
