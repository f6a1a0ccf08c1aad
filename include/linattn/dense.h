// Dense helper ops used by the layers: GEMM, gated RMSNorm (forward and backward), row masking,
// copies and dtype conversion. Same conventions as ops.h: outputs passed in, caller's stream,
// capturable on both backends (recorded by an active CPU graph capture; on CUDA every op is
// kernels / cuBLAS calls on ctx.stream with no host synchronization, so stream capture records
// it). CUDA state (cuBLAS handle + workspace, norm scratch) is per (device, stream), created by
// dense_prepare; inside a CUDA stream capture it must already exist.
#pragma once
#include "linattn/ops.h"

namespace linattn {

// Creates the CUDA dense state of (device, ctx.stream) (no-op on the CPU). Call before capturing;
// an eager call on an unprepared stream creates it itself.
void dense_prepare(Device device, const ExecContext& ctx = {});

// c = alpha * op(a) @ op(b) + beta * c, 2-D row-major; op(x) = x^T when trans_x.
// CPU: fp32 (OpenBLAS). CUDA: a, b fp32 / bf16 / fp16 (same dtype), c that dtype or fp32, fp32
// accumulation (cuBLAS cublasGemmEx, CUBLAS_COMPUTE_32F).
void gemm(const TensorView& a, bool trans_a, const TensorView& b, bool trans_b, const TensorView& c,
          float alpha = 1.0f, float beta = 0.0f, const ExecContext& ctx = {});

enum class NormGate : uint8_t { kSilu, kSigmoid };

// Per row r of length D: y = x * rsqrt(mean(x^2) + eps) * w * act(g).
// x, g, y: [R, D]; w: [D] fp32; rstd: [R] fp32, optional (saved for backward). CUDA: D <= 1024.
void rms_norm_gated_fwd(const TensorView& x, const TensorView& g, const TensorView& w,
                        const TensorView& y, const TensorView& rstd, NormGate act, float eps,
                        const ExecContext& ctx = {});
// dx, dg: [R, D]; dw: [D] fp32 (overwritten; fixed-order reduction over rows). Rows at or past
// `valid_rows` (when >= 0) contribute nothing to dw and get dx = dg = 0.
void rms_norm_gated_bwd(const TensorView& x, const TensorView& g, const TensorView& w,
                        const TensorView& dy, const TensorView& dx, const TensorView& dg,
                        const TensorView& dw, NormGate act, float eps, int64_t valid_rows = -1,
                        const ExecContext& ctx = {});

// Zero the rows (dim 0 .. of a [B, T, ...] tensor viewed as [B*T, rest]) at or past
// cu_seqlens[N] (the padding tokens of a fixed-capacity batch). cu_seqlens is read when the op
// runs (at replay time in a graph), never when it is recorded.
void zero_padding_rows(const TensorView& t, const TensorView& cu_seqlens, const ExecContext& ctx = {});

// dst = src (same dtype and shape, any devices), and dst = 0.
void copy_tensor(const TensorView& dst, const TensorView& src, const ExecContext& ctx = {});
void fill_zero(const TensorView& t, const ExecContext& ctx = {});

// Many copies in one call (staging a graph's inputs before a replay): copies[i].dst = copies[i].src,
// each pair checked as copy_tensor checks it, every pair before anything is copied. A dst may not
// overlap another pair's dst or any src (InvalidArgument naming both pairs). On CUDA the pairs with
// both sides on one CUDA device and at most kCopyBatchMaxBytes are one kernel launch per
// kCopyBatchMax pairs (a cudaMemcpyAsync each costs ~3 us of host time and a graph node); the other
// pairs (larger ones too: cudaMemcpy moves big copies ~6% faster than an SM copy loop) are
// cudaMemcpyAsync calls, in order after the kernel. Same stream, capture and host-sync rules as
// copy_tensor.
struct TensorCopy {
  TensorView dst, src;
};
inline constexpr int kCopyBatchMax = 16;
inline constexpr size_t kCopyBatchMaxBytes = size_t{16} << 20;
void copy_tensors(const TensorCopy* copies, size_t n, const ExecContext& ctx = {});
// dst = src converted to dst's float dtype (fp32 / bf16 / fp16, round to nearest even); same
// shape, same device, both contiguous.
void convert_tensor(const TensorView& dst, const TensorView& src, const ExecContext& ctx = {});

// Waits until the work queued on ctx.stream of `device` is done (no-op on the CPU; never inside a
// capture). The layers call it after uploading weights from host memory on the legacy stream,
// so kernels on the caller's (possibly non-blocking) stream never race the uploads.
void stream_synchronize(Device device, const ExecContext& ctx = {});

// Owning memory on a device (host memory for the CPU), 256-byte aligned.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Device device, size_t bytes);
  ~Buffer();
  Buffer(Buffer&& o) noexcept;
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }
  // A contiguous view of `shape` starting `offset_bytes` into the buffer (bounds-checked).
  TensorView view(DType dtype, std::initializer_list<int64_t> shape, size_t offset_bytes = 0) const;

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  Device device_{};
};

}  // namespace linattn
