// linattn::chunk_attn_fwd: validate (meta) -> CUDA, or plan (src/plan) -> CPU chunked forward
// (src/cpu), run now or recorded into the active CPU graph capture (core/capture.h).
// Eager (use_graph = false): cu_seqlens is validated on the host (end <= T) and the plan uses the
// real lengths; refused under a capture. Fixed capacity (use_graph = true): graph arguments are
// validated (meta/graph_args.h), nothing reads cu_seqlens until the kernel runs and the plan uses
// capacity only, so a recorded call replays any layout. The head-level kernel needs only
// cu_seqlens (GRAPH_CONTRACT.md section 3, sequence-parallel programs): supplied chunk_indices /
// chunk_offsets are validated and not read. Padding rows (>= cu_seqlens[N]) of o are left
// untouched. Scratch: ctx.workspace (checked); else, on eager calls, a per-thread library
// buffer; else, under capture, a buffer allocated once at capture and owned by the recorded
// closure (so bucket helpers that cannot size workspaces still capture; replays never allocate).
#include <memory>
#include <vector>

#include "api/backend_cuda.h"
#include "api/chunk_attn_fwd_cpu.h"
#include "api/chunk_params_build.h"
#include "core/capture.h"
#include "core/check.h"
#include "core/thread_pool.h"
#include "cpu/chunk_fwd.h"
#include "cpu/token_recurrent.h"
#include "meta/chunk_attn_desc.h"
#include "meta/graph_args.h"
#include "meta/workspace.h"
#include "plan/chunk_plan.h"

namespace linattn {
namespace {

struct Prepared {
  meta::ChunkAttnDesc d;
  cpu::ChunkParams p;
  plan::ChunkPlan plan;
  cpu::ChunkSchedule sched;
  int threads = 1;
};

int thread_count(const ExecContext& ctx) {
  const int pool = ThreadPool::global().num_threads();
  return ctx.num_threads > 0 ? std::min(ctx.num_threads, pool) : pool;
}

std::vector<int64_t> host_lengths(const meta::ChunkAttnDesc& d, const ChunkAttnInputs& in) {
  std::vector<int64_t> lens(static_cast<size_t>(d.N));
  for (int64_t n = 0; n < d.N; ++n)
    lens[n] = d.varlen ? meta::read_index(in.cu_seqlens, n + 1) - meta::read_index(in.cu_seqlens, n) : d.T;
  return lens;
}

// Everything but the CUDA dispatch: validation, lengths (eager), plan, params.
Prepared prepare(const meta::ChunkAttnDesc& d, const ChunkAttnInputs& in, const ChunkAttnOutputs* out,
                 const ExecContext& ctx, int segments) {
  Prepared r;
  r.d = d;
  if (out) meta::check_fwd_outputs(d, *out);
  std::vector<int64_t> lens;
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
  } else {
    forbid_eager_during_capture("chunk_attn_fwd with use_graph = false (reads cu_seqlens on the host)");
    if (d.varlen) meta::validate_cu_seqlens_host(in.cu_seqlens, d.T, false);
    lens = host_lengths(d, in);
  }
  r.threads = thread_count(ctx);
  r.plan = plan::plan_chunk_fwd(d, lens, r.threads, segments);
  r.sched = cpu::ChunkSchedule{r.plan.num_threads, r.plan.v_splits, r.plan.v_tile, r.plan.bf16_dot, r.plan.BT,
                               r.plan.segments, r.plan.min_segment};
  r.p = api::build_chunk_params(d, in, out);
  return r;
}

// Runs fn(ws, bytes) now or records it; scratch from ctx or, eagerly, from a per-thread buffer.
template <class Fn>
void launch(const char* name, const ExecContext& ctx, size_t bytes, Fn fn) {
  if (ctx.workspace != nullptr) {
    meta::check_workspace(ctx.workspace, ctx.workspace_bytes, bytes, "workspace");
    void* ws = ctx.workspace;
    run_or_record(name, [fn, ws, bytes] { fn(ws, bytes); });
    return;
  }
  if (active_cpu_capture() != nullptr) {
    // Captured without a workspace: the scratch is allocated once here, at capture, and owned
    // by the recorded closure (freed with the graph); replays never allocate.
    auto buf = std::make_shared<std::vector<std::byte>>(bytes);
    run_or_record(name, [fn, buf] { fn(buf->data(), buf->size()); });
    return;
  }
  thread_local std::vector<std::byte> scratch;
  if (scratch.size() < bytes) scratch.resize(bytes);
  fn(scratch.data(), bytes);
}

}  // namespace

