// Host side of the IPC exchange: one Engine per rank owns the exchange buffer (NOTE [exchange buffer] in
// exchange.h), the mapped views of its peers' buffers and the host-mapped error record, and turns each
// op's shapes into a Plan for the fused kernel. Python (ipc_all2all.py) owns the Engine's lifetime, the
// handle exchange over the process group, the probe verdict and the timeout reporting.
//
// Errors: every failure on the host throws (TORCH_CHECK -> Python RuntimeError); nothing here exits or
// traps. close() is idempotent; the destructor calls it and swallows errors, so it never throws.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/extension.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "exchange.h"

#define LTX2_CUDA_CHECK(expr)                                                                           \
  do {                                                                                                  \
    const cudaError_t ltx2_err_ = (expr);                                                               \
    TORCH_CHECK(ltx2_err_ == cudaSuccess, "ltx2_mgpu exchange: ", #expr, " failed: ",                   \
                cudaGetErrorString(ltx2_err_));                                                         \
  } while (0)

namespace ltx2_mgpu {
namespace {

const char* op_name(int32_t op) {
  switch (static_cast<Op>(op)) {
    case Op::kSendRecvHeads:
      return "send_recv_heads";
    case Op::kGatherHeads:
      return "gather_heads";
    case Op::kAllGatherTokens:
      return "all_gather_tokens";
    case Op::kAllGatherHeads:
      return "all_gather_heads";
  }
  return "unknown";
}

std::vector<int64_t> exclusive_sum(const std::vector<int64_t>& counts) {
  std::vector<int64_t> out(counts.size(), 0);
  for (size_t i = 1; i < counts.size(); ++i) out[i] = out[i - 1] + counts[i - 1];
  return out;
}

int64_t total(const std::vector<int64_t>& counts) {
  int64_t sum = 0;
  for (int64_t c : counts) sum += c;
  return sum;
}

// A piece of `rows` = n_outer x n_inner rows of `row_bytes`, with byte offsets and strides on each side.
RowCopy rows(int64_t n_outer, int64_t n_inner, int64_t row_bytes, int64_t src_off, int64_t src_outer,
             int64_t src_inner, int64_t dst_off, int64_t dst_outer, int64_t dst_inner) {
  RowCopy c;
  c.n_outer = static_cast<uint32_t>(n_outer);
  c.n_inner = static_cast<uint32_t>(n_inner);
  c.vecs_per_row = static_cast<uint32_t>(row_bytes);  // bytes for now; divided by the vector width later
  c.src_off = src_off;
  c.src_outer = src_outer;
  c.src_inner = src_inner;
  c.dst_off = dst_off;
  c.dst_outer = dst_outer;
  c.dst_inner = dst_inner;
  return c;
}

}  // namespace

class Engine {
 public:
  Engine(int64_t rank, int64_t world_size, int64_t device, int64_t slot_bytes, int64_t blocks, double timeout_s)
      : rank_(static_cast<int>(rank)),
        world_size_(static_cast<int>(world_size)),
        device_(static_cast<int>(device)),
        slot_bytes_(slot_bytes),
        blocks_(static_cast<int>(blocks)) {
    TORCH_CHECK(world_size >= 1 && world_size <= kMaxRanks, "ltx2_mgpu exchange supports 1 to ", kMaxRanks,
                " ranks, got ", world_size);
    TORCH_CHECK(rank >= 0 && rank < world_size, "rank ", rank, " is outside 0..", world_size - 1);
    TORCH_CHECK(slot_bytes > 0 && slot_bytes % 4096 == 0, "slot_bytes must be a positive multiple of 4096, got ",
                slot_bytes);
    TORCH_CHECK(blocks >= world_size, "the exchange needs at least one block per rank: ", blocks, " blocks for ",
                world_size, " ranks");
    set_timeout(timeout_s);
    try {
      allocate();
    } catch (...) {
      close_quietly();  // a throwing constructor runs no destructor: give back what was allocated
      throw;
    }
  }

