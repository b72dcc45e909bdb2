"""The denoising loop, reproducing native ComfyUI sampling of LTX-2 step for step.

Everything here is elementwise on replicated tensors, so every rank computes identical values; only
the model call (`Denoiser`) is parallel. Details and their sources: docs/COMFYUI_LTX2_PARITY.md.

Streams: a job has one or two latent streams (video, and audio when the latent is nested). ComfyUI
samples them as one packed tensor [B, 1, N] (each stream flattened per batch item, video first);
packing matters only where random numbers are drawn, so those draws happen in the packed shape.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from ...wire.checks import SAMPLERS


@dataclass(frozen=True)
class Stream:
    """One latent stream of a job (ComfyUI form)."""

    latent: torch.Tensor  # the input LATENT samples (video [B,128,F,H,W] or audio [B,8,T,16])
    noise_mask: torch.Tensor | None  # ComfyUI noise_mask broadcastable to `latent`; 1 = denoise fully


@dataclass(frozen=True)
class SamplerSettings:
    name: str = "euler"
    eta: float = 1.0  # euler_ancestral only (ComfyUI's default)
    s_noise: float = 1.0


# The model call: (current x per stream, sigma, per-stream per-element timestep scale or None)
# -> denoised per stream (CFG already applied).
Denoiser = Callable[[list[torch.Tensor], float, list[torch.Tensor | None]], list[torch.Tensor]]
StepCallback = Callable[[int, int, list[torch.Tensor]], None]


def initial_noise(seed: int, shapes: Sequence[torch.Size]) -> list[torch.Tensor]:
    """Noise as comfy.sample.prepare_noise makes it: one CPU generator seeded once, float32, one
    draw per stream in order."""
    generator = torch.Generator(device="cpu").manual_seed(seed)
    return [
        torch.randn(tuple(shape), dtype=torch.float32, generator=generator, device="cpu") for shape in shapes
    ]


def pack(streams: Sequence[torch.Tensor]) -> torch.Tensor:
    """[B, ...] streams -> [B, 1, N] (per batch item: stream 0 flattened, then stream 1, ...)."""
    b = streams[0].shape[0]
    return torch.cat([s.reshape(b, 1, -1) for s in streams], dim=2)


def unpack(packed: torch.Tensor, shapes: Sequence[torch.Size]) -> list[torch.Tensor]:
    sizes = [math.prod(s[1:]) for s in shapes]
    return [p.reshape(shape) for p, shape in zip(packed.split(sizes, dim=2), shapes)]


class AncestralNoise:
    """Noise of k-diffusion's default noise sampler: a generator on the sampling device seeded with
    the job seed (ComfyUI adds 1 when that device is the CPU), drawn in the packed shape."""

    def __init__(
        self, seed: int, device: torch.device, shapes: Sequence[torch.Size], dtype: torch.dtype
    ) -> None:
        self.shapes = list(shapes)
        self.device = device
        self.dtype = dtype
        self.generator = torch.Generator(device=device).manual_seed(
            seed + 1 if device.type == "cpu" else seed
        )
        b = shapes[0][0]
        self.packed_shape = (b, 1, sum(math.prod(s[1:]) for s in shapes))

    def draw(self) -> list[torch.Tensor]:
        packed = torch.randn(
            self.packed_shape, dtype=self.dtype, device=self.device, generator=self.generator
        )
        return unpack(packed, self.shapes)


def sample(
    denoise: Denoiser,
    streams: Sequence[Stream],
    noise: Sequence[torch.Tensor],
    sigmas: torch.Tensor,
    settings: SamplerSettings,
    *,
    seed: int,
    device: torch.device,
    on_step: StepCallback | None = None,
    on_denoised: StepCallback | None = None,
) -> list[torch.Tensor]:
    """Denoise `streams` along `sigmas`; return the final latent of each stream (float32, `device`).

    Masked elements (noise_mask < 1) are held to the input latent the way ComfyUI's inpainting wrapper
    does it for LTX-2: the model sees x*m + latent*(1-m), and its prediction becomes
    denoised*m + latent*(1-m); the sampler itself steps from its own x.
    """
    if settings.name not in SAMPLERS:
        raise ValueError(f"sampler {settings.name!r} is not supported; choose one of {', '.join(SAMPLERS)}")
    sig = [float(s) for s in sigmas.tolist()]
    latents = [s.latent.to(device=device, dtype=torch.float32) for s in streams]
    noises = [n.to(device=device, dtype=torch.float32) for n in noise]
    masks = [
        None if s.noise_mask is None else s.noise_mask.to(device=device, dtype=torch.float32) for s in streams
    ]
    x = [sig[0] * n + (1.0 - sig[0]) * lat for n, lat in zip(noises, latents)]
    ancestral = (
        AncestralNoise(seed, device, [t.shape for t in x], torch.float32)
        if settings.name == "euler_ancestral" and settings.eta > 0
        else None
    )
    steps = len(sig) - 1
    for i in range(steps):
        s, s_next = sig[i], sig[i + 1]
        x_in = [_hold_masked(xi, m, lat) for xi, m, lat in zip(x, masks, latents)]
        denoised = denoise(x_in, s, masks)
        denoised = [
            d if m is None else d * m + lat * (1.0 - m) for d, m, lat in zip(denoised, masks, latents)
        ]
        # The sampler steps from its own x, not from the masked model input (as ComfyUI's wrapper does).
        if settings.name == "euler":
            x = [_euler_step(xi, di, s, s_next) for xi, di in zip(x, denoised)]
        else:
            x = _euler_ancestral_rf_step(x, denoised, s, s_next, settings, ancestral)
        if on_denoised is not None:
            on_denoised(i + 1, steps, denoised)
        if on_step is not None:
            on_step(i + 1, steps, x)
    last = sig[-1]
    if last > 0:
        x = [xi / (1.0 - last) for xi in x]  # ComfyUI's inverse noise scaling for flow models
    return x


def _hold_masked(x: torch.Tensor, mask: torch.Tensor | None, latent: torch.Tensor) -> torch.Tensor:
    # LTX-2 in ComfyUI holds masked elements at the clean input latent (scale_latent_inpaint returns
    # the latent itself, not a re-noised one).
    if mask is None:
        return x
    return x * mask + latent * (1.0 - mask)


def _euler_step(x: torch.Tensor, denoised: torch.Tensor, sigma: float, sigma_next: float) -> torch.Tensor:
    d = (x - denoised) / sigma
    return x + d * (sigma_next - sigma)


def _euler_ancestral_rf_step(
    x: list[torch.Tensor],
    denoised: list[torch.Tensor],
    sigma: float,
    sigma_next: float,
    settings: SamplerSettings,
    ancestral: AncestralNoise | None,
) -> list[torch.Tensor]:
    if sigma_next == 0:
        return list(denoised)
    downstep = 1 + (sigma_next / sigma - 1) * settings.eta
    sigma_down = sigma_next * downstep
    alpha_next, alpha_down = 1 - sigma_next, 1 - sigma_down
    renoise = (sigma_next**2 - sigma_down**2 * alpha_next**2 / alpha_down**2) ** 0.5
    ratio = sigma_down / sigma
    out = [ratio * xi + (1 - ratio) * di for xi, di in zip(x, denoised)]
    if ancestral is not None:
        draws = ancestral.draw()
        out = [(alpha_next / alpha_down) * o + n * settings.s_noise * renoise for o, n in zip(out, draws)]
    return out
