// Context-parallel sharding of the packed token rows: rank r holds global rows
// [rank_offsets[r], rank_offsets[r + 1]) of every [1, T, ...] token tensor; the per-sequence
// tensors (cu_seqlens, initial / final states) are global on every rank. A rank's part of a
// sequence is a local "virtual sequence" (rows of this rank, chunked from its first row): it
// starts here when the sequence begins on this rank, ends here when it ends on this rank. The
// first virtual sequence may continue one from earlier ranks (the head), the last may continue
// on later ranks (the tail); they are the only ones whose states cross ranks. An empty sequence
// belongs to the highest rank whose first row is <= its offset (the rank holding that row).
#pragma once
#include <cstdint>
#include <vector>

#include "linattn/tensor.h"

namespace linattn::parallel {

struct CpSeq {
  int64_t n = 0;             // global sequence index
  int64_t bos = 0, eos = 0;  // local rows
  bool starts_here = true, ends_here = true;
};

struct CpShard {
  int rank = 0, world = 1;
  std::vector<int64_t> rank_begin;       // [world + 1] global row offsets
  std::vector<int64_t> seq_bos, seq_eos; // [N] global bounds
  std::vector<CpSeq> seqs;               // this rank's virtual sequences, in row order
  int64_t row_begin() const { return rank_begin[rank]; }
  int64_t rows() const { return rank_begin[rank + 1] - rank_begin[rank]; }
  int64_t num_seqs() const { return static_cast<int64_t>(seq_bos.size()); }
  bool has_head() const { return !seqs.empty() && !seqs.front().starts_here; }
  bool has_tail() const { return !seqs.empty() && !seqs.back().ends_here; }
  // Virtual cu_seqlens [num virtual + 1], int64.
  std::vector<int64_t> virtual_cu() const;
};

// cu_seqlens: global [N + 1] host int32 / int64, or undefined (one sequence of every row);
// rank_offsets: [world + 1] host int32 / int64, non-decreasing from 0. Validated here.
CpShard make_shard(const TensorView& cu_seqlens, const TensorView& rank_offsets, int rank, int world);

}  // namespace linattn::parallel
