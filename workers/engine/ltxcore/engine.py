"""The ltx-core engine on a rank (NOTE [engine seam] in workers/engine/protocol.py): Lightricks' ltx-core
modules (PyPI ltx-core 1.0.0, the pack's [ltxcore] extra) for LTX-2 without ComfyUI (the demo on a fresh
clone) and as Lightricks' reference block order (loader mode reference).

This class holds what a rank keeps between commands; each command's work lives in a *_job module.
"""

from __future__ import annotations

import gc
import logging
import weakref
from pathlib import Path
from typing import Any, ClassVar

import torch
from safetensors import SafetensorError

from ...text.text_encoder import feature_dtype, stored_dtype, text_features
from ...wire.backend import BACKEND_LTXCORE
from ...wire.capabilities import LTXCORE
from ...wire.checks import DTYPES, ForwardMode
from ...wire.lora_files import SwitchReport
from ...wire.requests import LoadModel
from ..protocol import Engine, InputRejected, Job
from .checkpoint import TRANSFORMER, embeddings_processor_spec
from .fp8_linear import check_fp8_matmul
from .lora import FuseTarget, LoraFuser
from .model import LoadedModel

_log = logging.getLogger(__name__)


class LtxCoreEngine(Engine):
    name: ClassVar[str] = BACKEND_LTXCORE
    capabilities = LTXCORE

    def __init__(self) -> None:
        self.model: LoadedModel | None = None
        self._fuser: tuple[weakref.ref, LoraFuser] | None = None  # (the model it belongs to, its fuser)

    def loaded(self) -> LoadedModel:
        if self.model is None:
            raise InputRejected("no model is loaded in the worker group; run the MGPU Loader first")
        return self.model

    # ----- the model -----
    def load(self, job: Job, request: LoadModel) -> dict:
        """Load the checkpoint (skipped when the same file, dtype, mode and fp8 are loaded)."""
        path = Path(request.checkpoint)
        dtype, mode = DTYPES[request.dtype], ForwardMode(request.mode)
        try:  # refused before any weight loads: the GPU's fp8 support (the request checked the rest)
            if request.fp8_matmul:
                check_fp8_matmul(dtype, job.device)
        except ValueError as exc:
            raise InputRejected(str(exc)) from None
        current = self.model
        if current is not None and (current.path, current.dtype, current.mode, current.fp8_matmul) == (
            path, dtype, mode, request.fp8_matmul,
        ):  # fmt: skip
            current.transformer.set_compiled(request.compile)  # weights unchanged: only how the blocks run
            return {"reused": True, **_summary(current)}
        self.unload()
        if job.device.type == "cuda":
            torch.cuda.empty_cache()
        parts = ["transformer", "text connectors"]
        job.progress(0, len(parts))
        try:
            model = LoadedModel.load(
                path, job.device, dtype, job.head_exchange(), mode,
                on_part=lambda p: job.progress(parts.index(p) + 1, len(parts)), fp8_matmul=request.fp8_matmul,
            )  # fmt: skip
        except ValueError as exc:
            raise InputRejected(str(exc)) from exc
        except (SafetensorError, OSError) as exc:  # the header was fine (checked first); the data is not
            raise InputRejected(
                f"checkpoint {path} could not be read ({type(exc).__name__}: {exc}). The file is damaged or was "
                "changed while loading; download or copy it again."
            ) from exc
        model.transformer.set_compiled(request.compile)
        self.model = model
        return {"reused": False, **_summary(model)}

    def unload(self) -> None:
        dropped = self.model is not None
        self.model = None
        self._fuser = None
        if dropped:
            gc.collect()

    def set_compiled(self, job: Job, compile: bool) -> dict:
        model = self.loaded()
        try:
            model.transformer.set_compiled(compile)
        except ValueError as exc:
            raise InputRejected(str(exc)) from exc
        return {"compiled": model.transformer.compiled}

    # ----- the commands -----
    def sample(self, job: Job, request) -> dict:
        from .sample_job import sample

        return sample(self.loaded(), job, request)

    def forward(self, job: Job, request) -> dict:
        from .sample_job import forward

        return forward(self.loaded(), job, request)

    def tdp_upscale(self, job: Job, request, plan) -> dict:
        from .tdp_job import tdp_upscale

        return tdp_upscale(self.loaded(), job, request, plan)

    def vae_decode(self, job: Job, request) -> dict:
        from .vae_job import vae_decode

        return vae_decode(self.loaded(), job, request)

    def vae_encode(self, job: Job, request, plan) -> dict:
        from .vae_job import vae_encode

        return vae_encode(self.loaded(), job, request, plan)

    def bench(self, job: Job, request, full_config: dict | None = None) -> dict:
        from .bench import run_bench

        return run_bench(self, job, request, full_config)

    # ----- LoRA: fused into the loaded weights (lora.py) -----
    def _lora_fuser(self, model: LoadedModel) -> LoraFuser:
        if self._fuser is None or self._fuser[0]() is not model:  # a new base was loaded: it is clean
            self._fuser = (weakref.ref(model), LoraFuser(model.path, model.dtype, model.mode))
        return self._fuser[1]

    def set_loras(self, job: Job, request) -> dict:
        """A failure after the first weight changed drops the model (its weights are unknown), so the
        next load_model loads it again."""
        model = self.loaded()
        fuser = self._lora_fuser(model)
        try:
            plan = fuser.plan(_targets(model), list(request.loras))
        except ValueError as exc:
            raise InputRejected(str(exc)) from exc
        if plan is None:
            return SwitchReport(changed=False).as_dict()
        for lora, _ in plan.files:
            if lora.unused_keys and job.rank == 0:  # ComfyUI logs these as "lora key not loaded"
                _log.warning("LoRA %s: %d keys change nothing in this checkpoint, e.g. %s",
                             lora.path.name, len(lora.unused_keys), lora.unused_keys[0])  # fmt: skip
        try:
            return fuser.apply(plan).as_dict()
        except Exception as exc:
            self.unload()
            raise RuntimeError(
                f"switching LoRAs failed part-way ({exc}); the base model was dropped and is loaded again on the "
                "next run"
            ) from exc

    def lora_state(self, job: Job) -> tuple[tuple[tuple[str, float], ...], list[torch.nn.Module]]:
        model = self.loaded()
        fuser = self._fuser
        active = fuser[1].active if fuser is not None and fuser[0]() is model else ()
        return tuple(active), [target.module for target in _targets(model)]

    # ----- text -----
    def text_dtype(self, files) -> torch.dtype:
        """The group's weight dtype (ltx-core holds Gemma and the projection in it)."""
        model = self.loaded()
        return model.dtype if model.dtype is not None else stored_dtype(files)

    def text_head(self, job: Job, files, projection: str = "") -> Any:
        """The checkpoint's text projection (one Linear) after ComfyUI's normalisation, copied in
        text/text_encoder.py text_features. Another file's projection is not read here (the capability
        table's text_projection_file: the node refuses it first)."""
        model = self.loaded()
        if projection and Path(projection) != model.path:
            raise InputRejected(
                f"the text projection of {Path(projection).name} is read on ComfyUI's engine only; on the ltx-core "
                f"engine it comes from the loaded checkpoint {model.path.name}: set projection_file to the loader's file"
            )
        extractor = getattr(model.processor, "feature_extractor", None)
        linear = getattr(extractor, "aggregate_embed", None)
        if not isinstance(linear, torch.nn.Linear):
            raise InputRejected(
                f"the checkpoint {model.path.name} has no single text projection (text_embedding_projection."
                "aggregate_embed); LTX-2.3's dual projection is served on ComfyUI's engine (inside ComfyUI), "
                "not on ltx-core"
            )
        return LinearTextHead(linear, self.text_dtype(files))


class LinearTextHead:
    """TextHead (protocol.py) of a single Linear projection: ComfyUI's LTX-2 normalisation, then it."""

    def __init__(self, projection: torch.nn.Linear, dtype: torch.dtype) -> None:
        self.projection = projection
        self.dtype = dtype
        self.in_features = projection.in_features
        self.out_features = projection.out_features

    def __call__(self, states) -> torch.Tensor:
        return text_features(
            states, self.projection, feature_dtype(self.projection.weight.device, self.dtype)
        )


def _targets(model: LoadedModel) -> list[FuseTarget]:
    return [
        FuseTarget(model.transformer.model, TRANSFORMER),
        FuseTarget(model.processor, embeddings_processor_spec()),
    ]


def _summary(model: LoadedModel) -> dict:
    d = model.description
    return {
        "backend": BACKEND_LTXCORE,
        "num_layers": d.num_layers,
        "video_heads": d.video_num_heads,
        "audio_heads": d.audio_num_heads,
        "caption_channels": d.caption_channels,
    }
