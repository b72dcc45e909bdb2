// Shared between the CUDA kernel (exchange_kernel.cu) and the host engine (engine.cpp).
// Plain CUDA runtime types only: no torch headers here, so nvcc compiles the kernel quickly.
//
// NOTE [exchange buffer]: each rank owns ONE cudaMalloc allocation, shared with its peers by a CUDA IPC
// handle. Layout, identical on every rank (so a peer computes offsets without asking):
//
//   [ signal pad : kPadBytes ][ slot 0 : slot_bytes ][ slot 1 : slot_bytes ]
//
// - signal pad: `arrival[s]` (written by source rank s, read by the owner), `probe[s]` (written by s once,
//   at setup), and owner-only words (`epoch`, `grid_done`, `push_done[t]`, `abort`). Peers only ever
//   touch `arrival` and `probe`.
// - slot: where peers push this rank's incoming pieces, already in the final output layout, so the
//   owner's copy-out is a straight strided copy. Ops alternate slots by epoch parity (below).
//
// NOTE [epoch]: every op on every rank increments the owner's `epoch` (a device word, bumped by the last
// block of the kernel, so the value never round-trips through the host and a captured CUDA graph replays
// correctly). All ranks run the same ops in the same order, so op number e has epoch e on every rank.
// A source signals "my pieces of op e are in your slot" by a release store of `e` into the target's
// `arrival[source]`; the target acquires `arrival[source] >= e`. The words only grow, so there is no
// reset and no reset race.
//
// NOTE [slot reuse]: op e writes slot (e & 1). Why two slots are enough without an entry barrier: rank r
// launches op e+1 only after its op-e kernel finished, and that kernel waited for every peer's op-e
// arrival, i.e. every peer p had started its op-e kernel, so (stream order) p's op e-1 kernel, which read
// slot ((e-1) & 1) == ((e+1) & 1), had finished. So r never overwrites a slot its owner still reads.
// Assumes each rank issues its ops on one stream, or synchronises between streams as usual.
//
// NOTE [residency]: every block of the kernel spins (on one source's arrival) after pushing. Blocks
// that are not resident cannot run, so the grid must fit on the device at once next to the kernels of
// the other ranks that share this device: the host clamps blocks to
// (resident blocks per SM * SMs) / ranks_on_this_device. Ranks in different processes on one GPU are
// time-sliced by the driver (no MPS), which also makes progress, only slowly.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ltx2_mgpu {

constexpr int kMaxRanks = 16;         // ranks per group; 8 GPUs x 2 ranks each is the largest layout we test
constexpr int kThreads = 512;         // threads per block; 16 warps keep enough 16-byte stores in flight
constexpr int64_t kPadBytes = 65536;  // signal pad; keeps slot 0 aligned far beyond the 16 bytes we need

enum class Op : int32_t { kSendRecvHeads = 1, kGatherHeads = 2, kAllGatherTokens = 3, kAllGatherHeads = 4 };

// Byte offsets inside the signal pad (NOTE [exchange buffer]). Each group sits on its own 128-byte lines.
struct PadLayout {
  static constexpr int64_t kArrival = 0;                        // uint64_t[kMaxRanks], written by peers
  static constexpr int64_t kProbe = 1024;                       // uint64_t[kMaxRanks], written by peers
  static constexpr int64_t kEpoch = 2048;                       // uint64_t, owner only
  static constexpr int64_t kGridDone = 2176;                    // uint32_t, owner only
  static constexpr int64_t kAbort = 2304;                       // uint32_t, owner only: a wait timed out
  static constexpr int64_t kPushDone = 2432;                    // uint32_t[kMaxRanks], owner only
  static constexpr int64_t kProbeData = 4096;                   // 16 bytes per source, written by peers
  static constexpr int64_t kEnd = kProbeData + 16 * kMaxRanks;  // must stay <= kPadBytes
};
static_assert(PadLayout::kEnd <= kPadBytes, "signal pad overflows its reserved bytes");

// One piece of an exchange: n_outer x n_inner rows, each vecs_per_row vectors of the op's vector width.
// Row (o, i) starts at base + off + o * outer_stride + i * inner_stride (bytes) on each side.
struct RowCopy {
  uint32_t n_outer = 0;
  uint32_t n_inner = 0;
  uint32_t vecs_per_row = 0;
  uint32_t pad_ = 0;
  int64_t src_off = 0;
  int64_t src_outer = 0;
  int64_t src_inner = 0;
  int64_t dst_off = 0;
  int64_t dst_outer = 0;
  int64_t dst_inner = 0;
};

// Written into host-mapped memory by the first block whose wait times out (code last, after a fence).
struct ErrorRecord {
  int32_t code;  // 0: none, 1: timeout
  int32_t op;    // Op
  int32_t rank;  // the waiting rank
  int32_t peer;  // the rank it waited for
  uint64_t epoch;
  uint64_t elapsed_ns;
  uint64_t timeout_ns;
};

// Everything one launch needs, passed by value (about 2.4 KB; kernel parameters may take 4 KB).
struct Plan {
  int32_t op;
  int32_t rank;
  int32_t world_size;
  int32_t pad_;
  const char* src;                  // this rank's input
  char* out;                        // this rank's output (fresh tensor)
  char* own_data;                   // this rank's data region (slot 0)
  char* peer_data[kMaxRanks];       // each peer's data region (slot 0), mapped here; own_data at [rank]
  uint64_t* peer_arrival[kMaxRanks];  // each peer's arrival words, mapped here
  char* own_pad;                    // this rank's signal pad
  ErrorRecord* error;               // device view of the host-mapped error record
  int64_t slot_bytes;
  uint64_t timeout_ns;
  RowCopy push[kMaxRanks];  // src -> target t's slot (out itself when t == rank)
  RowCopy pull[kMaxRanks];  // own slot -> out, the piece that came from source s (unused for s == rank)
};

// Launches the fused exchange kernel: push, signal, wait per source, copy out. vec_bytes is 16, 8, 4, 2
// or 1 and must divide every offset, stride, row length and base address in the plan.
cudaError_t launch_exchange(const Plan& plan, int vec_bytes, int blocks, cudaStream_t stream);

// Setup probe: writes `value ^ (target)` into probe[rank] of every peer's pad and 16 bytes into the
// peer's probe data, with the same system-scope stores the exchange uses.
cudaError_t launch_probe(const Plan& plan, uint64_t value, cudaStream_t stream);

// Largest number of exchange blocks one SM holds at once (for NOTE [residency]).
cudaError_t exchange_blocks_per_sm(int* blocks);

}  // namespace ltx2_mgpu
