// linattn::chunk_attn_bwd: validate (meta) -> the CUDA backend, or the CPU chunked backward
// (src/cpu/chunk_bwd.h), run now or recorded into the active CPU graph capture (core/capture.h).
// Eager (use_graph = false): cu_seqlens is validated on the host, the scratch is sized by the
// longest sequence; forbidden inside a capture. Fixed capacity (use_graph = true): nothing reads
// cu_seqlens until the work runs and the scratch is sized by capacity (rows tokens), so a
// recorded call replays any layout. The compute chunk is the CPU planner's (BT 64 runs as 32,
// exact either way), and so is the use of bf16 dot products for bf16 inputs. Scratch: ctx.workspace when given (its size is checked
// here, before anything is recorded); else, on eager calls, a per-thread library buffer (grows
// to the largest call, O(threads x chunks x K x V)); else, under capture, a buffer allocated
// once at capture and owned by the recorded closure (replays never allocate).
#include <algorithm>
#include <memory>

#include "api/backend_cuda.h"
#include "api/chunk_params_build.h"
#include "core/capture.h"
#include "core/check.h"
#include "core/thread_pool.h"
#include "cpu/chunk_bwd.h"
#include "cpu/gemm_bf16.h"
#include "linattn/ops.h"
#include "meta/chunk_attn_desc.h"
#include "meta/graph_args.h"
#include "meta/workspace.h"
#include "plan/chunk_plan.h"

namespace linattn {
namespace {

cpu::BwdBuf buf(const TensorView& t) { return {t.defined() ? t.data : nullptr, t.dtype}; }
cpu::BwdOut out(const TensorView& t) { return {t.defined() ? t.data : nullptr, t.dtype}; }

int thread_count(const ExecContext& ctx) {
  const int pool = ThreadPool::global().num_threads();
  return ctx.num_threads > 0 ? std::min(ctx.num_threads, pool) : pool;
}

// Longest sequence of an eager call (cu_seqlens validated), or the capacity in graph mode.
int64_t scratch_seq_len(const meta::ChunkAttnDesc& d, const ChunkAttnInputs& in) {
  if (d.use_graph || !d.varlen) return d.use_graph ? d.B * d.T : d.T;
  int64_t m = 0;
  for (int64_t n = 0; n < d.N; ++n)
    m = std::max(m, meta::read_index(in.cu_seqlens, n + 1) - meta::read_index(in.cu_seqlens, n));
  return m;
}

// Validation shared by the op and its workspace query; sets the compute chunk and returns the
// scratch size.
size_t prepare(const meta::ChunkAttnDesc& d, const ChunkAttnInputs& in, const ExecContext& ctx,
               cpu::ChunkBwdParams& p, int segments) {
  if (d.use_graph) {
    meta::GraphMetaArgs g;
    g.cu_seqlens = in.cu_seqlens;
    g.chunk_indices = in.chunk_indices;
    g.chunk_offsets = in.chunk_offsets;
    g.max_num_seqs = d.N;
    g.T_max = d.B * d.T;
    g.BT = d.BT;
    g.device = d.device;
    meta::check_graph_meta_args(g);
  } else if (d.varlen) {
    meta::validate_cu_seqlens_host(in.cu_seqlens, d.total_tokens(), false);
  }
  // The compute chunk is the forward planner's (the chunked form is exact for any chunk size;
  // 64 runs as 32 on the CPU, measured ~8% faster for the backward too; LINATTN_CPU_CHUNK forces).
  const plan::ChunkPlan pl = plan::plan_chunk_fwd(d, {}, thread_count(ctx), segments);
  p.f.BT = pl.BT;
  p.segments = pl.segments;  // tier 3 (exact sequence splitting), see cpu/chunk_bwd_seg.h
  p.min_segment = pl.min_segment;
  p.bf16_dot = pl.bf16_dot && cpu::kHaveBf16Dot;
  return cpu::chunk_bwd_workspace_bytes(p, thread_count(ctx), scratch_seq_len(d, in));
}

}  // namespace

void chunk_attn_bwd(const ChunkAttnInputs& in, const TensorView& d_o, const TensorView& d_final_state,
                    const ChunkAttnGrads& grads, const ChunkAttnOptions& opt, const ExecContext& ctx) {
  const meta::ChunkAttnDesc d = meta::describe_chunk_attn(in, opt);
  meta::check_bwd_args(d, d_o, d_final_state, grads);
  if (d.device.type == DeviceType::kCUDA) {
    api::chunk_attn_bwd_cuda(d, in, d_o, d_final_state, grads, opt, ctx);
    return;
  }
  if (!d.use_graph)
    forbid_eager_during_capture(
        "chunk_attn_bwd with use_graph = false (the eager path reads cu_seqlens on the host); "
        "expected use_graph = true");
  cpu::ChunkBwdParams p;
  p.f = api::build_chunk_params(d, in, nullptr);
  p.d_o = buf(d_o);
  p.dht = buf(d_final_state);
  p.dq = out(grads.dq);
  p.dk = out(grads.dk);
  p.dv = out(grads.dv);
  p.dg = out(grads.dg);
  p.dbeta = out(grads.dbeta);
  p.dA_log = out(grads.dA_log);
  p.ddt_bias = out(grads.ddt_bias);
  p.dh0 = out(grads.dinitial_state);
  const size_t bytes = prepare(d, in, ctx, p, opt.segments);
  const int threads = thread_count(ctx);
  const char* name = d.kda() ? "kda_bwd" : "gdn_bwd";
  if (ctx.workspace != nullptr) {
    meta::check_workspace(ctx.workspace, ctx.workspace_bytes, bytes, "workspace");
    void* ws = ctx.workspace;
    run_or_record(name, [p, threads, ws, bytes] { cpu::chunk_bwd(p, ws, bytes, threads); });
    return;
  }
  if (active_cpu_capture() != nullptr) {
    // Captured without a workspace: scratch allocated once here, at capture, owned by the
    // recorded closure (uninitialized: every element is written before it is read).
    std::shared_ptr<std::byte[]> mem(new std::byte[bytes]);
    run_or_record(name, [p, threads, mem, bytes] { cpu::chunk_bwd(p, mem.get(), bytes, threads); });
    return;
  }
  // Eager: a per-thread buffer that only grows, so repeated calls do not fault fresh pages in.
  thread_local std::unique_ptr<std::byte[]> scratch;
  thread_local size_t scratch_bytes = 0;
  if (scratch_bytes < bytes) {
    scratch.reset(new std::byte[bytes]);
    scratch_bytes = bytes;
  }
  cpu::chunk_bwd(p, scratch.get(), bytes, threads);
}

size_t chunk_attn_bwd_workspace_bytes(const ChunkAttnInputs& in, const ChunkAttnOptions& opt,
                                      const ExecContext& ctx) {
  const meta::ChunkAttnDesc d = meta::describe_chunk_attn(in, opt);
  if (d.device.type == DeviceType::kCUDA) return api::chunk_attn_bwd_workspace_bytes_cuda(d, in, opt);
  cpu::ChunkBwdParams p;
  p.f = api::build_chunk_params(d, in, nullptr);
  return prepare(d, in, ctx, p, opt.segments);
}

}  // namespace linattn
