// GraphBuckets static buffers and copies (see bucket_io.h).
#include "runtime/bucket_io.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "core/check.h"

namespace linattn::runtime {

namespace {

constexpr ErrorCode kInv = ErrorCode::kInvalidArgument;
constexpr FailureCategory kLife = FailureCategory::kAddressOrLifetime;

bool is_input(BufferRole r) { return r == BufferRole::kInput || r == BufferRole::kInOut; }
bool is_output(BufferRole r) { return r == BufferRole::kOutput || r == BufferRole::kInOut; }

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// The static shape with the scaled dim set to the call's T or N.
std::vector<int64_t> call_shape(const BucketBufferSpec& s, int64_t T, int64_t N) {
  std::vector<int64_t> shape = s.shape;
  if (s.scale == BufferScale::kTokens) shape[s.scaled_dim] = T;
  if (s.scale == BufferScale::kSequences) shape[s.scaled_dim] = N;
  return shape;
}

void check_spec(const BucketBufferSpec& s, const Capacity& cap) {
  const std::string& n = s.name;
  LINATTN_CHECK_CODE(!n.empty() && n != "cu_seqlens", kInv, kLife,
                     "buffer spec name: expected a non-empty name other than 'cu_seqlens', got '", n, "'");
  const int rank = static_cast<int>(s.shape.size());
  LINATTN_CHECK_CODE(rank >= 1 && rank <= kMaxDims, kInv, kLife, "buffer '", n,
                     "': expected rank in [1, ", kMaxDims, "], got ", rank);
  for (int64_t d : s.shape) {
    LINATTN_CHECK_CODE(d >= 0 && d <= (int64_t{1} << 40), kInv, kLife, "buffer '", n,
                       "': expected dims in [0, 2^40], got shape ", shape_str(s.shape));
  }
  LINATTN_CHECK_CODE(dtype_size(s.dtype) != 0, kInv, kLife, "buffer '", n, "': expected a known dtype, got ",
                     static_cast<int>(s.dtype));
  if (s.scale == BufferScale::kFixed) return;
  const bool tok = s.scale == BufferScale::kTokens;
  const int64_t want = tok ? cap.T_max : cap.N_max;
  LINATTN_CHECK_CODE(s.scaled_dim >= 0 && s.scaled_dim < rank && s.shape[s.scaled_dim] == want, kInv,
                     kLife, "buffer '", n, "': expected shape[", s.scaled_dim, "] == ",
                     tok ? "T_max = " : "N_max = ", want, ", got shape ", shape_str(s.shape));
  for (int d = 0; d < s.scaled_dim; ++d) {
    LINATTN_CHECK_CODE(s.shape[d] == 1, kInv, kLife, "buffer '", n, "': expected size-1 dims before the scaled dim ",
                       s.scaled_dim, " (a contiguous prefix of rows), got shape ", shape_str(s.shape));
  }
}

const NamedTensor* find(const NamedTensors& ts, const std::string& name) {
  for (const NamedTensor& t : ts) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

void check_side(const BucketBuffers& b, const NamedTensors& given, bool inputs, int64_t T,
                int64_t N, Device device) {
  const char* side = inputs ? "inputs" : "outputs";
  std::set<std::string> seen;
  for (const NamedTensor& t : given) {
    LINATTN_CHECK_CODE(seen.insert(t.name).second, kInv, kLife, side, "['", t.name,
                       "']: expected each name once, got it twice");
    const auto it = std::find_if(b.specs.begin(), b.specs.end(), [&](const BucketBufferSpec& s) {
      return s.name == t.name && (inputs ? is_input(s.role) : is_output(s.role));
    });
    LINATTN_CHECK_CODE(it != b.specs.end(), kInv, kLife, side, "['", t.name, "']: expected the name of a ",
                       inputs ? "kInput/kInOut" : "kOutput/kInOut", " buffer spec, got an unknown name");
  }
  for (const BucketBufferSpec& s : b.specs) {
    if (!(inputs ? is_input(s.role) : is_output(s.role))) continue;
    const NamedTensor* t = find(given, s.name);
    LINATTN_CHECK_CODE(t, kInv, kLife, side, ": expected a tensor named '", s.name, "', got none");
    const TensorView& v = t->view;
    const std::vector<int64_t> want = call_shape(s, T, N);
    bool ok = v.ndim == static_cast<int>(want.size());
    for (int d = 0; ok && d < v.ndim; ++d) ok = v.shape[d] == want[d];
    LINATTN_CHECK_CODE(ok, kInv, kLife, side, "['", s.name, "']: expected shape ", shape_str(want), ", got ",
                       v.shape_str());
    LINATTN_CHECK_CODE(v.dtype == s.dtype, kInv, kLife, side, "['", s.name, "']: expected dtype ",
                       dtype_name(s.dtype), ", got ", dtype_name(v.dtype));
    LINATTN_CHECK_CODE(v.is_contiguous(), kInv, kLife, side, "['", s.name,
                       "']: expected a contiguous tensor, got strides of shape ", v.shape_str());
    LINATTN_CHECK_CODE(v.device == device || v.device.type == DeviceType::kCPU, kInv, kLife, side, "['",
                       s.name, "']: expected device ", device_name(device), " or cpu, got ",
                       device_name(v.device));
    LINATTN_CHECK_CODE(v.data || v.numel() == 0, kInv, kLife, side, "['", s.name,
                       "']: expected data, got null");
  }
}

TensorView static_view(const BucketBuffers& b, size_t i, int64_t T, int64_t N) {
  const BucketBufferSpec& s = b.specs[i];
  return TensorView::contiguous(b.storage[i].data(), s.dtype, call_shape(s, T, N), b.storage[i].device());
}

}  // namespace

void allocate_bucket(BucketBuffers& b, const Capacity& cap, std::vector<BucketBufferSpec> specs,
                     DType cu_dtype, const ExecContext& exec, Device device) {
  std::set<std::string> names;
  for (const BucketBufferSpec& s : specs) {
    check_spec(s, cap);
    LINATTN_CHECK_CODE(names.insert(s.name).second, kInv, kLife, "buffer '", s.name,
                       "': expected unique names, got it twice");
  }
  b.cap = cap;
  b.specs = std::move(specs);
  b.storage.clear();
  std::vector<std::pair<std::string, TensorView>> views;
  for (const BucketBufferSpec& s : b.specs) {
    int64_t n = 1;
    for (int64_t d : s.shape) n *= d;
    b.storage.emplace_back(device, static_cast<size_t>(n) * dtype_size(s.dtype));
    const TensorView v = TensorView::contiguous(b.storage.back().data(), s.dtype, s.shape, device);
    fill_zero(v, exec);
    views.emplace_back(s.name, v);
  }
  const size_t cu_bytes = static_cast<size_t>(cap.N_max + 1) * dtype_size(cu_dtype);
  b.cu = Buffer(device, cu_bytes);
  b.cu_stage.assign(cu_bytes, std::byte{0});
  const TensorView cu = TensorView::contiguous(b.cu.data(), cu_dtype, {cap.N_max + 1}, device);
  fill_zero(cu, exec);  // all sequences empty: a valid layout for the warm-up
  b.view = BucketStatic(cap, cu, std::move(views), exec);
}

void check_step_tensors(const BucketBuffers& b, const NamedTensors& inputs,
                        const NamedTensors& outputs, int64_t T, int64_t N, Device device) {
  check_side(b, inputs, true, T, N, device);
  check_side(b, outputs, false, T, N, device);
}

void copy_cu_in(BucketBuffers& b, const TensorView& cu, const ExecContext& exec) {
  const TensorView& dst = b.view.cu_seqlens();
  const int64_t n1 = cu.shape[0];
  auto at = [&](int64_t i) {
    return cu.dtype == DType::kI64 ? cu.ptr<const int64_t>()[i] : int64_t{cu.ptr<const int32_t>()[i]};
  };
  const int64_t last = at(n1 - 1);
  for (int64_t i = 0; i <= b.cap.N_max; ++i) {
    const int64_t v = i < n1 ? at(i) : last;
    if (dst.dtype == DType::kI64) {
      std::memcpy(b.cu_stage.data() + 8 * i, &v, 8);
    } else {
      const int32_t v32 = static_cast<int32_t>(v);  // validated <= INT32_MAX
      std::memcpy(b.cu_stage.data() + 4 * i, &v32, 4);
    }
  }
  copy_tensor(dst, TensorView::contiguous(b.cu_stage.data(), dst.dtype, {b.cap.N_max + 1}), exec);
}

void copy_inputs(const BucketBuffers& b, const NamedTensors& inputs, int64_t T, int64_t N,
                 const ExecContext& exec) {
  std::vector<TensorCopy> pairs;  // one copy_tensors call: on CUDA one kernel for the device inputs
  for (size_t i = 0; i < b.specs.size(); ++i) {
    if (is_input(b.specs[i].role)) pairs.push_back({static_view(b, i, T, N), find(inputs, b.specs[i].name)->view});
  }
  copy_tensors(pairs.data(), pairs.size(), exec);
}

void copy_outputs(const BucketBuffers& b, const NamedTensors& outputs, int64_t T, int64_t N,
                  const ExecContext& exec) {
  for (size_t i = 0; i < b.specs.size(); ++i) {
    if (is_output(b.specs[i].role)) copy_tensor(find(outputs, b.specs[i].name)->view, static_view(b, i, T, N), exec);
  }
}

}  // namespace linattn::runtime
