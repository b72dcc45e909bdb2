"""CPU tests of kernels/: the CUDA sources compile (when nvcc exists), selection falls back without a GPU,
the fallback equals a plain-torch reference for every op, and the custom ops trace with fake tensors.

Ranks are processes started with torch.multiprocessing (spawn) over a gloo group, as in CI.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from torch._subclasses.fake_tensor import FakeTensorMode

from conftest import run_ranks
from ltx2_mgpu.kernels import build as kbuild
from ltx2_mgpu.kernels.partition import even_split, head_split, offsets

RANK_TIMEOUT_S = 120.0  # one spawned group; generous for a loaded 2-core CI machine


def _run_ranks(fn: Callable[..., None], world_size: int, tmp_path: Path, *args: object) -> None:
    run_ranks(fn, world_size, tmp_path, *args, timeout_s=RANK_TIMEOUT_S)


def _init(rank: int, world_size: int, init_file: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world_size)


def _pattern(shape: tuple[int, ...], dtype: torch.dtype, salt: int = 0) -> torch.Tensor:
    """Distinct integer values (exact in fp32), so a misplaced element cannot go unnoticed."""
    n = 1
    for s in shape:
        n *= s
    return (torch.arange(n, dtype=torch.int64) * 7 + salt).remainder(1 << 20).to(dtype).reshape(shape)


def _same_bytes(a: torch.Tensor, b: torch.Tensor) -> bool:
    return (
        a.shape == b.shape
        and a.dtype == b.dtype
        and torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))
    )


# (token_counts, head_counts) per world size: dividing, not dividing, a rank with no tokens, uneven heads.
CASES = {
    2: [((4, 4), head_split(32, 2)), (even_split(7, 2), head_split(5, 2)), ((5, 0), head_split(3, 2))],
    3: [((2, 2, 2), head_split(32, 3)), (even_split(7, 3), head_split(32, 3)), ((1, 1, 0), head_split(4, 3))],
}


def _fallback_worker(rank: int, world_size: int, init_file: str) -> None:
    _init(rank, world_size, init_file)
    from ltx2_mgpu.kernels import TorchDistHeadExchange, kernel_status, make_head_exchange

    exchange = make_head_exchange(None, torch.device("cpu"))
    assert isinstance(exchange, TorchDistHeadExchange), type(exchange)
    status = kernel_status()
    assert status.selected == "torch.distributed" and "needs CUDA" in (status.selected_reason or "")
    batch, head_dim = 2, 4
    for case, (tokens, heads) in enumerate(CASES[world_size]):
        t_off, h_off = offsets(tokens), offsets(heads)
        t_total, h_total = sum(tokens), sum(heads)
        mine_t = slice(t_off[rank], t_off[rank] + tokens[rank])
        mine_h = slice(h_off[rank], h_off[rank] + heads[rank])
        full = _pattern((batch, t_total, h_total, head_dim), torch.float32, salt=case)
        x = full[:, mine_t].clone()
        y = exchange.send_recv_heads(x, tokens, heads)
        assert _same_bytes(y, full[:, :, mine_h]), f"send_recv_heads, case {case}"
        assert _same_bytes(exchange.gather_heads(y, tokens, heads), x), f"gather_heads, case {case}"
        flat = full.flatten(2)
        got = exchange.all_gather_tokens(flat[:, mine_t].clone(), tokens)
        assert _same_bytes(got, flat), f"all_gather_tokens, case {case}"
        got = exchange.all_gather_heads(full[:, :, mine_h].clone(), heads)
        assert _same_bytes(got, full), f"all_gather_heads, case {case}"
    dist.destroy_process_group()


@pytest.mark.parametrize("world_size", [2, 3])
def test_fallback_selected_and_equals_reference(world_size: int, tmp_path: Path) -> None:
    _run_ranks(_fallback_worker, world_size, tmp_path)


def _forced_kernel_worker(rank: int, world_size: int, init_file: str) -> None:
    _init(rank, world_size, init_file)
    from ltx2_mgpu.kernels import make_head_exchange

    os.environ["LTX2_MGPU_ALL2ALL"] = "kernel"
    with pytest.raises(RuntimeError, match=r"cannot run: rank 0: .*needs CUDA"):
        make_head_exchange(None, torch.device("cpu"))
    os.environ["LTX2_MGPU_ALL2ALL"] = "nonsense"
    with pytest.raises(ValueError, match="LTX2_MGPU_ALL2ALL"):
        make_head_exchange(None, torch.device("cpu"))
    dist.destroy_process_group()


def test_forced_kernel_raises_with_reason_on_cpu(tmp_path: Path) -> None:
    _run_ranks(_forced_kernel_worker, 2, tmp_path)


def test_build_config_targets_hopper_and_caches_outside_source(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("LTX2_MGPU_CACHE", str(tmp_path))
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.0;8.6+PTX")
    config = kbuild.build_config()
    assert config.build_dir.is_relative_to(tmp_path)
    assert not config.build_dir.is_relative_to(kbuild.CSRC_DIR.parent.parent)
    assert config.archs == ((8, 0), (8, 6), (9, 0))
    assert "-gencode=arch=compute_90,code=sm_90" in config.cuda_flags
    assert "-gencode=arch=compute_90,code=compute_90" in config.cuda_flags  # PTX for later GPUs
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "")
    assert (9, 0) in kbuild.build_config().archs


def test_cuda_home_prefers_real_toolkit_over_wrapper(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    if not (kbuild.DEFAULT_CUDA_HOME / "bin" / "nvcc").is_file():
        pytest.skip("no toolkit at /usr/local/cuda")
    assert kbuild.find_cuda_home() == kbuild.DEFAULT_CUDA_HOME


def test_load_kernels_never_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(verbose: bool = False) -> None:
        raise kbuild.KernelBuildError("nvcc said: error: something\nmore output")

    monkeypatch.setattr(kbuild, "_STATE", kbuild._LoadState())
    monkeypatch.setattr(kbuild, "build_kernels", fail)
    assert kbuild.load_kernels() is None
    assert kbuild.build_failure_reason() == "nvcc said: error: something"
    assert kbuild.load_kernels() is None  # cached verdict, no second build


@pytest.mark.skipif(kbuild.find_cuda_home() is None, reason="no CUDA toolkit (nvcc)")
def test_sources_compile(tmp_path: Path) -> None:
    """Builds the extension from csrc/ (about 45 s on 2 cores) and imports it without a GPU."""
    env = {**os.environ, "LTX2_MGPU_CACHE": str(tmp_path)}
    code = (
        "from ltx2_mgpu.kernels.build import build_kernels; m = build_kernels(); "
        "print(m.__file__, m.MAX_RANKS, m.Engine.__name__)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=900
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert str(tmp_path) in result.stdout and " 16 Engine" in result.stdout


def test_custom_ops_trace_with_fake_tensors() -> None:
    from torch.fx.experimental.proxy_tensor import make_fx

    from ltx2_mgpu.kernels import ops  # noqa: F401  (registers torch.ops.ltx2_mgpu)

    tokens, heads = [3, 2, 2], [11, 11, 10]

    def round_trip(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = torch.ops.ltx2_mgpu.send_recv_heads(x, 1, 1, tokens, heads)
        return (
            y,
            torch.ops.ltx2_mgpu.gather_heads(y, 1, 1, tokens, heads),
            torch.ops.ltx2_mgpu.all_gather_tokens(x.flatten(2), 1, 1, tokens),
            torch.ops.ltx2_mgpu.all_gather_heads(y, 1, 1, heads),
        )

    graph = make_fx(round_trip, tracing_mode="fake")(torch.zeros(2, 2, 32, 8))
    code = graph.code
    for op in ("send_recv_heads", "gather_heads", "all_gather_tokens", "all_gather_heads"):
        assert f"ltx2_mgpu.{op}" in code
    with FakeTensorMode():
        out = round_trip(torch.empty(2, 2, 32, 8))
    assert [tuple(t.shape) for t in out] == [(2, 7, 11, 8), (2, 2, 32, 8), (2, 7, 256), (2, 7, 32, 8)]


def test_closed_exchange_id_is_a_clear_error() -> None:
    from ltx2_mgpu.kernels import ops

    with pytest.raises(RuntimeError, match="closed or was garbage-collected"):
        ops.lookup(10**9)


def test_timeout_error_names_op_rank_peer_and_elapsed() -> None:
    from ltx2_mgpu.kernels.ipc_all2all import ExchangeTimeoutError

    err = ExchangeTimeoutError("gather_heads", 1, 2, 17, 10.02, 10.0)
    text = str(err)
    assert "rank 1" in text and "rank 2" in text and "gather_heads" in text and "10.02 s" in text
    assert (err.rank, err.peer, err.epoch) == (1, 2, 17)
