// DenseContext registry and the cuBLAS GEMM (dense_cuda.h). One context per (device, stream),
// created once and kept for the process (handles are never destroyed, so a graph captured with
// one stays valid). GEMMs go through cublasLt with one algorithm per GEMM class and size bucket
// (dense_lt.cc: a new token count must not cost a heuristic run and new kernels); where cublasLt
// has no algorithm, or with LINATTN_CUDA_GEMM=gemmex, through cublasGemmEx, with the stream and the
// fixed workspace set on the handle. Both read the row-major operands in cuBLAS's column-major
// view: c^T = op(b)^T op(a)^T, which is c's own storage read column-major.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/env.h"
#include "cuda/common/check.h"
#include "cuda/dense/dense_context.h"
#include "cuda/dense/dense_cuda.h"
#include "cuda/dense/dense_lt.h"

namespace linattn::cuda {
namespace {

constexpr size_t kCublasWorkspace = size_t(32) << 20;

struct DenseContext {
  cublasHandle_t handle = nullptr;
  cublasLtHandle_t lt = nullptr;
  void* workspace = nullptr;
  float* partials = nullptr;
  size_t partial_floats = 0;
  std::vector<float*> retired;  // grown-out partials, alive for graphs that captured them
};

std::mutex g_mu;
std::map<std::pair<int, void*>, std::unique_ptr<DenseContext>> g_ctx;

bool capturing(void* stream) {
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  LINATTN_CUDA_CHECK(cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &cs));
  return cs != cudaStreamCaptureStatusNone;
}

// Restores the caller's current device on scope exit.
struct DeviceScope {
  int prev = 0;
  explicit DeviceScope(int d) {
    LINATTN_CUDA_CHECK(cudaGetDevice(&prev));
    if (prev != d) LINATTN_CUDA_CHECK(cudaSetDevice(d));
  }
  ~DeviceScope() { (void)cudaSetDevice(prev); }
};

// The context of (device, stream), created when missing (never while the stream captures).
DenseContext& context(int device, void* stream) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_ctx.find({device, stream});
  if (it != g_ctx.end()) return *it->second;
  LINATTN_CHECK_CODE(!capturing(stream), ErrorCode::kCaptureViolation, FailureCategory::kAddressOrLifetime,
                     "dense ops on cuda:", device, ": the stream is being captured but its cuBLAS handle "
                     "does not exist yet; call dense_prepare (LinearAttentionLayer::reserve does) before capturing");
  DeviceScope scope(device);
  auto c = std::make_unique<DenseContext>();
  LINATTN_CUBLAS_CHECK(cublasCreate(&c->handle));
  LINATTN_CUBLAS_CHECK(cublasLtCreate(&c->lt));
  LINATTN_CUDA_CHECK(cudaMalloc(&c->workspace, kCublasWorkspace));
  // RMSNorm-backward partials for the widest row the kernels take, so they never grow later.
  c->partial_floats = size_t(kRmsNormMaxD) * dense::kNormPartialBlocks;
  LINATTN_CUDA_CHECK(cudaMalloc(&c->partials, c->partial_floats * sizeof(float)));
  return *g_ctx.emplace(std::make_pair(device, stream), std::move(c)).first->second;
}

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::kF32: return CUDA_R_32F;
    case DType::kBF16: return CUDA_R_16BF;
    case DType::kF16: return CUDA_R_16F;
    default: LINATTN_UNSUPPORTED("gemm on CUDA: dtype ", dtype_name(t), " (supported: fp32, bf16, fp16)");
  }
}

// LINATTN_CUDA_GEMM=gemmex: every GEMM through cublasGemmEx (the A/B baseline), read once; any other value
// (unset or empty aside) is an error.
bool gemmex_only() {
  static const bool v = env_choice("LINATTN_CUDA_GEMM", {"gemmex"}, -1, "unset: cublasLt where it takes the GEMM") == 0;
  return v;
}

}  // namespace

void dense_prepare(int device, void* stream) { (void)context(device, stream); }

bool dense_prepared(int device, void* stream) {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_ctx.count({device, stream}) != 0;
}

namespace dense {
float* partials(int device, void* stream, size_t floats) {
  DenseContext& c = context(device, stream);
  std::lock_guard<std::mutex> lock(g_mu);
  if (c.partial_floats >= floats) return c.partials;
  LINATTN_CHECK_CODE(!capturing(stream), ErrorCode::kCaptureViolation, FailureCategory::kAddressOrLifetime,
                     "rms_norm_gated_bwd on cuda:", device, ": needs ", floats, " floats of partials scratch "
                     "but ", c.partial_floats, " were prepared; run it once eagerly before capturing");
  DeviceScope scope(device);
  if (c.partials) c.retired.push_back(c.partials);
  LINATTN_CUDA_CHECK(cudaMalloc(&c.partials, floats * sizeof(float)));
  c.partial_floats = floats;
  return c.partials;
}
}  // namespace dense

void gemm(int device, void* stream, const GemmArgs& g) {
  if (g.M == 0 || g.N == 0) return;
  LINATTN_CHECK(g.c_dtype == g.ab_dtype || g.c_dtype == DType::kF32, "gemm on CUDA: c dtype ",
                dtype_name(g.c_dtype), " with a/b ", dtype_name(g.ab_dtype), " (c must match a/b or be fp32)");
  const cudaDataType_t ab = cuda_type(g.ab_dtype), ct = cuda_type(g.c_dtype);
  LINATTN_CHECK(g.M < (int64_t(1) << 31) && g.N < (int64_t(1) << 31) && g.K < (int64_t(1) << 31),
                "gemm on CUDA: M, N, K = ", g.M, ", ", g.N, ", ", g.K, " exceed int32");
  DenseContext& c = context(device, stream);
  DeviceScope scope(device);
  if (g.K > 0 && !gemmex_only()) {
    if (dense::gemm_lt(c.lt, g, {ab, ct, c.workspace, kCublasWorkspace, static_cast<cudaStream_t>(stream)})) return;
  }
  LINATTN_CUBLAS_CHECK(cublasSetStream(c.handle, static_cast<cudaStream_t>(stream)));
  // cublasSetStream resets the workspace to cuBLAS's own pool: set ours again.
  LINATTN_CUBLAS_CHECK(cublasSetWorkspace(c.handle, c.workspace, kCublasWorkspace));
  if (g.K == 0) {
    LINATTN_CHECK(g.beta == 0.0f || g.beta == 1.0f, "gemm on CUDA: K = 0 needs beta 0 or 1, got ", g.beta);
    if (g.beta == 0.0f)
      LINATTN_CUDA_CHECK(cudaMemset2DAsync(g.c, size_t(g.ldc) * dtype_size(g.c_dtype), 0,
                                           size_t(g.N) * dtype_size(g.c_dtype), size_t(g.M),
                                           static_cast<cudaStream_t>(stream)));
    return;
  }
  auto ld = [](int64_t x) { return static_cast<int>(x < 1 ? 1 : x); };
  const float alpha = g.alpha, beta = g.beta;
  LINATTN_CUBLAS_CHECK(cublasGemmEx(c.handle, g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                    g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(g.N),
                                    static_cast<int>(g.M), static_cast<int>(g.K), &alpha, g.b, ab, ld(g.ldb), g.a, ab,
                                    ld(g.lda), &beta, g.c, ct, ld(g.ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace linattn::cuda