  ~Engine() { close_quietly(); }

  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  pybind11::bytes ipc_handle() const {
    return pybind11::bytes(reinterpret_cast<const char*>(&handle_), sizeof(handle_));
  }

  // Maps every peer's buffer into this process. handles[r] is rank r's ipc_handle(); ours is skipped.
  void open_peers(const std::vector<std::string>& handles) {
    check_open();
    TORCH_CHECK(static_cast<int>(handles.size()) == world_size_, "expected ", world_size_, " IPC handles, got ",
                handles.size());
    c10::cuda::CUDAGuard guard(device_);
    for (int r = 0; r < world_size_; ++r) {
      if (r == rank_ || base_[r] != nullptr) continue;
      TORCH_CHECK(handles[r].size() == sizeof(cudaIpcMemHandle_t), "IPC handle of rank ", r, " has ",
                  handles[r].size(), " bytes, expected ", sizeof(cudaIpcMemHandle_t));
      cudaIpcMemHandle_t h;
      std::memcpy(&h, handles[r].data(), sizeof(h));
      const cudaError_t err = cudaIpcOpenMemHandle(&base_[r], h, cudaIpcMemLazyEnablePeerAccess);
      TORCH_CHECK(err == cudaSuccess, "rank ", rank_, " (device ", device_, ") cannot map the buffer of rank ", r,
                  ": cudaIpcOpenMemHandle failed: ", cudaGetErrorString(err));
    }
    peers_open_ = true;
  }

  // Writes `value` into probe[rank] and 16 bytes into probe data of every peer, then waits for it.
  void probe_write(uint64_t value) {
    check_ready();
    c10::cuda::CUDAGuard guard(device_);
    Plan plan = base_plan(Op::kSendRecvHeads);
    LTX2_CUDA_CHECK(launch_probe(plan, value, nullptr));
    LTX2_CUDA_CHECK(cudaDeviceSynchronize());
  }

  // What peers wrote by probe_write: per source, (probe word, the 4 words of its probe data).
  std::vector<std::vector<uint64_t>> probe_read() {
    check_open();
    c10::cuda::CUDAGuard guard(device_);
    std::vector<uint64_t> words(kMaxRanks);
    std::vector<uint32_t> data(4 * kMaxRanks);
    char* pad = static_cast<char*>(base_[rank_]);
    LTX2_CUDA_CHECK(cudaMemcpy(words.data(), pad + PadLayout::kProbe, 8 * kMaxRanks, cudaMemcpyDeviceToHost));
    LTX2_CUDA_CHECK(cudaMemcpy(data.data(), pad + PadLayout::kProbeData, 16 * kMaxRanks, cudaMemcpyDeviceToHost));
    std::vector<std::vector<uint64_t>> out;
    for (int s = 0; s < world_size_; ++s) {
      out.push_back({words[s], data[4 * s], data[4 * s + 1], data[4 * s + 2], data[4 * s + 3]});
    }
    return out;
  }

  torch::Tensor send_recv_heads(const torch::Tensor& x, const std::vector<int64_t>& tokens,
                                const std::vector<int64_t>& heads) {
    check_input(x, 4, tokens, heads);
    const int64_t b = x.size(0), t_rank = x.size(1), h = x.size(2), e = x.element_size() * x.size(3);
    TORCH_CHECK(t_rank == tokens[rank_] && h == total(heads), "send_recv_heads: input [", b, ", ", t_rank, ", ",
                h, ", ", x.size(3), "] does not match ", tokens[rank_], " tokens and ", total(heads), " heads");
    const int64_t t_total = total(tokens), h_me = heads[rank_];
    const auto t_off = exclusive_sum(tokens), h_off = exclusive_sum(heads);
    auto out = torch::empty({b, t_total, h_me, x.size(3)}, x.options());
    Plan plan = base_plan(Op::kSendRecvHeads);
    int64_t need = 0;
    for (int r = 0; r < world_size_; ++r) {
      // To r: heads of r for our tokens, at our token offset of r's [B, T_total, H_r, D].
      plan.push[r] = rows(b, t_rank, heads[r] * e, h_off[r] * e, t_rank * h * e, h * e, t_off[rank_] * heads[r] * e,
                          t_total * heads[r] * e, heads[r] * e);
      // From r: its tokens of our heads, one contiguous run per batch.
      plan.pull[r] = rows(b, 1, tokens[r] * h_me * e, t_off[r] * h_me * e, t_total * h_me * e, 0,
                          t_off[r] * h_me * e, t_total * h_me * e, 0);
      need = std::max(need, b * t_total * heads[r] * e);
    }
    run(plan, x, out, need);
    return out;
  }

