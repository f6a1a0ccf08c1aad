// Buffer (owning device / host memory), copy_tensor, copy_tensors and fill_zero. Host memory is 256-byte
// aligned; CUDA memory comes from cudaMalloc and copies run on the caller's stream.
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/capture.h"
#include "core/check.h"
#include "linattn/dense.h"
#include "meta/chunk_attn_desc.h"

#if LINATTN_WITH_CUDA
#include <cuda_runtime_api.h>

#include "cuda/dense/dense_cuda.h"
#define LINATTN_CUDA_OK(call)                                                                 \
  do {                                                                                        \
    cudaError_t e_ = (call);                                                                  \
    LINATTN_CHECK_CODE(e_ == cudaSuccess, ::linattn::ErrorCode::kBackend,                     \
                       ::linattn::FailureCategory::kNone, #call, ": ", cudaGetErrorString(e_)); \
  } while (0)
#endif

namespace linattn {

Buffer::Buffer(Device device, size_t bytes) : bytes_(bytes), device_(device) {
  const size_t n = (bytes + 255) / 256 * 256 + 256;
  if (device.type == DeviceType::kCPU) {
    data_ = std::aligned_alloc(256, n);
    LINATTN_CHECK_CODE(data_ != nullptr, ErrorCode::kBackend, FailureCategory::kAddressOrLifetime,
                       "Buffer: host allocation of ", bytes, " bytes failed");
    return;
  }
#if LINATTN_WITH_CUDA
  LINATTN_CUDA_OK(cudaSetDevice(device.index));
  LINATTN_CUDA_OK(cudaMalloc(&data_, n));
#else
  LINATTN_UNSUPPORTED("Buffer: device ", device_name(device), " needs the CUDA backend (not built)");
#endif
}

Buffer::~Buffer() {
  if (!data_) return;
  if (device_.type == DeviceType::kCPU) std::free(data_);
#if LINATTN_WITH_CUDA
  else cudaFree(data_);
#endif
}

Buffer::Buffer(Buffer&& o) noexcept : data_(o.data_), bytes_(o.bytes_), device_(o.device_) {
  o.data_ = nullptr;
  o.bytes_ = 0;
}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    this->~Buffer();
    data_ = o.data_;
    bytes_ = o.bytes_;
    device_ = o.device_;
    o.data_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

TensorView Buffer::view(DType dtype, std::initializer_list<int64_t> shape, size_t offset_bytes) const {
  TensorView v = TensorView::contiguous(static_cast<char*>(data_) + offset_bytes, dtype, shape, device_);
  LINATTN_CHECK_CODE(offset_bytes + v.nbytes() <= bytes_, ErrorCode::kInvalidArgument,
                     FailureCategory::kAddressOrLifetime, "Buffer::view: ", v.nbytes(), " bytes at offset ",
                     offset_bytes, " exceed the buffer's ", bytes_, " bytes");
  return v;
}

void copy_tensor(const TensorView& dst, const TensorView& src, const ExecContext& ctx) {
  LINATTN_CHECK(dst.ndim == src.ndim, "dst: expected rank ", src.ndim, " like src, got ", dst.ndim);
  for (int i = 0; i < src.ndim; ++i) meta::expect_dim(dst, "dst", i, src.shape[i]);
  meta::expect_dtype(dst, "dst", src.dtype);
  meta::expect_contiguous(dst, "dst");
  meta::expect_contiguous(src, "src");
  const size_t n = src.nbytes();
  void* d = dst.data;
  const void* s = src.data;
  if (dst.device.type == DeviceType::kCPU && src.device.type == DeviceType::kCPU) {
    run_or_record("copy_tensor", [=] { if (n) std::memcpy(d, s, n); });
    return;
  }
  forbid_during_capture("copy_tensor", FailureCategory::kAddressOrLifetime);  // device work under a CPU capture
#if LINATTN_WITH_CUDA
  if (n) LINATTN_CUDA_OK(cudaMemcpyAsync(d, s, n, cudaMemcpyDefault, static_cast<cudaStream_t>(ctx.stream)));
#else
  (void)ctx;
  LINATTN_UNSUPPORTED("copy_tensor: ", device_name(dst.device), " <- ", device_name(src.device),
                      " needs the CUDA backend (not built)");
#endif
}

void copy_tensors(const TensorCopy* copies, size_t n, const ExecContext& ctx) {
  LINATTN_CHECK(n == 0 || copies != nullptr, "copies: expected an array of ", n, " pairs, got null");
  auto name = [](size_t i, const char* side) { return "copies[" + std::to_string(i) + "]." + side; };
  for (size_t i = 0; i < n; ++i) {
    const TensorView &d = copies[i].dst, &s = copies[i].src;
    LINATTN_CHECK(d.ndim == s.ndim, name(i, "dst"), ": expected rank ", s.ndim, " like its src, got ", d.ndim);
    for (int j = 0; j < s.ndim; ++j) meta::expect_dim(d, name(i, "dst").c_str(), j, s.shape[j]);
    meta::expect_dtype(d, name(i, "dst").c_str(), s.dtype);
    meta::expect_contiguous(d, name(i, "dst").c_str());
    meta::expect_contiguous(s, name(i, "src").c_str());
  }
  auto overlap = [](const TensorView& a, const TensorView& b) {
    const auto a0 = reinterpret_cast<uintptr_t>(a.data), b0 = reinterpret_cast<uintptr_t>(b.data);
    return a.nbytes() > 0 && b.nbytes() > 0 && a.device == b.device && a0 < b0 + b.nbytes() && b0 < a0 + a.nbytes();
  };
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      const char* side = overlap(copies[i].dst, copies[j].src) ? "src" : nullptr;
      if (!side && j != i && overlap(copies[i].dst, copies[j].dst)) side = "dst";
      LINATTN_CHECK(!side, name(i, "dst"), " overlaps ", name(j, side), ": copy_tensors' pairs must not overlap");
    }
  }
  bool device_work = false;
  for (size_t i = 0; i < n; ++i)
    device_work |= copies[i].dst.device.type != DeviceType::kCPU || copies[i].src.device.type != DeviceType::kCPU;
  if (!device_work) {
    std::vector<TensorCopy> own(copies, copies + n);
    run_or_record("copy_tensors", [own] {
      for (const TensorCopy& c : own) if (c.src.nbytes()) std::memcpy(c.dst.data, c.src.data, c.src.nbytes());
    });
    return;
  }
  forbid_during_capture("copy_tensors", FailureCategory::kAddressOrLifetime);
#if LINATTN_WITH_CUDA
  // the batched pairs: dst and src on the CUDA device of the first such pair (the stream's), at most
  // kCopyBatchMaxBytes; the rest by cudaMemcpyAsync
  const TensorCopy* first = nullptr;
  for (size_t i = 0; i < n && !first; ++i)
    if (copies[i].dst.device.type == DeviceType::kCUDA && copies[i].dst.device == copies[i].src.device) first = &copies[i];
  auto batched = [&](const TensorCopy& c) {
    return first && c.dst.device == first->dst.device && c.src.device == first->dst.device &&
           c.src.nbytes() <= kCopyBatchMaxBytes;
  };
  cuda::CopyBatch batch;
  auto flush = [&] {
    cuda::copy_batch(batch, ctx.stream);
    batch = {};
  };
  for (size_t i = 0; i < n; ++i) {
    const TensorCopy& c = copies[i];
    if (!batched(c) || !c.src.nbytes()) continue;
    batch.dst[batch.n] = c.dst.data;
    batch.src[batch.n] = c.src.data;
    batch.bytes[batch.n++] = static_cast<int64_t>(c.src.nbytes());
    if (batch.n == kCopyBatchMax) flush();
  }
  if (batch.n) flush();
  for (size_t i = 0; i < n; ++i) {
    const TensorCopy& c = copies[i];
    if (batched(c)) continue;
    if (c.src.nbytes())
      LINATTN_CUDA_OK(cudaMemcpyAsync(c.dst.data, c.src.data, c.src.nbytes(), cudaMemcpyDefault,
                                      static_cast<cudaStream_t>(ctx.stream)));
  }
#else
  (void)ctx;
  LINATTN_UNSUPPORTED("copy_tensors: device tensors need the CUDA backend (not built)");
#endif
}

