// Validation of graph-mode (use_graph = true) arguments, GRAPH_CONTRACT.md sections 5 and 7.
// Only shapes, dtypes, devices, layouts and options are checked: the data of cu_seqlens is never
// read on the host in graph mode. Every error names the argument, the expected and the actual
// value, and carries one failure category:
//   unsupported-op             chunk size not in {16, 32, 64}                     (Unsupported)
//   stale-or-dynamic-metadata  cu_seqlens absent / rank / dtype, max_num_seqs != cu_seqlens.size-1,
//                              capacity (T_max, N_max) out of range               (InvalidArgument)
//   sentinel-offset-or-padding chunk_indices not [NT_max, 2] int32, chunk_offsets not
//                              [N_max + 1] int32, a required table absent         (InvalidArgument)
//   address-or-lifetime        wrong device, not contiguous, null data, tables overlapping each
//                              other or cu_seqlens                                (InvalidArgument)
// Malformed TensorViews (rank outside [0, 5], negative or huge dims, garbage strides, unknown
// dtype values) are reported the same way and never crash.
#pragma once
#include <cstdint>

#include "linattn/error.h"
#include "linattn/meta.h"
#include "linattn/tensor.h"

namespace linattn::meta {

struct GraphMetaArgs {
  TensorView cu_seqlens;     // [max_num_seqs + 1] int32 / int64, required
  TensorView chunk_indices;  // [NT_max, 2] int32, optional unless require_tables
  TensorView chunk_offsets;  // [N_max + 1] int32, optional unless require_tables
  int64_t max_num_seqs = 0;  // N_max, from the options
  int64_t T_max = 0;         // token capacity: T of the static [1, T, ...] inputs
  int BT = 64;
  Device device{};           // device of the op's other tensors
  bool require_tables = false;
};

// Validates and returns the capacity {T_max, max_num_seqs, BT}.
Capacity check_graph_meta_args(const GraphMetaArgs& a);

// Pieces, for ops that validate their own tensors (same messages and categories).
// A present tensor's rank is in [1, 5] and its dims in [0, 2^40]; absent = rank 0.
void check_tensor_sane(const TensorView& t, const char* arg, FailureCategory category);
void check_static_buffer(const TensorView& t, const char* arg, Device device);  // device,
                                                                                 // contiguous, data
}  // namespace linattn::meta
