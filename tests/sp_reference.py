"""Kept for tests that import the in-process reference from here; it lives in ltx2_mgpu.workers.engine.ltxcore.reference."""

from ltx2_mgpu.workers.engine.ltxcore.reference import (
    denoiser,
    load_in_process,
    relative_error,
    sample_in_process,
)

__all__ = ["denoiser", "load_in_process", "relative_error", "sample_in_process"]
