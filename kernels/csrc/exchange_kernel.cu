// The fused IPC exchange kernel. Concepts (signal pad, slot, epoch, residency) are defined once in the
// NOTEs of exchange.h; this file refers to them by name.
//
// One launch does the whole op on this rank:
//   1. push:     blocks are dealt round-robin over target ranks, starting with this rank (lane 0) so
//                that at any time the ranks push to different targets; each block copies its share of
//                the piece for its target with 16-byte (or narrower, see launch_exchange) vectors,
//                straight into the target's slot in the target's final output layout. The piece for
//                this rank itself goes straight into `out`.
//   2. signal:   the last block done with a target publishes the epoch into target.arrival[rank]
//                (release, system scope), after every block of that target fenced its stores.
//   3. copy out: blocks are dealt round-robin over the other ranks as sources; each waits (acquire,
//                system scope, with a timeout) for its source's arrival, then copies that source's piece
//                from its own slot into `out`. Sources that arrive early are copied while others are
//                still in flight.
//   4. finish:   the last block to finish bumps the owner's epoch (NOTE [epoch]).
//
// Why the pieces land in the final layout and are then copied once more instead of being pushed into
// `out`: `out` is a fresh tensor from this process's caching allocator, which peers cannot map (IPC needs
// a plain cudaMalloc, and mapping per call costs far more than the copy). The copy-out reads the slot at
// local HBM speed (about 4 TB/s on an H200) while the push crosses NVLink (about 0.45 TB/s one way), so it
// adds little, and it overlaps with sources that are still arriving.
//
// A wait never traps: on timeout the first block to notice records (op, rank, peer, epoch, elapsed) in
// host-mapped memory, raises the owner's abort word so the other blocks stop waiting, and the kernel
// returns; the host turns the record into a Python RuntimeError (engine.cpp).
#include "exchange.h"

namespace ltx2_mgpu {
namespace {

template <int kBytes>
struct VecOf;
template <>
struct VecOf<16> {
  using type = uint4;
};
template <>
struct VecOf<8> {
  using type = uint2;
};
template <>
struct VecOf<4> {
  using type = unsigned int;
};
template <>
struct VecOf<2> {
  using type = unsigned short;
};
template <>
struct VecOf<1> {
  using type = unsigned char;
};

// Vectors in flight per thread before the first store: four independent 16-byte loads hide most of the
// NVLink/HBM latency at 512 threads per block (HOPPER.md: several independent loads in flight).
constexpr int kUnroll = 4;

__device__ __forceinline__ uint64_t global_timer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ uint64_t ld_acquire_sys(const uint64_t* addr) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(addr) : "memory");
  return v;
}

__device__ __forceinline__ void st_release_sys(uint64_t* addr, uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(addr), "l"(v) : "memory");
}

template <typename T>
__device__ __forceinline__ T* pad_word(char* pad, int64_t offset) {
  return reinterpret_cast<T*>(pad + offset);
}

