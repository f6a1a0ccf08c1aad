// Pieces shared by the capability probes (tools/capabilities_*.cc): the backend of a cell (CPU,
// or a CUDA device and a stream of its own, since the legacy stream cannot be captured), Slots
// (a host tensor mirrored on the backend: upload / download through copy_tensor on the stream),
// seeded inputs, and the Checker that compares results with the fp64 reference using the
// tests' tolerance table (tests/common/tolerances.h: the one table, never numbers inlined here).
#pragma once
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "capabilities.h"
#include "linattn/dense.h"
#include "linattn/graph.h"
#include "linattn/ops.h"
#include "linattn/tensor.h"
#include "tolerances.h"

namespace linattn::caps {

// The backend of one probe. CUDA: checks a device exists (else Unsupported "no CUDA device")
// and owns a stream.
class Backend {
 public:
  explicit Backend(const std::string& name);
  ~Backend();
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;
  Device device() const { return dev_; }
  bool cuda() const { return dev_.type == DeviceType::kCUDA; }
  void* stream() const { return stream_; }
  ExecContext ctx() const;
  void sync() const;

 private:
  Device dev_{};
  void* stream_ = nullptr;
};

// Why `backend` cannot run here, or "" when it can ("no CUDA device", or a build without CUDA).
std::string backend_unavailable(const std::string& backend);

// A tensor on the backend with a host mirror. On the CPU the view is the host tensor itself.
class Slot {
 public:
  Slot() = default;
  Slot(const Tensor& init, const Backend& be);
  const TensorView& view() const { return view_; }
  operator TensorView() const { return view_; }  // NOLINT
  // Writes `t` (same shape and dtype) into the slot (device: on the stream).
  void upload(const Tensor& t);
  // The slot's current contents on the host (synchronizes the stream).
  Tensor download() const;

 private:
  const Backend* be_ = nullptr;
  Tensor host_;
  Buffer buf_;
  TensorView view_;
};

// An owned workspace on the backend (256-byte aligned); empty when bytes == 0.
struct Workspace {
  Buffer buf;
  Workspace(const Backend& be, size_t bytes) : buf(bytes ? Buffer(be.device(), bytes) : Buffer()) {}
  ExecContext ctx(const Backend& be) const {
    ExecContext c = be.ctx();
    c.workspace = buf.data();
    c.workspace_bytes = buf.bytes();
    return c;
  }
};

using Rng = std::mt19937_64;
double uniform(Rng& rng, double lo, double hi);
// A tensor of `dtype` with values ~ U(lo, hi) (rounded to the dtype).
Tensor rand_tensor(Rng& rng, DType dtype, std::vector<int64_t> shape, double lo, double hi);
// Normalizes every row of `width` elements to unit L2 norm (in place, in the tensor's dtype).
void l2norm_rows(Tensor& t, int64_t width);
// Overwrites the elements [from, numel) with garbage ~ U(lo, hi) (padding rows of static buffers).
void garbage_tail(Rng& rng, Tensor& t, int64_t from, double lo = -4, double hi = 4);
Tensor cu_tensor(const std::vector<int64_t>& lens, int64_t n_rows, DType dtype);  // [n_rows + 1], zero-length tail
int64_t total(const std::vector<int64_t>& lens);

// Layouts (sequence lengths) for a variant: layout(v, i) for i = 0 (eager / fixed / capture),
// 1 and 2 (graph replays); every layout has <= kProbeNMax sequences and <= kProbeTMax tokens.
inline constexpr int64_t kProbeTMax = 96, kProbeNMax = 5;
std::vector<int64_t> layout(int variant, int i);

// Compares named results with the reference over their first `count` elements.
class Checker {
 public:
  // `got` / `ref` are host tensors of any float dtype; count < 0 means all of ref. A bf16 / fp16
  // `got` is compared with the reference rounded to its dtype (the best it can hold).
  void add(const std::string& name, const Tensor& ref, const Tensor& got, test::Tolerance tol, int64_t count = -1);
  // A scalar check with a relative bar (directional derivatives of the layer backward).
  void add_scalar(const std::string& name, double ref, double got, double rel_bar);
  // Bitwise equality of two runs (graph replay vs the eager fixed-capacity call).
  void add_bitwise(const std::string& name, const Tensor& a, const Tensor& b);
  bool ok() const { return ok_ && bitwise_ok_; }
  bool bitwise_ok() const { return bitwise_ok_; }
  void fill(Cell& c) const;  // worst quantity, its errors and bar; status and category

 private:
  void note(const std::string& name, double rel, double abs, double bar, bool pass);
  bool ok_ = true, bitwise_ok_ = true;
  std::string worst_, bitwise_what_;
  double worst_score_ = -1, worst_rel_ = 0, worst_abs_ = 0, worst_bar_ = 0;
  int n_ = 0;
};

DType dtype_from_name(const std::string& name);  // fp32 | bf16 | fp16 | i32 | i64

// The probes of each op family (tools/capabilities_<family>.cc). They throw linattn::Error for
// what the library rejects and fill `chk` with the comparisons.
// The flow every op probe shares. Eager / fixed cells: step() once, check(0, download()).
// Graph cells: step() once (warm-up on the static buffers), capture it, then for i = 1, 2:
// upload(i) (layout i of the variant), replay, got = download(), check(i, got), step() again
// (the eager fixed-capacity call on the same data) and bitwise(got, download()).
template <class Result>
void run_probe_flow(const Backend& be, bool graph, const std::function<void()>& step,
                    const std::function<void(int)>& upload, const std::function<Result()>& download,
                    const std::function<void(int, const Result&)>& check,
                    const std::function<void(const Result&, const Result&)>& bitwise) {
  if (!graph) {
    step();
    check(0, download());
    return;
  }
  Graph g(be.device(), be.stream());
  step();
  g.capture(step);
  for (int i = 1; i <= 2; ++i) {
    upload(i);
    g.replay();
    const Result got = download();
    check(i, got);
    step();
    bitwise(got, download());
  }
}
inline std::string replay_tag(int i) { return i == 0 ? std::string() : "replay" + std::to_string(i) + "."; }

void probe_chunk(const CellKey& key, int variant, Checker& chk);
void probe_conv(const CellKey& key, int variant, Checker& chk);
void probe_layer(const CellKey& key, int variant, Checker& chk);
void probe_metadata(const CellKey& key, int variant, Checker& chk);

}  // namespace linattn::caps
