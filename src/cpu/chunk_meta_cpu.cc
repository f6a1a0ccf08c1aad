// Static chunk metadata on the CPU (see chunk_meta_cpu.h). Sequence n's chunks fill rows
// [off_n, off_{n+1}); the tail [off_N_max, NT_max) gets sentinel rows (-1, 0).
#include "cpu/chunk_meta_cpu.h"

#include <algorithm>
#include <cstdint>

#include "meta/capacity.h"

namespace linattn::cpu {

namespace {
template <class I>
void build(const I* cu, const meta::StaticChunkMetaParams& p) {
  int32_t* rows = p.chunk_indices;
  int32_t* offs = p.chunk_offsets;
  const auto clamp_cu = [&](int64_t n) {
    return std::clamp<int64_t>(static_cast<int64_t>(cu[n]), 0, p.T_max);
  };
  int64_t off = 0;
  int64_t lo = clamp_cu(0);
  offs[0] = 0;
  for (int64_t n = 0; n < p.N_max; ++n) {
    const int64_t hi = clamp_cu(n + 1);
    const int64_t len = std::max<int64_t>(hi - lo, 0);
    const int64_t end = std::min(off + meta::chunks_of(len, p.BT), p.NT_max);
    for (int64_t r = off; r < end; ++r) {
      rows[2 * r] = static_cast<int32_t>(n);
      rows[2 * r + 1] = static_cast<int32_t>(r - off);
    }
    off = end;
    offs[n + 1] = static_cast<int32_t>(off);
    lo = hi;
  }
  for (int64_t r = off; r < p.NT_max; ++r) {
    rows[2 * r] = kSentinelSeq;
    rows[2 * r + 1] = 0;
  }
}
}  // namespace

void static_chunk_meta(const meta::StaticChunkMetaParams& p) {
  if (p.cu_int64) build(static_cast<const int64_t*>(p.cu_seqlens), p);
  else build(static_cast<const int32_t*>(p.cu_seqlens), p);
}

}  // namespace linattn::cpu
