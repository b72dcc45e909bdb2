"""GPU tests of the CUDA-IPC exchange: several ranks (processes) share ONE GPU, gloo for control (NCCL
refuses two ranks on one GPU), CUDA IPC for data. With more GPUs, ranks are spread so that rank != device.

Byte-exact round trips for 2, 3 and 4 ranks in bf16/fp16/fp32 with dividing and non-dividing token
counts and uneven heads; results equal a plain-torch reference and the torch.distributed fallback; a rank
that never arrives yields a timeout error on the others; 1000 back-to-back calls with no drift; a small
sequence-parallel attention gives the same bytes over the kernel and over the fallback.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from conftest import run_ranks
from ltx2_mgpu.kernels.partition import even_split, head_split, offsets

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

RANK_TIMEOUT_S = 150.0  # one spawned group, build excluded (the module fixture builds first)
TIMEOUT_TEST_S = 2.0  # kernel wait timeout in the missing-rank test
HEAD_DIM = 128


@pytest.fixture(scope="module", autouse=True)
def _built_kernels() -> None:
    from ltx2_mgpu.kernels.build import build_kernels

    build_kernels()  # once here, so the spawned ranks only load the cached binary


def _run_ranks(fn: Callable[..., None], world_size: int, tmp_path: Path, *args: object) -> None:
    run_ranks(fn, world_size, tmp_path, *args, timeout_s=RANK_TIMEOUT_S)


def _device_of(rank: int, world_size: int) -> torch.device:
    # Reversed so that rank != device wherever there is more than one GPU; all share GPU 0 otherwise.
    return torch.device("cuda", (world_size - 1 - rank) % torch.cuda.device_count())


def _setup(rank: int, world_size: int, init_file: str, **kwargs: object):
    os.environ["LTX2_MGPU_ALL2ALL"] = "kernel"  # fail loudly instead of testing the fallback by accident
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world_size)
    device = _device_of(rank, world_size)
    torch.cuda.set_device(device)
    from ltx2_mgpu.kernels import make_head_exchange

    exchange = make_head_exchange(None, device, **kwargs)
    assert exchange.name == "ipc-kernel", exchange.name
    return exchange, device


def _random(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device, seed: int) -> torch.Tensor:
    """Random bytes viewed as `dtype` (NaNs and all): the comparisons are on bytes, not values."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    numel = 1
    for s in shape:
        numel *= s
    raw = torch.randint(
        0, 256, (numel * torch.empty((), dtype=dtype).element_size(),), dtype=torch.uint8, generator=gen
    )
    return raw.view(dtype).reshape(shape).to(device)


def _same_bytes(a: torch.Tensor, b: torch.Tensor) -> bool:
    return (
        a.shape == b.shape
        and a.dtype == b.dtype
        and torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))
    )


def _cases(world_size: int) -> list[tuple[torch.dtype, tuple[int, ...], tuple[int, ...], int]]:
    """(dtype, token_counts, head_counts, head_dim): dividing and non-dividing tokens, odd tails."""
    heads = head_split(32, world_size)
    cases = []
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        cases.append((dtype, even_split(256 * world_size, world_size), heads, HEAD_DIM))  # divides
        cases.append((dtype, even_split(256 * world_size + 1, world_size), heads, HEAD_DIM))  # does not
    cases.append((torch.bfloat16, even_split(6144, world_size), heads, HEAD_DIM))  # grows the buffer
    cases.append((torch.float32, even_split(7, world_size), head_split(5, world_size), 3))  # 4-byte vectors
    cases.append((torch.bfloat16, (3, *([0] * (world_size - 1))), heads, 5))  # 2-byte vectors, empty ranks
    cases.append((torch.uint8, even_split(9, world_size), heads, 3))  # 1-byte vectors
    return cases


