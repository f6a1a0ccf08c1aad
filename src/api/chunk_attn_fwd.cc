// linattn::chunk_attn_fwd: validate (meta) -> CUDA, or plan (src/plan) -> CPU chunked forward
// (src/cpu), run now or recorded into the active CPU graph capture (core/capture.h).
// Eager (use_graph = false): cu_seqlens is validated on the host (end <= T) and the plan uses the
// real lengths. Fixed capacity (use_graph = true): nothing reads cu_seqlens until the kernel runs;
// the plan uses capacity only, so a recorded call replays any layout. The head-level kernel needs
// only cu_seqlens (GRAPH_CONTRACT.md section 3, sequence-parallel programs); supplied
// chunk_indices / chunk_offsets are accepted and not read. Padding rows (>= cu_seqlens[N]) of o
// are left untouched. Scratch: ctx.workspace when given (checked), else allocated here and, under
// capture, owned by the recorded closure (allocated once at capture, never at replay).
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
#include "plan/chunk_plan.h"

namespace linattn {
namespace {

struct Prepared {
  meta::ChunkAttnDesc d;
  cpu::ChunkParams p;
  plan::ChunkPlan plan;
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

Prepared prepare(const ChunkAttnInputs& in, const ChunkAttnOutputs* out, const ChunkAttnOptions& opt,
                 const ExecContext& ctx) {
  Prepared r;
  r.d = meta::describe_chunk_attn(in, opt);
  if (out) meta::check_fwd_outputs(r.d, *out);
  std::vector<int64_t> lens;
  if (r.d.device.type == DeviceType::kCPU && !r.d.use_graph) {
    if (r.d.varlen) meta::validate_cu_seqlens_host(in.cu_seqlens, r.d.T, false);
    lens = host_lengths(r.d, in);
  }
  r.threads = thread_count(ctx);
  r.plan = plan::plan_chunk_fwd(r.d, lens, r.threads);
  r.p = api::build_chunk_params(r.d, in, out);
  return r;
}

// Runs `fn(ws)` now or records it, with `bytes` of scratch from ctx or owned by the closure.
template <class Fn>
void launch(const char* name, const ExecContext& ctx, size_t bytes, Fn fn) {
  if (ctx.workspace != nullptr) {
    LINATTN_CHECK(ctx.workspace_bytes >= bytes, "workspace_bytes: expected at least ", bytes, ", got ",
                  ctx.workspace_bytes);
    void* ws = ctx.workspace;
    run_or_record(name, [fn, ws, bytes] { fn(ws, bytes); });
    return;
  }
  auto buf = std::make_shared<std::vector<std::byte>>(bytes);
  run_or_record(name, [fn, buf] { fn(buf->data(), buf->size()); });
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
  LINATTN_CHECK_CODE(d.use_graph || active_cpu_capture() == nullptr, ErrorCode::kCaptureViolation,
                     FailureCategory::kEagerBackend,
                     "chunk_attn_fwd: use_graph = false (the eager path reads cu_seqlens on the host) "
                     "inside a CPU graph capture; expected use_graph = true");
  const Prepared r = prepare(in, &out, opt, ctx);
  const cpu::ChunkSchedule s{r.plan.num_threads, r.plan.v_splits, r.plan.v_tile};
  const cpu::ChunkParams p = r.p;
  launch(r.d.kda() ? "kda_fwd" : "gdn_fwd", ctx, cpu::chunk_fwd_workspace_bytes(p, s),
         [p, s](void* ws, size_t bytes) { cpu::chunk_fwd(p, s, ws, bytes); });
}

namespace api {

std::string chunk_attn_fwd_plan(const ChunkAttnInputs& in, const ChunkAttnOptions& opt, const ExecContext& ctx) {
  return prepare(in, nullptr, opt, ctx).plan.to_string();
}

void chunk_attn_fwd_token_recurrent(const ChunkAttnInputs& in, const ChunkAttnOutputs& out,
                                    const ChunkAttnOptions& opt, const ExecContext& ctx) {
  const Prepared r = prepare(in, &out, opt, ctx);
  LINATTN_CHECK(r.d.device.type == DeviceType::kCPU, "q: the token-recurrent path runs on the CPU, got ",
                device_name(r.d.device));
  const cpu::ChunkParams p = r.p;
  const int threads = r.threads;
  launch("token_recurrent_fwd", ctx, cpu::token_recurrent_workspace_bytes(p, threads),
         [p, threads](void* ws, size_t) { cpu::token_recurrent_fwd(p, threads, ws); });
}

}  // namespace api
}  // namespace linattn
