// Shared pieces of the CPU context-parallel ops (see cp_common.h).
#include "parallel/cp_common.h"

#include <cstring>

#include "core/check.h"
#include "cpu/convert.h"

namespace linattn::parallel {

CpShard open_cp_call(const CpContext& cp, const char* op, const char* cpu_only, bool use_graph,
                     const TensorView& cu_seqlens, const TensorView& rows, const char* name, int ndim,
                     const char* dims) {
  if (rows.device.type != DeviceType::kCPU || cp.comm->device_buffers())
    LINATTN_UNSUPPORTED("context-parallel ", op, " on ", device_name(rows.device), cpu_only);
  LINATTN_CHECK(!use_graph, "use_graph: context-parallel calls are eager only, got true");
  CpShard shard = make_shard(cu_seqlens, cp.rank_offsets, cp.comm->rank(), cp.comm->world_size());
  LINATTN_CHECK(rows.ndim == ndim && rows.shape[0] == 1 && rows.shape[1] == shard.rows(), name, ": expected [1, ",
                shard.rows(), dims, " (this rank's rows), got batch ", rows.shape[0], " x ", rows.shape[1], " rows");
  return shard;
}

std::vector<float> gather_records(const CpContext& cp, const std::vector<float>& rec, const ExecContext& ctx) {
  std::vector<float> all(rec.size() * static_cast<size_t>(cp.comm->world_size()));
  cp.comm->all_gather(rec.data(), all.data(), rec.size() * sizeof(float), ctx.stream);
  return all;
}

Tensor virtual_cu_tensor(const CpShard& shard) {
  const std::vector<int64_t> vcu = shard.virtual_cu();
  Tensor cu(DType::kI64, {static_cast<int64_t>(shard.seqs.size()) + 1});
  std::memcpy(cu.data<int64_t>(), vcu.data(), sizeof(int64_t) * vcu.size());
  return cu;
}

void reduce_param_grad(const CpContext& cp, const Tensor& part, const TensorView& dst, const ExecContext& ctx) {
  const int64_t n = part.numel();
  std::vector<float> rec(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) rec[i] = static_cast<float>(part.get(i));
  const std::vector<float> all = cp.reduce_param_grads ? gather_records(cp, rec, ctx) : rec;
  const int parts = cp.reduce_param_grads ? cp.comm->world_size() : 1;
  for (int64_t i = 0; i < n; ++i) {
    double s = 0.0;
    for (int r = 0; r < parts; ++r) s += all[r * n + i];
    const float f = static_cast<float>(s);
    cpu::store_row(&f, 1, dst.dtype, dst.data, i);
  }
}

}  // namespace linattn::parallel
