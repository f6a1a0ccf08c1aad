// Public varlen chunk metadata and graph capacity (GRAPH_CONTRACT.md sections 1, 2, 4).
// Capacity {T_max, N_max, BT} fixes a graph bucket; NT_max = ceil(T_max / BT) + N_max - 1 bounds
// the chunk count of every layout of <= T_max tokens in <= N_max sequences.
// Two metadata builders:
//   - eager (host, exact size NT): chunk_indices [NT, 2], chunk_offsets [N + 1], from a validated
//     host cu_seqlens; forbidden during a capture (it reads data on the host);
//   - static (fixed capacity, capturable): reads cu_seqlens [N_max + 1] where it lives and writes
//     chunk_indices [NT_max, 2] (rows past NT are sentinels (-1, 0)) and chunk_offsets [N_max + 1]
//     in place, on the device of the tensors, on ctx.stream; no host read of the data.
#pragma once
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string>

#include "linattn/ops.h"
#include "linattn/tensor.h"

namespace linattn {

inline constexpr int kSentinelSeq = -1;  // chunk_indices sentinel row: (kSentinelSeq, 0)

struct Capacity {
  int64_t T_max = 0;  // token capacity (rows of the packed [1, T, ...] tensors)
  int64_t N_max = 0;  // sequence capacity (cu_seqlens has N_max + 1 entries)
  int BT = 64;        // chunk size: 16, 32 or 64

  // ceil(T_max / BT) + N_max - 1 (assumes a valid capacity).
  int64_t NT_max() const;
  // Throws InvalidArgument (BT not in {16, 32, 64}: Unsupported) naming the field; also rejects
  // capacities whose NT_max or T_max do not fit int32 (the metadata tables are int32).
  void validate() const;
  // Whether a layout of T tokens in N sequences fits.
  bool fits(int64_t T, int64_t N) const { return T <= T_max && N <= N_max; }
  std::string str() const;  // "Capacity{T_max=4096, N_max=8, BT=64, NT_max=71}"
  bool operator==(const Capacity&) const = default;
};
std::ostream& operator<<(std::ostream& os, const Capacity& c);

// Chunks of a layout: sum_n ceil(len_n / BT). Host-readable, validated cu_seqlens [N + 1].
int64_t count_chunks(const TensorView& cu_seqlens, int BT);

// Exact-size host metadata of the eager path.
struct ChunkMetaTables {
  Tensor chunk_indices;  // [NT, 2] int32: (sequence, chunk within sequence), sequence order
  Tensor chunk_offsets;  // [N + 1] int32: exclusive prefix sum of per-sequence chunk counts
  int64_t num_chunks = 0;
};
// cu_seqlens: host [N + 1] int32/int64, checked: starts at 0, non-decreasing; when total_tokens
// >= 0 it must end at or below total_tokens (exactly at it when exact_end). BT in {16, 32, 64}.
// Raises kCaptureViolation [stale-or-dynamic-metadata] while a CPU capture is active.
ChunkMetaTables prepare_chunk_meta_eager(const TensorView& cu_seqlens, int BT,
                                         int64_t total_tokens = -1, bool exact_end = false);

// Static (fixed-capacity) metadata, in place. Shapes are checked against `cap`:
// cu_seqlens [N_max + 1] int32/int64, chunk_indices [NT_max, 2] int32, chunk_offsets [N_max + 1]
// int32, all contiguous on one device. The data of cu_seqlens is never validated on the host:
// a bad layout still writes only inside the two tables (see src/cpu/chunk_meta_cpu.h for what it
// produces). Runs now, or is recorded when a capture is active (it re-reads cu_seqlens at
// every replay). CPU tensors: CPU backend; CUDA tensors: the CUDA backend on ctx.stream.
void prepare_chunk_meta(const Capacity& cap, const TensorView& cu_seqlens,
                        const TensorView& chunk_indices, const TensorView& chunk_offsets,
                        const ExecContext& ctx = {});

// Workspaces: every sub-buffer starts at a multiple of kWorkspaceAlignment bytes from the
// workspace base, and the base itself must be aligned to it.
inline constexpr size_t kWorkspaceAlignment = 256;
// Bytes of the two static metadata tables when an op carves them from its workspace (both
// aligned): the part of an op's workspace_bytes(desc) that the metadata needs.
size_t chunk_meta_workspace_bytes(const Capacity& cap);

}  // namespace linattn