void chunk_attn_fwd(const ChunkAttnInputs& in, const ChunkAttnOutputs& out, const ChunkAttnOptions& opt,
                    const ExecContext& ctx) {
  const meta::ChunkAttnDesc d = meta::describe_chunk_attn(in, opt);
  if (d.device.type == DeviceType::kCUDA) {
    meta::check_fwd_outputs(d, out);
    api::chunk_attn_fwd_cuda(d, in, out, opt, ctx);
    return;
  }
  const Prepared r = prepare(d, in, &out, ctx, opt.segments);
  const cpu::ChunkParams p = r.p;
  const cpu::ChunkSchedule s = r.sched;
  launch(d.kda() ? "kda_fwd" : "gdn_fwd", ctx, cpu::chunk_fwd_workspace_bytes(p, s),
         [p, s](void* ws, size_t bytes) { cpu::chunk_fwd(p, s, ws, bytes); });
}

size_t chunk_attn_saved_bytes(const ChunkAttnInputs& in, const ChunkAttnOptions& opt) {
  const meta::ChunkAttnDesc d = meta::describe_chunk_attn(in, opt);
  // The CPU backward recomputes its forward per chunk (cpu/chunk_bwd.h): no cache.
  return d.device.type == DeviceType::kCUDA ? api::chunk_attn_saved_bytes_cuda(d, in, opt) : 0;
}

size_t chunk_attn_fwd_workspace_bytes(const ChunkAttnInputs& in, const ChunkAttnOptions& opt,
                                      const ExecContext& ctx) {
  const meta::ChunkAttnDesc d = meta::describe_chunk_attn(in, opt);
  if (d.device.type == DeviceType::kCUDA) return api::chunk_attn_fwd_workspace_bytes_cuda(d, in, opt);
  std::vector<int64_t> lens;
  if (!d.use_graph) {
    if (d.varlen) meta::validate_cu_seqlens_host(in.cu_seqlens, d.T, false);
    lens = host_lengths(d, in);
  }
  const plan::ChunkPlan pl = plan::plan_chunk_fwd(d, lens, thread_count(ctx), opt.segments);
  const cpu::ChunkParams p = api::build_chunk_params(d, in, nullptr);
  return cpu::chunk_fwd_workspace_bytes(p, cpu::ChunkSchedule{pl.num_threads, pl.v_splits, pl.v_tile, pl.bf16_dot, pl.BT,
                                                             pl.segments, pl.min_segment});
}

namespace api {

std::string chunk_attn_fwd_plan(const ChunkAttnInputs& in, const ChunkAttnOptions& opt, const ExecContext& ctx) {
  return prepare(meta::describe_chunk_attn(in, opt), in, nullptr, ctx, opt.segments).plan.to_string();
}

void chunk_attn_fwd_token_recurrent(const ChunkAttnInputs& in, const ChunkAttnOutputs& out,
                                    const ChunkAttnOptions& opt, const ExecContext& ctx) {
  const meta::ChunkAttnDesc d = meta::describe_chunk_attn(in, opt);
  LINATTN_CHECK(d.device.type == DeviceType::kCPU, "q: the token-recurrent path runs on the CPU, got ",
                device_name(d.device));
  const Prepared r = prepare(d, in, &out, ctx, opt.segments);
  const cpu::ChunkParams p = r.p;
  const int threads = r.threads;
  launch("token_recurrent_fwd", ctx, cpu::token_recurrent_workspace_bytes(p, threads),
         [p, threads](void* ws, size_t) { cpu::token_recurrent_fwd(p, threads, ws); });
}

}  // namespace api
}  // namespace linattn