  torch::Tensor gather_heads(const torch::Tensor& y, const std::vector<int64_t>& tokens,
                             const std::vector<int64_t>& heads) {
    check_input(y, 4, tokens, heads);
    const int64_t b = y.size(0), t_total = y.size(1), h_me = y.size(2), e = y.element_size() * y.size(3);
    TORCH_CHECK(t_total == total(tokens) && h_me == heads[rank_], "gather_heads: input [", b, ", ", t_total, ", ",
                h_me, ", ", y.size(3), "] does not match ", total(tokens), " tokens and ", heads[rank_], " heads");
    const int64_t h = total(heads), t_me = tokens[rank_];
    const auto t_off = exclusive_sum(tokens), h_off = exclusive_sum(heads);
    auto out = torch::empty({b, t_me, h, y.size(3)}, y.options());
    Plan plan = base_plan(Op::kGatherHeads);
    int64_t need = 0;
    for (int r = 0; r < world_size_; ++r) {
      // To r: our heads for r's tokens, at our head offset of r's [B, T_r, H, D].
      plan.push[r] = rows(b, tokens[r], h_me * e, t_off[r] * h_me * e, t_total * h_me * e, h_me * e,
                          h_off[rank_] * e, tokens[r] * h * e, h * e);
      // From r: r's heads for our tokens.
      plan.pull[r] = rows(b, t_me, heads[r] * e, h_off[r] * e, t_me * h * e, h * e, h_off[r] * e, t_me * h * e, h * e);
      need = std::max(need, b * tokens[r] * h * e);
    }
    run(plan, y, out, need);
    return out;
  }

  torch::Tensor all_gather_tokens(const torch::Tensor& x, const std::vector<int64_t>& tokens) {
    check_input(x, 3, tokens, tokens);
    const int64_t b = x.size(0), t_rank = x.size(1), row = x.element_size() * x.size(2);
    TORCH_CHECK(t_rank == tokens[rank_], "all_gather_tokens: input holds ", t_rank, " tokens, partition says ",
                tokens[rank_]);
    const int64_t t_total = total(tokens);
    const auto t_off = exclusive_sum(tokens);
    auto out = torch::empty({b, t_total, x.size(2)}, x.options());
    Plan plan = base_plan(Op::kAllGatherTokens);
    for (int r = 0; r < world_size_; ++r) {
      plan.push[r] = rows(b, 1, t_rank * row, 0, t_rank * row, 0, t_off[rank_] * row, t_total * row, 0);
      plan.pull[r] = rows(b, 1, tokens[r] * row, t_off[r] * row, t_total * row, 0, t_off[r] * row, t_total * row, 0);
    }
    run(plan, x, out, b * t_total * row);
    return out;
  }

  torch::Tensor all_gather_heads(const torch::Tensor& x, const std::vector<int64_t>& heads) {
    check_input(x, 4, heads, heads);
    const int64_t bt = x.size(0) * x.size(1), h_me = x.size(2), e = x.element_size() * x.size(3);
    TORCH_CHECK(h_me == heads[rank_], "all_gather_heads: input holds ", h_me, " heads, partition says ",
                heads[rank_]);
    const int64_t h = total(heads);
    const auto h_off = exclusive_sum(heads);
    auto out = torch::empty({x.size(0), x.size(1), h, x.size(3)}, x.options());
    Plan plan = base_plan(Op::kAllGatherHeads);
    for (int r = 0; r < world_size_; ++r) {
      plan.push[r] = rows(1, bt, h_me * e, 0, 0, h_me * e, h_off[rank_] * e, 0, h * e);
      plan.pull[r] = rows(1, bt, heads[r] * e, h_off[r] * e, 0, h * e, h_off[r] * e, 0, h * e);
    }
    run(plan, x, out, bt * h * e);
    return out;
  }

