"""The "vae_decode" command: video latent -> IMAGE frames over the whole group, audio latent -> waveform.

The request: wire/requests.py VaeDecode (built by nodes/vae_decode.py). The engine decodes (NOTE
[engine seam]): ComfyUI's VAE (exact slabs or VAEDecodeTiled's tiles) or ltx-core's tiles.
"""

from __future__ import annotations

from ..wire.requests import VaeDecode
from .ops import op


@op(VaeDecode)
def vae_decode(job, request: VaeDecode) -> dict:
    return job.engine.vae_decode(job, request)
