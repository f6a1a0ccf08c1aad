// Context parallelism on CUDA tensors (see cp_ops.h): the entry points the CP ops dispatch to
// for CUDA tensors, and their shared host pieces: the call checks, the device rank layout
// (dev::Layout: global cu_seqlens and rank offsets stay on the device, never read on the host),
// and the scratch carving (the caller's ctx.workspace, or on eager calls a stream-ordered
// allocation freed stream-ordered at the end). Every exchange is Communicator::all_gather on
// ctx.stream (NCCL: no host synchronization), so a call is capturable into a CUDA graph when
// opt.use_graph is set and ctx.workspace holds cp_*_workspace_bytes; all ranks capture and replay
// together (lockstep). Builds without CUDA raise Unsupported from these.
#pragma once
#include <cstddef>
#include <cstdint>

#include "parallel/cp_dev.h"
#include "parallel/cp_ops.h"

namespace linattn::parallel {

void cp_conv_fwd_cuda(const CpContext& cp, const ConvInputs& in, const ConvOutputs& out, const ConvOptions& opt,
                      const ExecContext& ctx);
void cp_conv_bwd_cuda(const CpContext& cp, const ConvInputs& in, const TensorView& dy, const TensorView& d_final_state,
                      const ConvGrads& grads, const ConvOptions& opt, const ExecContext& ctx);
size_t cp_conv_workspace_bytes_cuda(const CpContext& cp, const ConvInputs& in, const ConvOptions& opt);

void cp_chunk_attn_fwd_cuda(const CpContext& cp, const ChunkAttnInputs& in, const ChunkAttnOutputs& out,
                            const ChunkAttnOptions& opt, const ExecContext& ctx);
void cp_chunk_attn_bwd_cuda(const CpContext& cp, const ChunkAttnInputs& in, const TensorView& d_o,
                            const TensorView& d_final_state, const ChunkAttnGrads& grads, const ChunkAttnOptions& opt,
                            const ExecContext& ctx);
size_t cp_chunk_attn_workspace_bytes_cuda(const CpContext& cp, const ChunkAttnInputs& in, const ChunkAttnOptions& opt,
                                          bool backward);
// Whether this build's GDN / KDA forward exchange uses tier 3's chunked state pass (cuda/seg) for
// the shapes it supports (else the token-by-token pass everywhere).
bool cp_cuda_tier3_state_pass();

namespace cudacp {

// Bump allocator (256-byte pieces). Counting pass: base kCountingBase, a fake non-null address
// (the pointers are never dereferenced; the views built from them only size the inner ops'
// workspaces, and validation rejects null data pointers).
constexpr uintptr_t kCountingBase = uintptr_t{1} << 20;
struct Carve {
  uintptr_t base = 0;
  size_t off = 0;
  template <class T>
  T* take(size_t count) {
    off = (off + 255) & ~size_t{255};
    T* r = reinterpret_cast<T*>(base + off);
    off += count * sizeof(T);
    return r;
  }
  void* rest() const { return reinterpret_cast<void*>(base + ((off + 255) & ~size_t{255})); }
  size_t used() const { return (off + 255) & ~size_t{255}; }
};

// Checks shared by every CUDA CP call: communicator with device buffers, `rows` ([1, r, ...] of
// rank `ndim`) on a CUDA device, cu_seqlens (optional) and cp.rank_offsets device int32 / int64
// tensors on that device ([N + 1], [world + 1]). Returns the layout.
dev::Layout open_call(const CpContext& cp, const char* op, const TensorView& cu_seqlens, const TensorView& rows,
                      const char* name, int ndim);

// Scratch of `need` bytes: ctx.workspace when it is large enough (graph mode requires it), else
// (eager) cudaMallocAsync on ctx.stream, freed with cudaFreeAsync by the destructor.
class Scratch {
 public:
  Scratch(const ExecContext& ctx, size_t need, bool use_graph, const char* op);
  ~Scratch();
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  uintptr_t base() const { return reinterpret_cast<uintptr_t>(ptr_); }

 private:
  void* ptr_ = nullptr;
  void* stream_ = nullptr;
  bool owned_ = false;
};

// Sets the current device for the call's scope (restores the caller's on exit).
class DeviceScope {
 public:
  explicit DeviceScope(int ordinal);
  ~DeviceScope();

 private:
  int prev_ = 0;
};

void memset_async(void* p, size_t bytes, void* stream);
void copy_async(void* dst, const void* src, size_t bytes, void* stream);

}  // namespace cudacp
}  // namespace linattn::parallel