def _round_trip_worker(rank: int, world_size: int, init_file: str) -> None:
    exchange, device = _setup(rank, world_size, init_file)
    from ltx2_mgpu.kernels import TorchDistHeadExchange

    fallback = TorchDistHeadExchange(None)
    batch = 2
    first_slot = exchange.slot_bytes
    for case, (dtype, tokens, heads, head_dim) in enumerate(_cases(world_size)):
        t_off, h_off = offsets(tokens), offsets(heads)
        mine_t = slice(t_off[rank], t_off[rank] + tokens[rank])
        mine_h = slice(h_off[rank], h_off[rank] + heads[rank])
        full = _random((batch, sum(tokens), sum(heads), head_dim), dtype, device, seed=case)
        x = full[:, mine_t].clone()
        y = exchange.send_recv_heads(x, tokens, heads)
        x_saved = x.clone()
        x.zero_()  # mutating the input right after the call must not change the result
        z = exchange.gather_heads(y, tokens, heads)
        flat = full.flatten(2)
        tok = exchange.all_gather_tokens(flat[:, mine_t].contiguous(), tokens)
        hd = exchange.all_gather_heads(full[:, :, mine_h].contiguous(), heads)
        exchange.check()
        label = f"rank {rank}/{world_size} {dtype} tokens={tokens} heads={heads} d={head_dim}"
        assert _same_bytes(y, full[:, :, mine_h]), f"send_recv_heads != reference: {label}"
        assert _same_bytes(z, x_saved), f"gather_heads(send_recv_heads(x)) != x: {label}"
        assert _same_bytes(tok, flat), f"all_gather_tokens != reference: {label}"
        assert _same_bytes(hd, full), f"all_gather_heads != reference: {label}"
        assert _same_bytes(fallback.send_recv_heads(x_saved, tokens, heads), y), (
            f"kernel != fallback: {label}"
        )
        if rank == 0:
            print(
                f"OK {label}: send_recv, gather (round trip), all_gather_tokens, all_gather_heads, = fallback"
            )
    assert exchange.slot_bytes > first_slot  # the 6144-token case grew the buffers collectively
    _compile_check(exchange, device, world_size, rank)
    exchange.close()
    dist.destroy_process_group()