  // (op, rank, peer, epoch, elapsed_ns, timeout_ns) of the first timed-out wait, or None. Never blocks:
  // it reads host-mapped memory, so it sees records of kernels that are still running too.
  pybind11::object error() const {
    if (error_host_ == nullptr) return pybind11::none();
    const volatile ErrorRecord* e = error_host_;
    if (e->code == 0) return pybind11::none();
    return pybind11::make_tuple(std::string(op_name(e->op)), int(e->rank), int(e->peer), uint64_t(e->epoch),
                                uint64_t(e->elapsed_ns), uint64_t(e->timeout_ns));
  }

  // Ops completed on this rank so far (synchronises the device; for tests and diagnostics).
  int64_t epoch() {
    check_open();
    c10::cuda::CUDAGuard guard(device_);
    LTX2_CUDA_CHECK(cudaDeviceSynchronize());
    uint64_t value = 0;
    LTX2_CUDA_CHECK(cudaMemcpy(&value, static_cast<char*>(base_[rank_]) + PadLayout::kEpoch, sizeof(value),
                               cudaMemcpyDeviceToHost));
    return static_cast<int64_t>(value);
  }

  void set_timeout(double timeout_s) {
    TORCH_CHECK(timeout_s > 0.0 && timeout_s < 1.0e9, "timeout_s must be in (0, 1e9) seconds, got ", timeout_s);
    timeout_ns_ = static_cast<uint64_t>(timeout_s * 1.0e9);
  }

  // Unmaps peers and frees this rank's buffer. Idempotent. The caller makes sure no peer still writes
  // into this buffer (ipc_all2all.py synchronises and passes a group barrier first).
  void close() {
    const std::string first_error = release();
    TORCH_CHECK(first_error.empty(), "ltx2_mgpu exchange: closing failed: ", first_error);
  }

  int64_t slot_bytes() const { return slot_bytes_; }
  int64_t blocks() const { return blocks_; }
  int64_t device() const { return device_; }
  double timeout_s() const { return static_cast<double>(timeout_ns_) * 1.0e-9; }
  bool closed() const { return closed_; }

 private:
  void check_open() const { TORCH_CHECK(!closed_, "ltx2_mgpu exchange: used after close()"); }

  void check_ready() const {
    check_open();
    TORCH_CHECK(peers_open_, "ltx2_mgpu exchange: open_peers() was not called");
  }

  void check_input(const torch::Tensor& x, int64_t dims, const std::vector<int64_t>& a,
                   const std::vector<int64_t>& b) const {
    check_ready();
    TORCH_CHECK(x.is_cuda() && x.get_device() == device_, "ltx2_mgpu exchange of rank ", rank_, " lives on cuda:",
                device_, ", input is on ", x.device());
    TORCH_CHECK(x.dim() == dims && x.is_contiguous(), "ltx2_mgpu exchange needs a contiguous ", dims,
                "-d tensor, got ", x.sizes(), " with strides ", x.strides());
    TORCH_CHECK(static_cast<int>(a.size()) == world_size_ && static_cast<int>(b.size()) == world_size_,
                "expected ", world_size_, " counts per partition, got ", a.size(), " and ", b.size());
    for (int r = 0; r < world_size_; ++r) {
      TORCH_CHECK(a[r] >= 0 && b[r] >= 0, "negative count in partition");
    }
  }