// Copies this block's share (part `part` of `nparts`) of one RowCopy. Reads from the own slot bypass L1
// (ld.global.cg): peers wrote that memory during this kernel, and L1 is not coherent with their stores.
template <int kVec, bool kFromSlot>
__device__ __forceinline__ void copy_rows(const RowCopy& c, const char* __restrict__ src, char* __restrict__ dst,
                                          uint32_t part, uint32_t nparts) {
  using V = typename VecOf<kVec>::type;
  const uint32_t per_row = c.vecs_per_row;
  const uint32_t total = c.n_outer * c.n_inner * per_row;  // host checks this fits in 31 bits
  const uint32_t step = nparts * blockDim.x * kUnroll;
  for (uint32_t base = part * blockDim.x * kUnroll + threadIdx.x; base < total; base += step) {
    V v[kUnroll];
    int64_t dst_at[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const uint32_t i = base + u * blockDim.x;
      if (i < total) {
        const uint32_t row = i / per_row;
        const uint32_t col = i - row * per_row;
        const uint32_t o = row / c.n_inner;
        const uint32_t in = row - o * c.n_inner;
        const int64_t src_at = c.src_off + int64_t(o) * c.src_outer + int64_t(in) * c.src_inner + int64_t(col) * kVec;
        dst_at[u] = c.dst_off + int64_t(o) * c.dst_outer + int64_t(in) * c.dst_inner + int64_t(col) * kVec;
        const V* sp = reinterpret_cast<const V*>(src + src_at);
        v[u] = kFromSlot ? __ldcg(sp) : __ldg(sp);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (base + u * blockDim.x < total) {
        __stcg(reinterpret_cast<V*>(dst + dst_at[u]), v[u]);
      }
    }
  }
}

__device__ void report_timeout(const Plan& p, int source, uint64_t epoch, uint64_t elapsed_ns) {
  unsigned int* abort_word = pad_word<unsigned int>(p.own_pad, PadLayout::kAbort);
  if (atomicCAS(abort_word, 0u, 1u) != 0u) {
    return;  // another block already reported; one record per failure
  }
  volatile ErrorRecord* e = p.error;
  e->op = p.op;
  e->rank = p.rank;
  e->peer = source;
  e->epoch = epoch;
  e->elapsed_ns = elapsed_ns;
  e->timeout_ns = p.timeout_ns;
  __threadfence_system();
  e->code = 1;  // written last: the host reads the fields only once it sees a code
  __threadfence_system();
}

// Thread 0 of a block: true once `source` published `epoch` (or a later one) into our arrival words;
// false on timeout or when another block of this rank already timed out.
__device__ bool wait_arrival(const Plan& p, int source, uint64_t epoch) {
  const uint64_t* word = pad_word<uint64_t>(p.own_pad, PadLayout::kArrival) + source;
  const volatile unsigned int* abort_word = pad_word<unsigned int>(p.own_pad, PadLayout::kAbort);
  if (ld_acquire_sys(word) >= epoch) {
    return true;
  }
  const uint64_t start = global_timer_ns();
  while (true) {
    if (ld_acquire_sys(word) >= epoch) {
      return true;
    }
    if (*abort_word != 0u) {
      return false;
    }
    const uint64_t elapsed = global_timer_ns() - start;
    if (elapsed > p.timeout_ns) {
      report_timeout(p, source, epoch, elapsed);
      return false;
    }
  }
}

template <int kVec>
__global__ void __launch_bounds__(kThreads) exchange_kernel(const __grid_constant__ Plan p) {
  __shared__ uint64_t s_epoch;
  __shared__ int s_arrived;
  uint64_t* epoch_word = pad_word<uint64_t>(p.own_pad, PadLayout::kEpoch);
  if (threadIdx.x == 0) {
    s_epoch = *reinterpret_cast<volatile uint64_t*>(epoch_word) + 1;
  }
  __syncthreads();
  const uint64_t epoch = s_epoch;
  const int64_t slot_off = (epoch & 1) ? p.slot_bytes : 0;  // NOTE [slot reuse]
  const int n = p.world_size;
  const uint32_t b = blockIdx.x;
  const uint32_t g = gridDim.x;  // host guarantees g >= n

  {  // 1. push, 2. signal
    const uint32_t lane = b % n;
    const int target = (p.rank + int(lane)) % n;
    const uint32_t nparts = (g - 1 - lane) / n + 1;
    char* dst = target == p.rank ? p.out : p.peer_data[target] + slot_off;
    copy_rows<kVec, false>(p.push[target], p.src, dst, b / n, nparts);
    if (target != p.rank) {
      __threadfence_system();  // each thread's pushed stores, before the block reports them done
      __syncthreads();
      if (threadIdx.x == 0) {
        unsigned int* done = pad_word<unsigned int>(p.own_pad, PadLayout::kPushDone) + target;
        if (atomicAdd(done, 1u) == nparts - 1) {
          atomicExch(done, 0u);  // every block of this target counted; the next launch starts after us
          __threadfence_system();
          st_release_sys(p.peer_arrival[target] + p.rank, epoch);
        }
      }
    }
  }

  if (n > 1) {  // 3. copy out
    const uint32_t lanes = n - 1;
    const uint32_t lane = b % lanes;
    const int source = (p.rank + 1 + int(lane)) % n;
    const uint32_t nparts = (g - 1 - lane) / lanes + 1;
    if (threadIdx.x == 0) {
      s_arrived = wait_arrival(p, source, epoch) ? 1 : 0;
    }
    __syncthreads();
    if (s_arrived) {
      copy_rows<kVec, true>(p.pull[source], p.own_data + slot_off, p.out, b / lanes, nparts);
    }
  }

  __syncthreads();  // 4. finish
  if (threadIdx.x == 0) {
    unsigned int* grid_done = pad_word<unsigned int>(p.own_pad, PadLayout::kGridDone);
    if (atomicAdd(grid_done, 1u) == g - 1) {
      atomicExch(grid_done, 0u);
      *reinterpret_cast<volatile uint64_t*>(epoch_word) = epoch;
    }
  }
}

__global__ void probe_kernel(const __grid_constant__ Plan p, uint64_t value) {
  const int target = threadIdx.x;
  if (target >= p.world_size || target == p.rank) {
    return;
  }
  uint4* data = reinterpret_cast<uint4*>(p.peer_data[target] - kPadBytes + PadLayout::kProbeData) + p.rank;
  __stcg(data, make_uint4(unsigned(value), unsigned(value >> 32), unsigned(target), unsigned(p.rank)));
  __threadfence_system();
  uint64_t* probe = reinterpret_cast<uint64_t*>(p.peer_data[target] - kPadBytes + PadLayout::kProbe) + p.rank;
  st_release_sys(probe, value);
}

}  // namespace

cudaError_t launch_exchange(const Plan& plan, int vec_bytes, int blocks, cudaStream_t stream) {
  switch (vec_bytes) {
    case 16:
      exchange_kernel<16><<<blocks, kThreads, 0, stream>>>(plan);
      break;
    case 8:
      exchange_kernel<8><<<blocks, kThreads, 0, stream>>>(plan);
      break;
    case 4:
      exchange_kernel<4><<<blocks, kThreads, 0, stream>>>(plan);
      break;
    case 2:
      exchange_kernel<2><<<blocks, kThreads, 0, stream>>>(plan);
      break;
    case 1:
      exchange_kernel<1><<<blocks, kThreads, 0, stream>>>(plan);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t launch_probe(const Plan& plan, uint64_t value, cudaStream_t stream) {
  probe_kernel<<<1, kMaxRanks, 0, stream>>>(plan, value);
  return cudaGetLastError();
}

cudaError_t exchange_blocks_per_sm(int* blocks) {
  // The narrowest instance uses the most registers per thread or the same; take the minimum over all.
  int fewest = 1 << 30;
  int n = 0;
  cudaError_t err = cudaSuccess;
#define LTX2_OCCUPANCY(V)                                                                       \
  err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, exchange_kernel<V>, kThreads, 0);     \
  if (err != cudaSuccess) return err;                                                            \
  fewest = n < fewest ? n : fewest;
  LTX2_OCCUPANCY(16)
  LTX2_OCCUPANCY(8)
  LTX2_OCCUPANCY(4)
  LTX2_OCCUPANCY(2)
  LTX2_OCCUPANCY(1)
#undef LTX2_OCCUPANCY
  *blocks = fewest;
  return cudaSuccess;
}

}  // namespace ltx2_mgpu