def _compile_check(exchange, device: torch.device, world_size: int, rank: int) -> None:
    """torch.compile(fullgraph=True) traces the custom ops (fake impls) and gives the eager bytes."""
    tokens, heads = even_split(64 * world_size + 1, world_size), head_split(32, world_size)

    def round_trip(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = exchange.send_recv_heads(x * 1, tokens, heads)
        return y, exchange.gather_heads(y, tokens, heads)

    # Finite values here: `x * 1` turns NaN payloads of random bytes into the canonical NaN.
    gen = torch.Generator(device="cpu").manual_seed(99 + rank)
    x = torch.randn(1, tokens[rank], 32, HEAD_DIM, generator=gen).to(device, torch.bfloat16)
    compiled = torch.compile(round_trip, fullgraph=True, backend="aot_eager")
    y_c, z_c = compiled(x)
    y_e, z_e = round_trip(x)
    exchange.check()
    assert _same_bytes(y_c, y_e), "compiled send_recv_heads != eager"
    assert _same_bytes(z_c, x) and _same_bytes(z_e, x), "round trip != input"
    if rank == 0:
        print(f"OK torch.compile(fullgraph=True, backend=aot_eager) round trip, {world_size} ranks")


@pytest.mark.parametrize("world_size", [2, 3, 4])
def test_round_trip_byte_exact(world_size: int, tmp_path: Path) -> None:
    _run_ranks(_round_trip_worker, world_size, tmp_path)


def _timeout_worker(rank: int, world_size: int, init_file: str) -> None:
    from ltx2_mgpu.kernels.ipc_all2all import ExchangeTimeoutError

    exchange, device = _setup(rank, world_size, init_file, timeout_s=TIMEOUT_TEST_S)
    missing = world_size - 1
    tokens, heads = even_split(64 * world_size, world_size), head_split(32, world_size)
    if rank != missing:
        x = _random((1, tokens[rank], 32, HEAD_DIM), torch.bfloat16, device, seed=rank)
        start = time.monotonic()
        exchange.send_recv_heads(x, tokens, heads)
        with pytest.raises(ExchangeTimeoutError) as info:
            exchange.check()
        waited = time.monotonic() - start
        err = info.value
        assert (err.rank, err.peer, err.op) == (rank, missing, "send_recv_heads"), str(err)
        assert TIMEOUT_TEST_S <= err.elapsed_s < TIMEOUT_TEST_S + 1.0, str(err)
        assert waited < TIMEOUT_TEST_S + 5.0, f"error surfaced after {waited:.1f} s"
        with pytest.raises(ExchangeTimeoutError):  # sticky: the exchange is unusable now
            exchange.send_recv_heads(x, tokens, heads)
        assert torch.ones(4, device=device).sum().item() == 4.0  # no trap: the CUDA context still works
        print(f"OK rank {rank}: {err} (surfaced after {waited:.2f} s)")
    dist.barrier()
    exchange.close(collective=False)
    dist.destroy_process_group()


def test_missing_rank_times_out_with_named_error(tmp_path: Path) -> None:
    _run_ranks(_timeout_worker, 3, tmp_path)


def _many_calls_worker(rank: int, world_size: int, init_file: str, calls: int) -> None:
    exchange, device = _setup(rank, world_size, init_file)
    tokens, heads = even_split(512 * world_size + 1, world_size), head_split(32, world_size)
    h_off = offsets(heads)
    full = _random((1, sum(tokens), 32, HEAD_DIM), torch.bfloat16, device, seed=7)
    x = full[:, offsets(tokens)[rank] : offsets(tokens)[rank] + tokens[rank]].contiguous()
    expected_y = full[:, :, h_off[rank] : h_off[rank] + heads[rank]]
    start_epoch = exchange.calls_completed()
    start = time.monotonic()
    z = x
    for i in range(calls):
        y = exchange.send_recv_heads(z, tokens, heads)
        z = exchange.gather_heads(y, tokens, heads)
        if (i + 1) % 100 == 0:
            assert _same_bytes(y, expected_y) and _same_bytes(z, x), f"drift after {i + 1} round trips"
    exchange.check()
    assert exchange.calls_completed() - start_epoch == 2 * calls
    if rank == 0:
        per_call_ms = (time.monotonic() - start) / (2 * calls) * 1e3
        print(f"OK {2 * calls} back-to-back calls on {world_size} ranks, no drift, {per_call_ms:.3f} ms/call")
    exchange.close()
    dist.destroy_process_group()


def test_thousand_calls_no_drift(tmp_path: Path) -> None:
    _run_ranks(_many_calls_worker, 2, tmp_path, 500)  # 500 round trips = 1000 calls


def _sp_attention(exchange, q, k, v, tokens, heads) -> torch.Tensor:
    """Sequence-parallel attention: heads to ranks, full-sequence attention per head, heads back."""
    qh, kh, vh = (exchange.send_recv_heads(t, tokens, heads) for t in (q, k, v))
    o = torch.nn.functional.scaled_dot_product_attention(*(t.transpose(1, 2) for t in (qh, kh, vh)))
    return exchange.gather_heads(o.transpose(1, 2).contiguous(), tokens, heads)


def _sp_parity_worker(rank: int, world_size: int, init_file: str) -> None:
    exchange, device = _setup(rank, world_size, init_file)
    from ltx2_mgpu.kernels import TorchDistHeadExchange

    fallback = TorchDistHeadExchange(None)
    tokens, heads = even_split(1000, world_size), head_split(32, world_size)
    mine = slice(offsets(tokens)[rank], offsets(tokens)[rank] + tokens[rank])
    gen = torch.Generator(device="cpu").manual_seed(3)
    q, k, v = (torch.randn(1, 1000, 32, 64, generator=gen).to(device, torch.bfloat16) for _ in range(3))
    local = [t[:, mine].contiguous() for t in (q, k, v)]
    with_kernel = _sp_attention(exchange, *local, tokens, heads)
    with_fallback = _sp_attention(fallback, *local, tokens, heads)
    exchange.check()
    single = torch.nn.functional.scaled_dot_product_attention(*(t.transpose(1, 2) for t in (q, k, v)))
    single = single.transpose(1, 2)[:, mine]
    assert _same_bytes(with_kernel, with_fallback), "SP attention over the kernel != over the fallback"
    torch.testing.assert_close(with_kernel, single, atol=2e-2, rtol=2e-2)
    if rank == 0:
        print(f"OK SP attention parity on {world_size} ranks: kernel == fallback (bytes), ~= single GPU")
    exchange.close()
    dist.destroy_process_group()


def test_sp_attention_kernel_equals_fallback(tmp_path: Path) -> None:
    _run_ranks(_sp_parity_worker, 3, tmp_path)