  Plan base_plan(Op op) const {
    Plan plan;
    std::memset(&plan, 0, sizeof(plan));
    plan.op = static_cast<int32_t>(op);
    plan.rank = rank_;
    plan.world_size = world_size_;
    plan.own_pad = static_cast<char*>(base_[rank_]);
    plan.own_data = plan.own_pad + kPadBytes;
    for (int r = 0; r < world_size_; ++r) {
      char* peer = static_cast<char*>(base_[r]);
      plan.peer_data[r] = peer + kPadBytes;
      plan.peer_arrival[r] = reinterpret_cast<uint64_t*>(peer + PadLayout::kArrival);
    }
    plan.error = error_device_;
    plan.slot_bytes = slot_bytes_;
    plan.timeout_ns = timeout_ns_;
    return plan;
  }

  // Widest vector (16, 8, 4, 2 or 1 bytes) dividing every address, offset, stride and row length.
  static int vector_bytes(const Plan& plan) {
    uint64_t bits = reinterpret_cast<uint64_t>(plan.src) | reinterpret_cast<uint64_t>(plan.out) |
                    static_cast<uint64_t>(plan.slot_bytes) | 16;
    for (int r = 0; r < plan.world_size; ++r) {
      for (const RowCopy* c : {&plan.push[r], &plan.pull[r]}) {
        bits |= static_cast<uint64_t>(c->vecs_per_row) | static_cast<uint64_t>(c->src_off) |
                static_cast<uint64_t>(c->src_outer) | static_cast<uint64_t>(c->src_inner) |
                static_cast<uint64_t>(c->dst_off) | static_cast<uint64_t>(c->dst_outer) |
                static_cast<uint64_t>(c->dst_inner);
      }
    }
    return static_cast<int>(bits & (~bits + 1));  // lowest set bit, at most 16
  }

  void run(Plan& plan, const torch::Tensor& in, torch::Tensor& out, int64_t need_bytes) {
    TORCH_CHECK(need_bytes <= slot_bytes_, "ltx2_mgpu exchange: a rank receives ", need_bytes,
                " bytes but slots hold ", slot_bytes_, " (the Python owner grows them first; this is a bug)");
    if (error_host_->code != 0) {
      TORCH_CHECK(false, "ltx2_mgpu exchange of rank ", rank_, " already failed; rebuild it");
    }
    plan.src = static_cast<const char*>(in.data_ptr());
    plan.out = static_cast<char*>(out.data_ptr());
    const int vec = vector_bytes(plan);
    for (int r = 0; r < world_size_; ++r) {
      for (RowCopy* c : {&plan.push[r], &plan.pull[r]}) {
        c->vecs_per_row /= vec;
        const uint64_t vecs = uint64_t(c->n_outer) * c->n_inner * c->vecs_per_row;
        TORCH_CHECK(vecs < (1ull << 31), "ltx2_mgpu exchange: one piece of ", vecs * vec,
                    " bytes is too large for 31-bit vector indexing at ", vec, "-byte vectors");
      }
    }
    c10::cuda::CUDAGuard guard(device_);
    LTX2_CUDA_CHECK(launch_exchange(plan, vec, blocks_, c10::cuda::getCurrentCUDAStream(device_).stream()));
  }

