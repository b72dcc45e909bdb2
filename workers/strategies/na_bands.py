"""Bands of LTX-2.5's diffusion decoder: which rows each rank owns, which it must see, who sends what.

NOTE [na bands]: the diffusion decoder (ComfyUI's NADiffusionDecoder, comfy/ldm/lightricks/vae/
na_diffusion_decoder.py) is linear layers, RMSNorms, SwiGLUs and pixel shuffles, all per token, plus
neighbourhood attention (NA) over (frames, rows, columns). Each rank owns a band of latent cells
along one spatial axis ("rows" below; columns when the frame is wider than tall) and every frame;
at a stage whose tokens are `scale` times finer than the latent along that axis, it owns rows
[start * scale, stop * scale). Per token, nothing crosses bands. NA does: a query at row y attends
the `k` rows starting at clamp(y - k // 2, 0, L - k) (NATTEN's window, shifted inward at the frame's
edges; a kernel longer than the axis covers the axis, k = min(k, L)). So before each NA layer a rank
needs the rows `na_window` gives for its band (k // 2 beyond each side inside the frame, up to k - 1
at its edges), which may lie on several other ranks when bands are thin; `transfers` says, alike on
every rank, which rows go from whom to whom. Run on exactly those rows (the window's own grid), NA
gives every owned query the window it has in the whole frame: the local clamp equals the global one
because the grid starts at 0 or ends at L wherever the global window is shifted.

Why a halo per NA layer and not one halo wide enough for all: the decoder has 16 NA layers before
stage 5 and 8 in it, each reaching k // 2 rows further (3 latent rows per layer in stage 1, 8 layers
of 5 rows at 8x in stage 5): a one-time halo is about 31 latent rows on each side, more than a
1088 px frame has (34), so every rank would run the whole decoder. Per layer, a rank receives
k // 2 rows of the residual stream from each neighbour (5 rows x frames x width x 256 channels in
stage 5) and recomputes their q, k, v.
"""

from __future__ import annotations

from dataclasses import dataclass

from .vae_encode_plan import HEIGHT, WIDTH, split_evenly

# Channels-last activations [B, T, H, W, C]: the axis a band cuts.
AXIS_DIMS = {HEIGHT: 2, WIDTH: 3}


@dataclass(frozen=True)
class BandPlan:
    """Who owns what (NOTE [na bands]).

    latent_fhw: (F, H, W) of the latent. axis: HEIGHT or WIDTH. bands[r]: latent cells [start, stop)
    of rank r along the axis (ranks past len(bands) idle). chunk_bytes: the most bytes one NA call's
    q, k, v and output may take on a rank (0: the whole band in one call).
    """

    latent_fhw: tuple[int, int, int]
    world_size: int
    axis: str
    bands: tuple[tuple[int, int], ...]
    chunk_bytes: int = 0

    @property
    def dim(self) -> int:
        """The band axis in a channels-last [B, T, H, W, C] tensor."""
        return AXIS_DIMS[self.axis]

    @property
    def cells(self) -> int:
        return self.latent_fhw[1] if self.axis == HEIGHT else self.latent_fhw[2]

    @property
    def active_ranks(self) -> int:
        return len(self.bands)

    def is_active(self, rank: int) -> bool:
        return rank < self.active_ranks

    def band(self, rank: int, scale: int) -> tuple[int, int]:
        """Rows [start, stop) rank owns at a stage `scale` times finer than the latent."""
        start, stop = self.bands[rank]
        return start * scale, stop * scale

    def describe(self) -> str:
        sizes = "/".join(str(size) for size in sorted({b - a for a, b in self.bands}))
        return (
            f"{self.active_ranks} band(s) of {sizes} latent {'rows' if self.axis == HEIGHT else 'columns'} "
            f"on {self.world_size} rank(s), NA halo exchanged per layer"
        )


def band_plan(latent_fhw: tuple[int, int, int], world_size: int, chunk_bytes: int = 0) -> BandPlan:
    """Bands along the frame's longer side (thicker bands: less halo to receive and recompute per
    owned row), sizes differing by at most one cell, at least one cell each."""
    if chunk_bytes < 0:
        raise ValueError(f"chunk_bytes is {chunk_bytes}; use 0 (whole band) or a positive byte count")
    _f, h, w = latent_fhw
    axis, cells = (HEIGHT, h) if h >= w else (WIDTH, w)
    return BandPlan(
        latent_fhw, world_size, axis, split_evenly(cells, max(1, min(world_size, cells))), chunk_bytes
    )


def na_window(length: int, kernel: int, start: int, stop: int) -> tuple[int, int]:
    """Rows [lo, hi) that the queries at rows [start, stop) of an axis of `length` attend with NA of
    `kernel` (NOTE [na bands])."""
    kernel = min(kernel, length)
    last_start = length - kernel
    lo = min(max(start - kernel // 2, 0), last_start)
    hi = min(max(stop - 1 - kernel // 2, 0), last_start) + kernel
    return lo, hi


@dataclass(frozen=True)
class Transfer:
    """Rows [start, stop) (the axis's global positions) that rank `source` sends to rank `target`."""

    source: int
    target: int
    start: int
    stop: int


def transfers(plan: BandPlan, scale: int, kernel: int) -> tuple[Transfer, ...]:
    """Every rank's sends before an NA layer of `kernel` on tokens `scale` times finer than the latent,
    in one order all ranks agree on."""
    length = plan.cells * scale
    out = []
    for target in range(plan.active_ranks):
        lo, hi = na_window(length, kernel, *plan.band(target, scale))
        for source in range(plan.active_ranks):
            if source == target:
                continue
            start, stop = plan.band(source, scale)
            if max(start, lo) < min(stop, hi):
                out.append(Transfer(source, target, max(start, lo), min(stop, hi)))
    return tuple(out)


def query_chunks(
    plan: BandPlan, rank: int, scale: int, kernel: int, row_bytes: int
) -> tuple[tuple[int, int], ...]:
    """The owned rows cut into runs whose NA call (queries plus their window's rows, 4 tensors of
    `row_bytes` per row: q, k, v, output) fits plan.chunk_bytes; one run when it is 0. At least one
    row per run, so a budget below one row's window runs row by row."""
    start, stop = plan.band(rank, scale)
    if plan.chunk_bytes == 0:
        return ((start, stop),)
    length = plan.cells * scale
    reach = min(kernel, length) - 1  # the window's rows beyond a run of queries, at most
    rows = max(1, plan.chunk_bytes // (4 * row_bytes) - reach)
    return tuple((first, min(first + rows, stop)) for first in range(start, stop, rows))
