// make_shard (see cp_shard.h).
#include "parallel/cp_shard.h"

#include "core/check.h"
#include "meta/chunk_attn_desc.h"

namespace linattn::parallel {

std::vector<int64_t> CpShard::virtual_cu() const {
  std::vector<int64_t> cu;
  cu.reserve(seqs.size() + 1);
  for (const CpSeq& s : seqs) cu.push_back(s.bos);
  cu.push_back(seqs.empty() ? 0 : seqs.back().eos);
  return cu;
}

CpShard make_shard(const TensorView& cu_seqlens, const TensorView& rank_offsets, int rank, int world) {
  CpShard s;
  s.rank = rank;
  s.world = world;
  LINATTN_CHECK(rank_offsets.defined() && rank_offsets.device.type == DeviceType::kCPU && rank_offsets.ndim == 1 &&
                    rank_offsets.shape[0] == world + 1,
                "rank_offsets: expected a host [", world + 1, "] integer tensor, got ",
                rank_offsets.defined() ? rank_offsets.shape[0] : -1, " entries");
  for (int r = 0; r <= world; ++r) s.rank_begin.push_back(meta::read_index(rank_offsets, r));
  LINATTN_CHECK(s.rank_begin[0] == 0, "rank_offsets[0]: expected 0, got ", s.rank_begin[0]);
  for (int r = 0; r < world; ++r)
    LINATTN_CHECK(s.rank_begin[r] <= s.rank_begin[r + 1], "rank_offsets: expected non-decreasing, got ",
                  s.rank_begin[r], " then ", s.rank_begin[r + 1], " at rank ", r);
  const int64_t total = s.rank_begin[world];
  if (cu_seqlens.defined()) {
    const int64_t N = cu_seqlens.shape[0] - 1;
    int64_t prev = meta::read_index(cu_seqlens, 0);
    LINATTN_CHECK(prev == 0, "cu_seqlens[0]: expected 0, got ", prev);
    for (int64_t n = 0; n < N; ++n) {
      const int64_t e = meta::read_index(cu_seqlens, n + 1);
      LINATTN_CHECK(e >= prev && e <= total, "cu_seqlens[", n + 1, "]: expected in [", prev, ", ", total, "], got ", e);
      s.seq_bos.push_back(prev);
      s.seq_eos.push_back(e);
      prev = e;
    }
  } else {
    s.seq_bos.push_back(0);
    s.seq_eos.push_back(total);
  }
  const int64_t R0 = s.rank_begin[rank], R1 = s.rank_begin[rank + 1];
  auto owner_of_empty = [&](int64_t b) {
    int r = 0;
    for (int i = 0; i < world; ++i)
      if (s.rank_begin[i] <= b) r = i;
    return r;
  };
  for (int64_t n = 0; n < s.num_seqs(); ++n) {
    const int64_t b = s.seq_bos[n], e = s.seq_eos[n];
    if (b == e) {
      if (owner_of_empty(b) == rank) s.seqs.push_back({n, b - R0, b - R0, true, true});
      continue;
    }
    const int64_t lb = std::max(b, R0), le = std::min(e, R1);
    if (lb < le) s.seqs.push_back({n, lb - R0, le - R0, b >= R0, e <= R1});
  }
  return s;
}

}  // namespace linattn::parallel
