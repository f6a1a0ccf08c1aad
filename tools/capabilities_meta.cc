// Capability probe of the varlen chunk tables (meta.h): eager = prepare_chunk_meta_eager on a
// host cu_seqlens; fixed / graph = prepare_chunk_meta on static tensors of a Capacity
// (kProbeTMax, kProbeNMax, BT = 32) pre-filled with garbage. The cell's dtype is the dtype of
// cu_seqlens (i32 / i64). The expected tables come from a direct loop here (GRAPH_CONTRACT.md
// section 2): chunk_indices rows (sequence, chunk) in sequence order, then sentinel rows
// (kSentinelSeq, 0) up to NT_max; chunk_offsets the exclusive prefix sum of chunks per sequence.
// The comparison is exact.
#include <cmath>
#include <functional>

#include "capabilities_util.h"
#include "core/check.h"
#include "linattn/graph.h"
#include "linattn/meta.h"

namespace linattn::caps {
namespace {

constexpr int kBT = 32;

struct Tables {
  Tensor indices, offsets;
};

// rows < 0: exact size (eager); else the static NT_max rows with sentinels and n_seqs sequences.
Tables expected(const std::vector<int64_t>& lens, int64_t rows, int64_t n_seqs) {
  std::vector<int32_t> idx, off = {0};
  for (int64_t n = 0; n < n_seqs; ++n) {
    const int64_t len = n < static_cast<int64_t>(lens.size()) ? lens[n] : 0;
    for (int64_t c = 0; c * kBT < len; ++c) {
      idx.push_back(static_cast<int32_t>(n));
      idx.push_back(static_cast<int32_t>(c));
    }
    off.push_back(static_cast<int32_t>(idx.size() / 2));
  }
  const int64_t nt = static_cast<int64_t>(idx.size() / 2);
  const int64_t r = rows < 0 ? nt : rows;
  Tables t{Tensor(DType::kI32, {r, 2}), Tensor(DType::kI32, {static_cast<int64_t>(off.size())})};
  for (int64_t i = 0; i < r; ++i) {
    t.indices.set(2 * i, i < nt ? idx[2 * i] : kSentinelSeq);
    t.indices.set(2 * i + 1, i < nt ? idx[2 * i + 1] : 0);
  }
  for (size_t i = 0; i < off.size(); ++i) t.offsets.set(static_cast<int64_t>(i), off[i]);
  return t;
}

Tensor garbage_i32(Rng& rng, std::vector<int64_t> shape) {
  Tensor t(DType::kI32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, std::floor(uniform(rng, -50, 50)));
  return t;
}

}  // namespace

void probe_metadata(const CellKey& key, int variant, Checker& chk) {
  constexpr test::Tolerance kExact{0.0, 0.0};
  const DType cu_dt = dtype_from_name(key.dtype);
  Rng rng(3000 + 13 * variant);
  const std::vector<int64_t> lens0 = layout(variant, 0);
  if (key.mode == "eager") {  // host only (the caller's cu_seqlens on the host)
    const Tensor cu = cu_tensor(lens0, static_cast<int64_t>(lens0.size()), cu_dt);
    const ChunkMetaTables t = prepare_chunk_meta_eager(cu, kBT, total(lens0), true);
    const Tables e = expected(lens0, -1, static_cast<int64_t>(lens0.size()));
    LINATTN_CHECK(t.chunk_indices.numel() == e.indices.numel(), "chunk_indices: expected ", e.indices.numel() / 2,
                  " rows, got ", t.chunk_indices.numel() / 2);
    chk.add("chunk_indices", e.indices, t.chunk_indices, kExact);
    chk.add("chunk_offsets", e.offsets, t.chunk_offsets, kExact);
    chk.add_scalar("num_chunks", static_cast<double>(e.indices.numel() / 2), static_cast<double>(t.num_chunks), 1e-12);
    return;
  }
  Backend be(key.backend);
  const Capacity cap{kProbeTMax, kProbeNMax, kBT};
  Slot cu(cu_tensor(lens0, kProbeNMax, cu_dt), be);
  Slot ci(garbage_i32(rng, {cap.NT_max(), 2}), be), co(garbage_i32(rng, {kProbeNMax + 1}), be);
  const std::function<void()> step = [&] { prepare_chunk_meta(cap, cu, ci, co, be.ctx()); };
  if (key.mode == "fixed") {
    step();
    const Tables e = expected(lens0, cap.NT_max(), kProbeNMax);
    chk.add("chunk_indices", e.indices, ci.download(), kExact);
    chk.add("chunk_offsets", e.offsets, co.download(), kExact);
    return;
  }
  Graph g(be.device(), be.stream());
  step();
  g.capture(step);
  for (int i = 1; i <= 2; ++i) {
    const std::vector<int64_t> lens = layout(variant, i);
    cu.upload(cu_tensor(lens, kProbeNMax, cu_dt));
    ci.upload(garbage_i32(rng, {cap.NT_max(), 2}));
    g.replay();
    const Tables e = expected(lens, cap.NT_max(), kProbeNMax);
    const Tensor gi = ci.download(), go = co.download();
    chk.add("replay" + std::to_string(i) + ".chunk_indices", e.indices, gi, kExact);
    chk.add("replay" + std::to_string(i) + ".chunk_offsets", e.offsets, go, kExact);
    step();
    chk.add_bitwise("chunk_indices", gi, ci.download());
    chk.add_bitwise("chunk_offsets", go, co.download());
  }
}

}  // namespace linattn::caps
