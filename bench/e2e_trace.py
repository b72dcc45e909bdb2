"""bench_e2e --trace: where each side's time goes, per model call and per decode (issue 23).

Wraps comfy.model_base.BaseModel.apply_model in this process (both sides call it once per model
call: native computes there, ours hands the call to the workers), timing each call between two CUDA
syncs; on our side also the workers' own forward time from their replies (the rest of a call is the
hand-over). The Distributed VAE Decode's and MGPU Text Encode's worker replies are kept too, each
led by the job's wall time as the node saw it. With --profile-calls, the native
calls with those indices run under torch.profiler here, and LTX2_MGPU_PROFILE_CALLS (read by the
workers: workers/engine/comfy/call_profile.py) does the same inside each rank.
"""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path


class CallTrace:
    def __init__(self, sync, profile_calls: set[int] | None = None, profile_dir: Path | None = None) -> None:
        self.sync = sync
        self.profile_calls = profile_calls or set()
        self.profile_dir = profile_dir
        self.calls: list[dict] = []
        self.decodes: list[dict] = []
        self.texts: list[dict] = []  # MGPU Text Encode's worker replies
        self.label = ""
        self.pending_forward = None
        self._undo: list = []

    def start(self, label: str) -> None:
        self.label = label
        self.calls.clear()
        self.decodes.clear()
        self.texts.clear()

    def install(self) -> None:
        import comfy.model_base

        trace = self
        original = comfy.model_base.BaseModel.apply_model

        def apply_model(model, x, t, *args, **kwargs):
            index = len(trace.calls)
            streams = x if isinstance(x, list | tuple) else [x]
            entry = {"index": index, "shapes": [list(s.shape) for s in streams]}
            profiling = index in trace.profile_calls and trace.profile_dir is not None
            trace.sync()
            began = time.perf_counter()
            with _profiled(profiling, trace.profile_dir, f"{trace.label}-call{index}") as _:
                out = original(model, x, t, *args, **kwargs)
                trace.sync()
            entry["ms"] = round((time.perf_counter() - began) * 1e3, 2)
            if trace.pending_forward is not None:  # ours: the workers' own forward times
                entry["worker_forward_ms"], trace.pending_forward = trace.pending_forward, None
            trace.calls.append(entry)
            return out

        comfy.model_base.BaseModel.apply_model = apply_model
        self._undo.append(lambda: setattr(comfy.model_base.BaseModel, "apply_model", original))
        self._wrap_ours()

    def _wrap_ours(self) -> None:
        import importlib

        trace = self
        for name in [
            n for n in sys.modules if n.endswith("nodes.vae_decode")
        ]:  # the pack as ComfyUI loaded it
            importlib.import_module(name.removesuffix("vae_decode") + "group_model.call")  # imported lazily
        for name, module in list(sys.modules.items()):
            cls = getattr(module, "GroupModelCall", None) if name.endswith("group_model.call") else None
            if cls is not None and getattr(cls, "_run", None) is not None and not hasattr(cls, "_traced"):
                run = cls._run

                def traced_run(caller, streams, call, _run=run):
                    out = _run(caller, streams, call)
                    replies = caller.last_replies or []
                    trace.pending_forward = [r.get("forward_ms") for r in replies]
                    return out

                cls._run = traced_run
                cls._traced = True
                self._undo.append(
                    lambda cls=cls, run=run: (setattr(cls, "_run", run), delattr(cls, "_traced"))
                )
            for suffix, kept in (("nodes.vae_decode", self.decodes), ("nodes.text_encode", self.texts)):
                if name.endswith(suffix) and hasattr(module, "run_job"):
                    job = module.run_job

                    def traced_job(*args, _job=job, _kept=kept, **kwargs):
                        began = time.perf_counter()
                        replies = _job(*args, **kwargs)
                        # the job's wall time seen by the node (the rest of the node is its own work)
                        job_ms = round((time.perf_counter() - began) * 1e3, 2)
                        _kept.append(
                            [{"job_ms": job_ms}]
                            + [
                                {k: v for k, v in r.items() if isinstance(v, int | float | str)}
                                for r in replies
                            ]
                        )
                        return replies

                    module.run_job = traced_job
                    self._undo.append(lambda m=module, j=job: setattr(m, "run_job", j))

    def summary(self) -> dict:
        return {"model_calls": self.calls, "decode_replies": self.decodes, "text_encode_replies": self.texts}

    def uninstall(self) -> None:
        while self._undo:
            self._undo.pop()()


@contextlib.contextmanager
def _profiled(on: bool, folder: Path | None, name: str):
    if not on:
        yield None
        return
    import torch

    activities = [torch.profiler.ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities, record_shapes=False) as prof:
        yield prof
    folder.mkdir(parents=True, exist_ok=True)
    sort = "cuda_time_total" if torch.cuda.is_available() else "cpu_time_total"
    (folder / f"{name}.txt").write_text(prof.key_averages().table(sort_by=sort, row_limit=45))