  void allocate() {
    c10::cuda::CUDAGuard guard(device_);
    // Plain cudaMalloc on purpose: CUDA IPC cannot export memory from the caching or async allocators.
    LTX2_CUDA_CHECK(cudaMalloc(&base_[rank_], kPadBytes + 2 * slot_bytes_));
    owns_base_ = true;
    LTX2_CUDA_CHECK(cudaMemset(base_[rank_], 0, kPadBytes));
    LTX2_CUDA_CHECK(cudaIpcGetMemHandle(&handle_, base_[rank_]));
    LTX2_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&error_host_), sizeof(ErrorRecord), cudaHostAllocMapped));
    std::memset(error_host_, 0, sizeof(ErrorRecord));
    LTX2_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&error_device_), error_host_, 0));
    LTX2_CUDA_CHECK(cudaDeviceSynchronize());
  }

  std::string release() {
    if (closed_) return {};
    closed_ = true;
    std::string first;
    auto note = [&first](cudaError_t err, const char* what) {
      if (err != cudaSuccess && first.empty()) first = std::string(what) + ": " + cudaGetErrorString(err);
    };
    int previous = -1;
    note(cudaGetDevice(&previous), "cudaGetDevice");
    note(cudaSetDevice(device_), "cudaSetDevice");
    note(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    for (int r = 0; r < world_size_; ++r) {
      if (r != rank_ && base_[r] != nullptr) note(cudaIpcCloseMemHandle(base_[r]), "cudaIpcCloseMemHandle");
      if (r != rank_) base_[r] = nullptr;
    }
    if (owns_base_) note(cudaFree(base_[rank_]), "cudaFree");
    base_[rank_] = nullptr;
    owns_base_ = false;
    if (error_host_ != nullptr) note(cudaFreeHost(error_host_), "cudaFreeHost");
    error_host_ = nullptr;
    error_device_ = nullptr;
    if (previous >= 0) cudaSetDevice(previous);
    return first;
  }

  void close_quietly() noexcept {
    try {
      release();
    } catch (...) {
      // A destructor never throws; release() itself only records errors.
    }
  }

  int rank_;
  int world_size_;
  int device_;
  int64_t slot_bytes_;
  int blocks_;
  uint64_t timeout_ns_ = 0;
  void* base_[kMaxRanks] = {nullptr};
  bool owns_base_ = false;
  bool peers_open_ = false;
  bool closed_ = false;
  cudaIpcMemHandle_t handle_{};
  ErrorRecord* error_host_ = nullptr;
  ErrorRecord* error_device_ = nullptr;
};

int blocks_per_sm(int64_t device) {
  c10::cuda::CUDAGuard guard(static_cast<int>(device));
  int blocks = 0;
  LTX2_CUDA_CHECK(exchange_blocks_per_sm(&blocks));
  return blocks;
}

}  // namespace ltx2_mgpu

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  namespace py = pybind11;
  using ltx2_mgpu::Engine;
  m.doc() = "ltx2_mgpu CUDA-IPC head exchange (engine behind ltx2_mgpu.kernels.ipc_all2all)";
  m.attr("MAX_RANKS") = ltx2_mgpu::kMaxRanks;
  m.attr("THREADS_PER_BLOCK") = ltx2_mgpu::kThreads;
  m.def("blocks_per_sm", &ltx2_mgpu::blocks_per_sm, py::arg("device"));
  py::class_<Engine>(m, "Engine")
      .def(py::init<int64_t, int64_t, int64_t, int64_t, int64_t, double>(), py::arg("rank"), py::arg("world_size"),
           py::arg("device"), py::arg("slot_bytes"), py::arg("blocks"), py::arg("timeout_s"))
      .def("ipc_handle", &Engine::ipc_handle)
      .def("open_peers", &Engine::open_peers, py::arg("handles"))
      .def("probe_write", &Engine::probe_write, py::arg("value"))
      .def("probe_read", &Engine::probe_read)
      .def("send_recv_heads", &Engine::send_recv_heads, py::arg("x"), py::arg("token_counts"), py::arg("head_counts"))
      .def("gather_heads", &Engine::gather_heads, py::arg("y"), py::arg("token_counts"), py::arg("head_counts"))
      .def("all_gather_tokens", &Engine::all_gather_tokens, py::arg("x"), py::arg("token_counts"))
      .def("all_gather_heads", &Engine::all_gather_heads, py::arg("x"), py::arg("head_counts"))
      .def("error", &Engine::error)
      .def("epoch", &Engine::epoch)
      .def("set_timeout", &Engine::set_timeout, py::arg("timeout_s"))
      .def("close", &Engine::close)
      .def_property_readonly("slot_bytes", &Engine::slot_bytes)
      .def_property_readonly("blocks", &Engine::blocks)
      .def_property_readonly("device", &Engine::device)
      .def_property_readonly("timeout_s", &Engine::timeout_s)
      .def_property_readonly("closed", &Engine::closed);
}
