"""The files-variants matrix (issue 39): each of our nodes against native ComfyUI on the same file, for
the same weights written in every layout ComfyUI 0.33 accepts (tests/file_variants.py), LTX-2, 2.3 and
2.5, on 1 and 2 CPU workers (opt-in: COMFYUI_PATH).

Per variant: native ComfyUI loads it with its own loader node in this process (UNETLoader or
CheckpointLoaderSimple, VAELoader, LatentUpscaleModelLoader, load_clip as LTXAVTextEncoderLoader and
CLIPLoader call it) and runs its own nodes; ours load it with the MGPU Loader and run the SP Sampler,
the loader's MODEL through SamplerCustomAdvanced, the TDP Upscaler, Distributed VAE Decode / Encode
and MGPU Text Encode. Pass: within 1e-5 of the largest native value (float32), or, where ComfyUI's own
loader refuses the file (a variant marked `refused`, checked against ComfyUI here too), ours refuses it
before any work with one line naming the file. The table of errors is printed (-s) per component.

Speed: one worker group per worker count for the whole module (a new file only reloads the model in the
running group); smallest shapes (8 video tokens, one sampling step); native files load once. A file's
layout is read the same way whatever the worker count, so each accepted variant runs on one of the two
groups (`dealt`): the first of each list on both, the others alternating. Every variant meets native
once, and every release runs on both worker counts. Refusals cost no work and are checked on both.
ComfyUI cannot build Gemma at a small size by itself (it sizes Gemma 3 / 4 for 12B): the native side gets
each small Gemma's sizes through model_options' `_model_config` and its head sizes as class constants,
what any native run of such a file needs; nothing else changes (tests/comfyui_test_shims does the same).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import file_variants as fv
import pytest
import torch
from comfyui_harness import comfyui_in_process, comfyui_root

from conftest import assert_no_leaks, rank_threads
from ltx2_mgpu.workers.group.manager import get_manager

pytestmark = pytest.mark.comfyui

TOLERANCE = 1e-5
# MGPU Text Encode runs the prompt without ComfyUI's left padding (NOTE [pads skipped]). ComfyUI's
# Gemma 4 picks its attention call by sequence length (KV heads expanded from 1,024 positions), so
# ours differs by rounding: 5.6e-5 on make-tiny's bf16 file, where native's own result moves by
# 1.1e-3 between pads to 1,024 and to 2,048 (test_comfy_ltx25_nodes measures both each run).
GEMMA4_TOLERANCE = 1e-4
RANKS = (1, 2)
WIDTH = HEIGHT = 64
FRAMES, FPS = 9, 8.0  # video latent [1, 128, 2, 2, 2]: 8 tokens; audio [1, 8, 28, 16]
SIGMAS = "0.85, 0.0"
CFG_VIDEO, CFG_AUDIO, SEED = 3.0, 7.0, 42
PROMPT = "A red fox runs through fresh snow at dawn."
TABLE: dict[str, dict[str, str]] = {}  # component -> row -> "1 worker / 2 workers" errors, for the report


@pytest.fixture(scope="module")
def native(tmp_path_factory, tiny, tiny23, tiny25) -> Iterator[SimpleNamespace]:
    """ComfyUI in this process (its loaders and nodes run in inference mode, as its executor runs them),
    every release's files (make-tiny's) and their variants, in folders ComfyUI and our loader read."""
    from ltx2_mgpu.workers.embedded import tiny_gemma4

    out = tmp_path_factory.mktemp("variants")
    with comfyui_in_process(comfyui_root()), torch.inference_mode():
        import comfy.clip_model
        import comfy.nested_tensor
        import comfy.sd
        import comfy.text_encoders.llama as llama
        import folder_paths
        from comfy_extras import nodes_custom_sampler as cs
        from comfy_extras import nodes_hunyuan, nodes_lt_upsampler
        from comfy_extras import nodes_lt as lt
        from comfy_extras import nodes_lt_audio as lt_audio

        import nodes

        released23 = tiny23.released  # make-tiny's 2.3 files under the released names (read only)
        ckpt23 = released23["checkpoints/ltx-2.3-22b-dev-fp8.safetensors"]
        gemma3 = released23["text_encoders/gemma_3_12B_it_fp4_mixed.safetensors"]
        tokenizer = fv.read(tiny25.text_encoder)[0]["tokenizer_json"]
        own = fv.own_gemma4(out, tokenizer, (128, 64))
        sources = {
            "2": SimpleNamespace(transformer=tiny.checkpoint, vae=tiny.checkpoint, audio=tiny.checkpoint, upscaler=tiny.spatial_upscaler),
            "2.3": SimpleNamespace(transformer=ckpt23, vae=ckpt23, audio=ckpt23, upscaler=released23["latent_upscale_models/ltx-2.3-spatial-upscaler-x2-1.1.safetensors"]),
            "2.5": SimpleNamespace(transformer=tiny25.transformer, vae=tiny25.video_vae, audio=tiny25.audio_vae, upscaler=tiny25.spatial_upscaler),
        }  # fmt: skip
        variants: list[fv.Variant] = []
        for release, src in sources.items():
            variants += fv.transformer_variants(src.transformer, release, out)
            variants += fv.video_vae_variants(src.vae, release, out)
            if release == "2.5":  # its conv-decoder option too (ComfyUI detects either)
                variants += fv.video_vae_variants(tiny25.conv_video_vae, release, out, kind="conv decoder")
            bwe = ckpt23 if release == "2.5" else None
            variants += fv.audio_vae_variants(src.audio, release, out, bwe_source=bwe)
            variants += fv.upscaler_variants(src.upscaler, release, out)
        variants += fv.gemma3_variants(gemma3, out)
        gemma4_sources = {
            "make-tiny bf16": tiny25.text_encoder,
            "make-tiny int8 convrot (released name)": tiny25.text_encoder_int8,
            **own,
        }
        variants += fv.gemma4_variants(gemma4_sources, out)
        folders = {(v.folder, str(v.path.parent)) for v in variants}
        folders |= {(p.parent.name, str(p.parent)) for p in (*released23.values(), *tiny25.all())}
        folders |= {
            ("checkpoints", str(tiny.checkpoint.parent)),
            ("latent_upscale_models", str(tiny.checkpoint.parent)),
        }
        for folder, path in folders:
            folder_paths.add_model_folder_path(folder, path)
        patches = pytest.MonkeyPatch()
        # Gemma 3's 12B vision tower is not on the text path and would take minutes to build on a CPU.
        patches.setattr(comfy.clip_model, "CLIPVision", lambda *a, **k: torch.nn.Module())
        patches.setattr(llama, "Gemma3MultiModalProjector", lambda *a, **k: torch.nn.Module())
        try:
            yield SimpleNamespace(
                sd=comfy.sd, nodes=nodes, cs=cs, lt=lt, lt_audio=lt_audio, hunyuan=nodes_hunyuan,
                upsampler=nodes_lt_upsampler, llama=llama, NestedTensor=comfy.nested_tensor.NestedTensor,
                variants={v.id: v for v in variants}, sources=sources, gemma3=gemma3, ckpt23=ckpt23,
                tiny25=tiny25, tiny_gemma4=tiny_gemma4, patches=patches, cache={}, natives={},
            )  # fmt: skip
        finally:
            patches.undo()
    for component, rows in TABLE.items():
        print(f"\n[variants matrix: {component}] max |ours - native| / max |native|")
        for row, cells in rows.items():
            print(f"  {row:70s} {cells}")


@pytest.fixture(scope="module", params=RANKS, ids=lambda n: f"{n}workers")
def ranks(request, native) -> Iterator[int]:
    yield request.param
    get_manager().unload()
    assert_no_leaks()


def dealt(variants, ranks: int) -> list:
    """The variants of one list this group runs (module docstring): the first accepted one on every
    group, the i-th after it on RANKS[(i - 1) % len(RANKS)]; refused ones on every group."""
    variants, runs = list(variants), []
    accepted = [v for v in variants if not v.refused]
    for i, v in enumerate(accepted):
        if i == 0 or RANKS[(i - 1) % len(RANKS)] == ranks:
            runs.append(v.id)
    return [v for v in variants if v.refused or v.id in runs]


def cached(n, key, make):
    if key not in n.cache:
        n.cache[key] = make()
    return n.cache[key]


def relative(ours: torch.Tensor, native: torch.Tensor) -> float:
    assert ours.shape == native.shape, (tuple(ours.shape), tuple(native.shape))
    return float((ours.float() - native.float()).abs().max() / native.float().abs().max())


def record(component: str, row: str, ranks: int, cell: str) -> None:
    cells = TABLE.setdefault(component, {}).setdefault(row, "")
    TABLE[component][row] = f"{cells}  {ranks}w: {cell}"


def check_rows(
    component: str, results: dict[str, float | str], ranks: int, tolerance: float = TOLERANCE
) -> None:
    """Record every row, then fail naming every row over the bound (all rows run first)."""
    bad = {}
    for row, found in results.items():
        record(component, row, ranks, found if isinstance(found, str) else f"{found:.2e}")
        if isinstance(found, float) and not found <= tolerance:
            bad[row] = found
        elif isinstance(found, str) and not found.startswith(("refused", "same")):
            bad[row] = found
    assert not bad, f"{component}, {ranks} workers: {bad}"


# ----- the loader and samplers on the transformer variants ---------------------------------------


def native_result(n, release: str, model, label: str, sample) -> tuple[list[torch.Tensor], str]:
    """Native sampling of `model`, or the result already found for a model ComfyUI built identically
    (same model class and config, every weight equal: a file that differs from another only in its
    layout on disk or its metadata's unread parts). Returns (result, label of the variant sampled)."""
    for twin, result, sampled in n.natives.setdefault(release, []):
        if same_native_model(model, twin):
            return result, sampled
    result = sample()
    n.natives[release].append((model, result, label))
    return result, label


def same_native_model(a, b) -> bool:
    if (
        type(a.model) is not type(b.model)
        or a.model.model_config.unet_config != b.model.model_config.unet_config
    ):
        return False
    sa, sb = a.model.diffusion_model.state_dict(), b.model.diffusion_model.state_dict()
    if sa.keys() != sb.keys():
        return False
    plain = (torch.Tensor,)
    return all(
        type(sa[k]) in plain
        and type(sb[k]) in plain
        and sa[k].dtype == sb[k].dtype
        and torch.equal(sa[k], sb[k])
        for k in sa
    )


def load_native_model(n, variant: fv.Variant):
    if variant.folder == "checkpoints":
        return n.nodes.CheckpointLoaderSimple().load_checkpoint(variant.path.name)[0]
    return n.nodes.UNETLoader().load_unet(variant.path.name, "default")[0]


def sampling_inputs(n, model) -> tuple:
    dm = model.model.diffusion_model
    width = (
        dm.cross_attention_dim + dm.audio_cross_attention_dim
        if dm.caption_proj_before_connector
        else dm.caption_channels
    )
    gen = torch.Generator().manual_seed(1)
    positive = [[torch.randn(1, 11, width, generator=gen), {"unprocessed_ltxav_embeds": True}]]
    negative = [[torch.randn(1, 6, width, generator=gen), {"unprocessed_ltxav_embeds": True}]]
    positive, negative = n.lt.LTXVConditioning.execute(positive, negative, FPS)[:2]
    (video,) = n.lt.EmptyLTXVLatentVideo.execute(WIDTH, HEIGHT, FRAMES, 1)
    audio = {"samples": torch.zeros(1, 8, round(FRAMES / FPS * 25), 16), "type": "audio"}
    (latent,) = n.lt.LTXVConcatAVLatent.execute(video, audio)
    (sigmas,) = n.cs.ManualSigmas.execute(SIGMAS)
    return positive, negative, latent, sigmas


def native_sample(n, model, positive, negative, latent, sigmas) -> list[torch.Tensor]:
    (guider,) = n.lt.LTXVDualCFGGuider.execute(model, positive, negative, CFG_VIDEO, CFG_AUDIO)
    out = n.cs.SamplerCustomAdvanced.execute(
        n.cs.RandomNoise.execute(SEED)[0], guider, n.cs.KSamplerSelect.execute("euler")[0], sigmas, latent
    )[0]
    return [t.clone() for t in out["samples"].unbind()]


def vae_names(n, release: str) -> dict[str, str]:
    """The loader's VAE inputs for a release's transformer: 2.5's separate files, else the checkpoint's."""
    if release != "2.5":
        return {}
    return {"video_vae_name": n.tiny25.video_vae.name, "audio_vae_name": n.tiny25.audio_vae.name}


def load_ours(n, ranks: int, ckpt_name: str, release: str, **vaes):
    from ltx2_mgpu.nodes.loader import load_model

    return load_model(ckpt_name, f"cpu:{ranks}", "float32", **(vae_names(n, release) | vaes))


def refused_alike(n, variant: fv.Variant, native_load, ours_load) -> str:
    """'refused (ComfyUI: ..., ours: ...)' when both refuse; a failure text otherwise."""
    try:
        native_load()
    except Exception as exc:  # ComfyUI's own errors: any type
        theirs = f"{type(exc).__name__}"
    else:
        return "ComfyUI accepts it: the variant's `refused` mark is wrong"
    before = get_manager().group
    try:
        ours_load()
    except ValueError as exc:
        line = str(exc)
        if variant.path.name not in line or "\n" in line:
            return f"refused without naming the file in one line: {line!r}"
        if get_manager().group is not before:
            return "refused after touching the worker group"
        return f"refused (ComfyUI {theirs}, ours ValueError)"
    return "ours accepts a file ComfyUI refuses"


@pytest.mark.parametrize("release", fv.RELEASES)
def test_transformer_variants_sp_sampler_and_model_path(native, ranks, release):
    from ltx2_mgpu.nodes.sp_sampler import sample_latent

    n, results = native, {}
    for variant in dealt(
        (v for v in n.variants.values() if v.release == release and v.component == "transformer"), ranks
    ):
        if variant.refused:
            results[variant.label] = refused_alike(
                n, variant, lambda v=variant: load_native_model(n, v),
                lambda v=variant: load_ours(n, ranks, v.path.name, release),
            )  # fmt: skip
            continue
        model = load_native_model(n, variant)
        args = sampling_inputs(n, model)
        expected, twin = native_result(
            n, release, model, variant.label, lambda m=model, a=args: native_sample(n, m, *a)
        )
        mgpu, group_model, _info = load_ours(n, ranks, variant.path.name, release)
        (sp,) = sample_latent(mgpu, *args, "euler", CFG_VIDEO, CFG_AUDIO, SEED)
        via_model = native_sample(n, group_model, *args)
        found = [relative(a, b) for a, b in zip(sp["samples"].unbind(), expected)]
        found += [relative(a, b) for a, b in zip(via_model, expected)]
        same = "" if twin == variant.label else f" (native: as '{twin}', same model)"
        results[variant.label + same] = max(found)
    check_rows(f"LTX-{release} transformer: SP Sampler and the loader's MODEL", results, ranks)


@pytest.mark.parametrize("release", fv.RELEASES)
def test_transformer_variants_take_the_loaders_lora_on_the_same_weights(native, release, tmp_path):
    """The MGPU Loader's lora_name (and MGPU LoRA) map a LoRA onto every transformer layout of the
    variants, prefixed or bare, quantized or not: the same weights as on the release's own file. On a
    bare file the keys once matched nothing and the LoRA was refused as changing nothing."""
    from ltx2_mgpu.workers.embedded.tiny_variants import make_tiny_lora
    from ltx2_mgpu.workers.wire.lora_files import read_lora, transformer_prefix
    from ltx2_mgpu.workers.wire.model_files import read_safetensors_header

    source = native.sources[release].transformer
    lora = make_tiny_lora(tmp_path / f"ltx{release}-lora.safetensors", source, rank=2)

    def changed_weights(path: Path) -> list[str]:
        header = read_safetensors_header(path)
        prefix = transformer_prefix(header)
        return sorted(t.weight_key.removeprefix(prefix) for t in read_lora(lora, header).targets)

    expected = changed_weights(source)
    assert expected, "the LoRA changes nothing on the release's own file"
    checked = [
        v
        for v in native.variants.values()
        if v.release == release and v.component == "transformer" and not v.refused
    ]
    assert any(not transformer_prefix(read_safetensors_header(v.path)) for v in checked), (
        "no bare layout checked"
    )
    for variant in checked:
        assert changed_weights(variant.path) == expected, variant.label


# ----- VAE variants: Distributed VAE Decode and Encode -------------------------------------------


def decode_inputs(n) -> tuple:
    gen = torch.Generator().manual_seed(3)
    video, audio = torch.randn(1, 128, 2, 2, 2, generator=gen), torch.randn(1, 8, 13, 16, generator=gen)
    (latent,) = n.lt.LTXVConcatAVLatent.execute({"samples": video}, {"samples": audio, "type": "audio"})
    return video, audio, latent


@pytest.mark.parametrize("release", fv.RELEASES)
def test_vae_variants_distributed_decode_and_encode(native, ranks, release):
    from ltx2_mgpu.nodes.vae_decode import decode_latent
    from ltx2_mgpu.nodes.vae_encode import encode_pixels

    n, results = native, {}
    base = next(
        v
        for v in n.variants.values()
        if v.release == release
        and v.component == "transformer"
        and v.folder == ("checkpoints" if release != "2.5" else "diffusion_models")
    )
    video, audio, latent = decode_inputs(n)
    pixels = torch.rand(FRAMES, HEIGHT, WIDTH, 3, generator=torch.Generator().manual_seed(5))
    for variant in dealt(
        (
            v
            for v in n.variants.values()
            if v.release == release and v.component in ("video_vae", "audio_vae")
        ),
        ranks,
    ):
        role = variant.component.split("_")[0]
        slot = {f"{role}_vae_name": variant.path.name}
        if variant.refused:
            results[variant.label + f" ({role})"] = refused_alike(
                n, variant, lambda v=variant: n.nodes.VAELoader().load_vae(v.path.name)[0].throw_exception_if_invalid(),
                lambda s=slot: load_ours(n, ranks, base.path.name, release, **s),
            )  # fmt: skip
            continue
        (vae,) = n.nodes.VAELoader().load_vae(variant.path.name)
        mgpu, _model, _info = load_ours(n, ranks, base.path.name, release, **slot)
        images, sound = decode_latent(mgpu, latent, mode="exact")
        if role == "video":
            (frames,) = n.nodes.VAEDecode().decode(vae, {"samples": video})
            (encoded,) = n.nodes.VAEEncode().encode(vae, pixels)
            (ours_encoded,) = encode_pixels(mgpu, pixels)
            found = max(relative(images, frames), relative(ours_encoded["samples"], encoded["samples"]))
        else:
            with rank_threads(ranks):
                (wave,) = n.lt_audio.LTXVAudioVAEDecode.execute({"samples": audio, "type": "audio"}, vae)
            assert sound["sample_rate"] == wave["sample_rate"]
            found = relative(sound["waveform"], wave["waveform"])
        results[f"{variant.label} ({role})"] = found
    check_rows(f"LTX-{release} VAE files: Distributed VAE Decode / Encode", results, ranks)


# ----- upscaler variants: TDP Upscaler -----------------------------------------------------------


@pytest.mark.parametrize("release", fv.RELEASES)
def test_upscaler_variants_tdp_upscaler(native, ranks, release):
    from ltx2_mgpu.nodes.tdp_upscaler import tdp_upscale

    n, results = native, {}
    base = next(
        v
        for v in n.variants.values()
        if v.release == release
        and v.component == "transformer"
        and v.label in ("checkpoint as made", "prefixed, config full")
    )
    model = cached(n, base.id, lambda: load_native_model(n, base))
    positive, negative, _latent, sigmas = sampling_inputs(n, model)
    native_vae = (
        n.nodes.VAELoader().load_vae(n.tiny25.video_vae.name)[0] if release == "2.5"
        else n.nodes.CheckpointLoaderSimple().load_checkpoint(base.path.name)[2]
    )  # fmt: skip
    gen = torch.Generator().manual_seed(4)
    video, audio = torch.randn(1, 128, 2, 1, 1, generator=gen), torch.randn(1, 8, 13, 16, generator=gen)
    mgpu, _model, _info = load_ours(n, ranks, base.path.name, release)
    stage1 = {"samples": n.NestedTensor((video, audio))}
    for variant in dealt(
        (v for v in n.variants.values() if v.release == release and v.component == "upscaler"), ranks
    ):

        def ours(v=variant):
            return tdp_upscale(
                mgpu,
                positive,
                negative,
                stage1,
                v.path.name,
                "euler",
                CFG_VIDEO,
                SEED,
                "1x1",
                0,
                sigmas=sigmas,
            )[0]

        if variant.refused:
            results[variant.label] = refused_alike(
                n, variant, lambda v=variant: n.hunyuan.LatentUpscaleModelLoader.execute(v.path.name), ours
            )
            continue
        (upscaler,) = n.hunyuan.LatentUpscaleModelLoader.execute(variant.path.name)
        (up,) = n.upsampler.LTXVLatentUpsampler.execute({"samples": video}, upscaler, native_vae)
        (latent,) = n.lt.LTXVConcatAVLatent.execute(
            up, {"samples": audio, "noise_mask": torch.zeros_like(audio)}
        )
        (guider,) = n.cs.CFGGuider.execute(model, positive, negative, CFG_VIDEO)
        expected = n.cs.SamplerCustomAdvanced.execute(
            n.cs.RandomNoise.execute(SEED)[0], guider, n.cs.KSamplerSelect.execute("euler")[0], sigmas, latent
        )[0]["samples"].unbind()
        got = ours()["samples"].tensors
        assert torch.equal(got[1], audio)
        results[variant.label] = relative(got[0], expected[0])
    check_rows(f"LTX-{release} latent upscaler files: TDP Upscaler (one tile)", results, ranks)


# ----- text encoders: MGPU Text Encode (Gemma 3 and Gemma 4) --------------------------------------


@contextlib.contextmanager
def gemma3_at_file_sizes(n, path: Path) -> Iterator[dict]:
    from ltx23_fixtures import tiny_gemma_sizes

    sizes = tiny_gemma_sizes(path)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(n.llama.Gemma3_12B_Config, "head_dim", sizes.pop("head_dim"))
        yield {"_model_config": sizes}


def native_gemma3(n, variant: fv.Variant):
    with gemma3_at_file_sizes(n, variant.path) as options:
        clip = n.sd.load_clip(
            [str(variant.path), str(n.ckpt23)], clip_type=n.sd.CLIPType.LTXV, model_options=options
        )
        return n.nodes.CLIPTextEncode().encode(clip, PROMPT)[0]


def native_gemma4(n, variant: fv.Variant):
    own = variant.label.startswith("own sizes")
    tiny = n.tiny_gemma4
    constants = fv.GEMMA4_CONSTANTS if own else {
        "head_dim": tiny.HEAD_DIM, "global_head_dim": tiny.GLOBAL_HEAD_DIM, "suppress_tokens": [],
        "vision_config": tiny.VISION_CONFIG, "audio_config": tiny.AUDIO_CONFIG,
    }  # fmt: skip
    sizes = fv.GEMMA4_SIZES if own else tiny.tiny_gemma4_config_overrides()
    with fv.gemma4_constants(constants):
        clip = n.sd.load_clip(
            [str(variant.path)], clip_type=n.sd.CLIPType.LTXV, model_options={"_model_config": dict(sizes)}
        )
        return n.nodes.CLIPTextEncode().encode(clip, PROMPT)[0]


@pytest.mark.parametrize("gemma", ["gemma3", "gemma4"])
def test_text_encoder_variants_mgpu_text_encode(native, ranks, gemma):
    from ltx2_mgpu.nodes.text_encode import encode_prompt

    n, results = native, {}
    release = "2.3" if gemma == "gemma3" else "2.5"
    base = next(
        v
        for v in n.variants.values()
        if v.release == release
        and v.component == "transformer"
        and v.label in ("checkpoint as made", "prefixed, config full")
    )
    mgpu, _model, _info = load_ours(n, ranks, base.path.name, release)
    encode_native = native_gemma3 if gemma == "gemma3" else native_gemma4
    for variant in dealt((v for v in n.variants.values() if v.component == gemma), ranks):

        def ours(v=variant):
            return encode_prompt(mgpu, v.path.name, PROMPT)[0]

        if variant.refused and not variant.same_as:
            results[variant.label] = refused_alike(n, variant, lambda v=variant: encode_native(n, v), ours)
            continue
        if variant.same_as:  # ComfyUI refuses it, we read it: the native result of its twin
            with pytest.raises(Exception):  # noqa: B017 (ComfyUI's own error: any type)
                encode_native(n, variant)
            twin = next(v for v in n.variants.values() if v.component == gemma and v.label == variant.same_as)
            label = f"{variant.label} (ComfyUI refuses; ours = native on '{twin.label}')"
        else:
            twin, label = variant, variant.label
        expected = cached(n, ("text", twin.id), lambda v=twin: encode_native(n, v))
        got = ours()
        assert got[0][1]["unprocessed_ltxav_embeds"] is True
        results[label] = relative(got[0][0], expected[0][0])
    check_rows(
        f"{'Gemma 3 (LTX-2.3)' if gemma == 'gemma3' else 'Gemma 4 (LTX-2.5)'}: MGPU Text Encode",
        results,
        ranks,
        TOLERANCE if gemma == "gemma3" else GEMMA4_TOLERANCE,
    )
