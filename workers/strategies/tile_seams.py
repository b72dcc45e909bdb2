"""Seam metric of a tiled result: do the places where tiles meet stand out from the rest of the frame?

NOTE [seam ratio]: a seam is visible when the change between neighbouring cells at a tile border is
larger than the picture's own changes elsewhere. Along each tiled axis, take the mean absolute
difference between neighbouring cells (over batch, channels, frames and the other axis) at every
cell edge, and split the edges in two sets:
  - seam edges: the edges of each band of cells that two neighbouring tiles share, from the leading
    edge of the first shared cell to the trailing edge of the last (o + 1 edges for an overlap of o;
    overlap 0: the one edge where the tiles meet). A trapezoid blend spreads a mismatch d between
    two tiles over exactly these edges (d / (o + 1) each); a hard cut puts all of it on one edge;
  - interior edges: every other edge, where one tile alone decides both cells.
ratio = mean(seam edges) / mean(interior edges), per axis; a report's ratio is the larger of its
axes. About 1: the borders change like the rest of the frame (no seam); a tile mismatch adds on top.
For decoded pixels pass `scale` = 32 (pixels per latent cell): only the edges between cells are
compared, so the VAE's own cell pattern weighs on both sets alike.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch

from .tiled import AxisSpan, TileGrid


@dataclass(frozen=True)
class AxisSeams:
    """One tiled axis. Edges are numbered by cell: edge g lies between cells g - 1 and g."""

    axis: str
    seam_edges: tuple[int, ...]
    seam_mean: float  # mean |difference| across the seam edges
    interior_mean: float  # the same over every other edge

    @property
    def ratio(self) -> float:
        return self.seam_mean / self.interior_mean


@dataclass(frozen=True)
class SeamReport:
    """The axes with more than one tile (none for a 1x1 grid: nothing can seam, ratio 1)."""

    axes: tuple[AxisSeams, ...]

    @property
    def ratio(self) -> float:
        return max((a.ratio for a in self.axes), default=1.0)

    def as_dict(self) -> dict:
        """Plain numbers for JSON (bench/bench_tdp.py)."""
        return {
            "seam_ratio": round(self.ratio, 4),
            **{
                f"seam_{a.axis}": {
                    "ratio": round(a.ratio, 4),
                    "seam_mean": round(a.seam_mean, 6),
                    "interior_mean": round(a.interior_mean, 6),
                    "seam_edges": list(a.seam_edges),
                }
                for a in self.axes
            },
        }


def seam_edges(spans: tuple[AxisSpan, ...]) -> tuple[int, ...]:
    """The cell edges of every band shared by neighbouring spans (NOTE [seam ratio])."""
    edges: set[int] = set()
    for before, after in itertools.pairwise(spans):
        edges.update(range(after.start, before.end + 1))
    return tuple(sorted(edges))


def edge_differences(x: torch.Tensor, dim: int, extent: int, scale: int) -> torch.Tensor:
    """[extent - 1] float64: per cell edge g = 1 .. extent - 1, the mean |x[g*scale] - x[g*scale - 1]|
    along `dim` of x (size extent * scale), averaged over every other dimension."""
    if x.shape[dim] != extent * scale:
        raise ValueError(
            f"axis {dim} of the tensor has {x.shape[dim]} entries, expected {extent} cells x {scale}"
        )
    steps = x.double().diff(dim=dim).abs()  # entry i: between i and i + 1
    at_edges = steps.index_select(dim, torch.arange(1, extent, device=x.device) * scale - 1)
    other = [d for d in range(x.dim()) if d != dim % x.dim()]
    return at_edges.mean(dim=other)


def seam_report(x: torch.Tensor, grid: TileGrid, scale: int = 1) -> SeamReport:
    """NOTE [seam ratio] for x [..., H * scale, W * scale] blended over `grid` (extent (H, W) cells):
    a latent [B, C, F, H, W] (scale 1) or decoded frames [..., H*32, W*32] (scale 32, channels first).
    A grid with spans of frames is measured along time too (a latent only).

    Raises ValueError when an axis has no interior edge to compare with (tiles no longer than the
    overlap plus one cell): use fewer tiles or a smaller overlap for the measurement.
    """
    rows, columns = grid.counts
    spans = {
        "height": tuple(grid.tiles[i * columns].h for i in range(rows)),
        "width": tuple(grid.tiles[j].w for j in range(columns)),
        # NOTE [time tiles]: frames, for a latent [B, C, F, H, W] (scale 1 only: decoded frames are not cells)
        "time": tuple(grid.tiles[k * rows * columns].t for k in range(grid.time_tiles))
        if grid.time_tiles > 1
        else (),
    }
    axes = []
    for (name, axis_spans), dim, extent in zip(spans.items(), (-2, -1, -3), (*grid.extent, grid.frames)):
        if len(axis_spans) < 2:
            continue
        diffs = edge_differences(x, dim, extent, scale)
        seams = seam_edges(axis_spans)
        is_seam = torch.zeros(extent - 1, dtype=torch.bool)
        is_seam[[g - 1 for g in seams]] = True
        if is_seam.all():
            raise ValueError(
                f"every cell edge along {name} lies in an overlap band ({grid.describe()}, "
                f"overlap {grid.overlap}, {extent} cells): nothing to compare the seams with. Measure with fewer "
                "tiles or a smaller overlap."
            )
        axes.append(
            AxisSeams(
                axis=name,
                seam_edges=seams,
                seam_mean=float(diffs[is_seam].mean()),
                interior_mean=float(diffs[~is_seam].mean()),
            )
        )
    return SeamReport(tuple(axes))
