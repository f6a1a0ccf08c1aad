// linattn::chunk_attn_bwd: validate (meta), then the CUDA backend or the CPU backward.
// The CPU work is bound into one closure and handed to run_or_record, so a CPU graph capture
// records it and every replay re-reads the (possibly updated) inputs and cu_seqlens in place.
// Eager (use_graph = false): cu_seqlens is validated on the host here. Fixed capacity: it is
// read only when the work runs; the scratch is sized by capacity (B*T tokens per sequence).
#include <memory>

#include "api/backend_cuda.h"
#include "api/chunk_params_build.h"
#include "core/capture.h"
#include "core/check.h"
#include "cpu/chunk_bwd.h"
#include "linattn/ops.h"
#include "meta/chunk_attn_desc.h"

namespace linattn {
namespace {

cpu::BwdBuf buf(const TensorView& t) { return {t.defined() ? t.data : nullptr, t.dtype}; }
cpu::BwdOut out(const TensorView& t) { return {t.defined() ? t.data : nullptr, t.dtype}; }

cpu::ChunkBwdParams make_params(const meta::ChunkAttnDesc& d, const ChunkAttnInputs& in,
                                const TensorView& d_o, const TensorView& d_final_state,
                                const ChunkAttnGrads& g) {
  cpu::ChunkBwdParams p;
  p.f = api::build_chunk_params(d, in, nullptr);
  p.d_o = buf(d_o);
  p.dht = buf(d_final_state);
  p.dq = out(g.dq);
  p.dk = out(g.dk);
  p.dv = out(g.dv);
  p.dg = out(g.dg);
  p.dbeta = out(g.dbeta);
  p.dA_log = out(g.dA_log);
  p.ddt_bias = out(g.ddt_bias);
  p.dh0 = out(g.dinitial_state);
  return p;
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
  if (d.varlen && !d.use_graph) meta::validate_cu_seqlens_host(in.cu_seqlens, d.total_tokens(), false);
  const cpu::ChunkBwdParams p = make_params(d, in, d_o, d_final_state, grads);
  const int threads = ctx.num_threads;
  void* ws = ctx.workspace;
  size_t ws_bytes = ctx.workspace_bytes;
  if (d.use_graph && active_cpu_capture() && ws == nullptr) {
    // The recorded work owns a capacity-sized scratch made here, at capture time, so replays
    // never allocate.
    const size_t bytes = cpu::chunk_bwd_workspace_bytes(p, threads, p.f.rows);
    auto mem = std::shared_ptr<float[]>(new float[bytes / sizeof(float) + 16]);
    run_or_record("chunk_attn_bwd", [p, threads, mem, bytes] {
      cpu::chunk_bwd(p, mem.get(), bytes, threads);
    });
    return;
  }
  run_or_record("chunk_attn_bwd", [p, threads, ws, ws_bytes] { cpu::chunk_bwd(p, ws, ws_bytes, threads); });
}

}  // namespace linattn