void stream_synchronize(Device device, const ExecContext& ctx) {
  if (device.type == DeviceType::kCPU) return;
  forbid_during_capture("stream_synchronize", FailureCategory::kAddressOrLifetime);
#if LINATTN_WITH_CUDA
  LINATTN_CUDA_OK(cudaSetDevice(device.index));
  LINATTN_CUDA_OK(cudaStreamSynchronize(static_cast<cudaStream_t>(ctx.stream)));
#else
  (void)ctx;
  LINATTN_UNSUPPORTED("stream_synchronize: ", device_name(device), " needs the CUDA backend (not built)");
#endif
}

void fill_zero(const TensorView& t, const ExecContext& ctx) {
  meta::expect_contiguous(t, "t");
  const size_t n = t.nbytes();
  void* d = t.data;
  if (t.device.type == DeviceType::kCPU) {
    run_or_record("fill_zero", [=] { if (n) std::memset(d, 0, n); });
    return;
  }
  forbid_during_capture("fill_zero", FailureCategory::kAddressOrLifetime);
#if LINATTN_WITH_CUDA
  if (n) LINATTN_CUDA_OK(cudaMemsetAsync(d, 0, n, static_cast<cudaStream_t>(ctx.stream)));
#else
  (void)ctx;
  LINATTN_UNSUPPORTED("fill_zero: ", device_name(t.device), " needs the CUDA backend (not built)");
#endif
}

}  // namespace linattn
