// Shared host pieces of context parallelism on CUDA (see cp_cuda.h); without CUDA the CUDA entry
// points raise Unsupported here.
#include "core/check.h"
#include "parallel/cp_cuda.h"

#if LINATTN_WITH_CUDA
#include <cuda_runtime.h>

#include "cuda/common/check.h"
#include "meta/chunk_attn_desc.h"
#endif

namespace linattn::parallel {

#if LINATTN_WITH_CUDA
namespace cudacp {

namespace {

void expect_index_tensor(const TensorView& t, const char* name, Device dev, int64_t entries) {
  LINATTN_CHECK(t.defined() && t.ndim == 1, name, ": expected a 1-D tensor, got ", t.defined() ? t.ndim : 0,
                " dims");
  LINATTN_CHECK(t.dtype == DType::kI32 || t.dtype == DType::kI64, name, ": expected dtype int32 or int64, got ",
                dtype_name(t.dtype));
  LINATTN_CHECK(t.device == dev, name, ": expected device ", device_name(dev),
                " (context parallelism on CUDA reads it on the device), got ", device_name(t.device));
  LINATTN_CHECK(t.strides[0] == 1, name, ": expected contiguous, got stride ", t.strides[0]);
  if (entries >= 0) LINATTN_CHECK(t.shape[0] == entries, name, ": expected ", entries, " entries, got ", t.shape[0]);
}

}  // namespace

dev::Layout open_call(const CpContext& cp, const char* op, const TensorView& cu_seqlens, const TensorView& rows,
                      const char* name, int ndim) {
  LINATTN_CHECK(cp.comm != nullptr, "cp.comm: expected a Communicator, got null");
  LINATTN_CHECK_CODE(cp.comm->device_buffers(), ErrorCode::kUnsupported, FailureCategory::kDistributed,
                     "context-parallel ", op, " on ", device_name(rows.device),
                     ": expected a communicator with device buffers (NcclCommunicator), got a host one");
  LINATTN_CHECK(rows.ndim == ndim && rows.shape[0] == 1, name, ": expected [1, rows of this rank, ...] (rank ", ndim,
                "), got rank ", rows.ndim, " batch ", rows.ndim > 0 ? rows.shape[0] : 0);
  dev::Layout L;
  L.world = cp.comm->world_size();
  L.rank = cp.comm->rank();
  L.rows = rows.shape[1];
  expect_index_tensor(cp.rank_offsets, "rank_offsets", rows.device, L.world + 1);
  L.off = cp.rank_offsets.data;
  L.off64 = cp.rank_offsets.dtype == DType::kI64;
  if (cu_seqlens.defined()) {
    expect_index_tensor(cu_seqlens, "cu_seqlens", rows.device, -1);
    LINATTN_CHECK(cu_seqlens.shape[0] >= 2, "cu_seqlens: expected at least 2 entries (N + 1), got ",
                  cu_seqlens.shape[0]);
    L.cu = cu_seqlens.data;
    L.cu64 = cu_seqlens.dtype == DType::kI64;
    L.N = cu_seqlens.shape[0] - 1;
  }
  return L;
}

Scratch::Scratch(const ExecContext& ctx, size_t need, bool use_graph, const char* op) : stream_(ctx.stream) {
  if (ctx.workspace != nullptr && ctx.workspace_bytes >= need && reinterpret_cast<uintptr_t>(ctx.workspace) % 256 == 0) {
    ptr_ = ctx.workspace;
    return;
  }
  LINATTN_CHECK_CODE(!use_graph, ErrorCode::kInvalidArgument, FailureCategory::kAddressOrLifetime,
                     "workspace: context-parallel ", op, " with use_graph = true needs a 256-byte aligned "
                     "ctx.workspace of at least ", need, " bytes (cp_", op, "_workspace_bytes), got ",
                     ctx.workspace_bytes, " bytes at ", ctx.workspace);
  LINATTN_CUDA_CHECK(cudaMallocAsync(&ptr_, need == 0 ? 256 : need, static_cast<cudaStream_t>(stream_)));
  owned_ = true;
}

Scratch::~Scratch() {
  if (owned_) (void)cudaFreeAsync(ptr_, static_cast<cudaStream_t>(stream_));
}

DeviceScope::DeviceScope(int ordinal) {
  LINATTN_CUDA_CHECK(cudaGetDevice(&prev_));
  if (prev_ != ordinal) LINATTN_CUDA_CHECK(cudaSetDevice(ordinal));
}

DeviceScope::~DeviceScope() { (void)cudaSetDevice(prev_); }

void memset_async(void* p, size_t bytes, void* stream) {
  if (bytes) LINATTN_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, static_cast<cudaStream_t>(stream)));
}

void copy_async(void* dst, const void* src, size_t bytes, void* stream) {
  if (bytes)
    LINATTN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(stream)));
}

}  // namespace cudacp

#else  // no CUDA in this build

namespace {
[[noreturn]] void no_cuda(const char* op) {
  LINATTN_UNSUPPORTED("context-parallel ", op, " on CUDA: this build has no CUDA backend (LINATTN_ENABLE_CUDA=OFF)");
}
}  // namespace

void cp_conv_fwd_cuda(const CpContext&, const ConvInputs&, const ConvOutputs&, const ConvOptions&,
                      const ExecContext&) {
  no_cuda("conv");
}
void cp_conv_bwd_cuda(const CpContext&, const ConvInputs&, const TensorView&, const TensorView&, const ConvGrads&,
                      const ConvOptions&, const ExecContext&) {
  no_cuda("conv");
}
size_t cp_conv_workspace_bytes_cuda(const CpContext&, const ConvInputs&, const ConvOptions&) { no_cuda("conv"); }
void cp_chunk_attn_fwd_cuda(const CpContext&, const ChunkAttnInputs&, const ChunkAttnOutputs&,
                            const ChunkAttnOptions&, const ExecContext&) {
  no_cuda("chunk_attn");
}
void cp_chunk_attn_bwd_cuda(const CpContext&, const ChunkAttnInputs&, const TensorView&, const TensorView&,
                            const ChunkAttnGrads&, const ChunkAttnOptions&, const ExecContext&) {
  no_cuda("chunk_attn");
}
size_t cp_chunk_attn_workspace_bytes_cuda(const CpContext&, const ChunkAttnInputs&, const ChunkAttnOptions&, bool) {
  no_cuda("chunk_attn");
}
bool cp_cuda_tier3_state_pass() { return false; }

#endif

}  // namespace linattn::parallel
