// Buffer (owning device / host memory), copy_tensor and fill_zero. Host memory is 256-byte
// aligned; CUDA memory comes from cudaMalloc and copies run on the caller's stream.
#include <cstdlib>
#include <cstring>

#include "core/capture.h"
#include "core/check.h"
#include "linattn/dense.h"
#include "meta/chunk_attn_desc.h"

#if LINATTN_WITH_CUDA
#include <cuda_runtime_api.h>
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
