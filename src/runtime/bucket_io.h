// GraphBuckets internals: one bucket's static buffers (allocated from the caller's specs),
// checks of the caller's exact-size tensors against the specs, and the prefix copies in and out.
// A token- or sequence-scaled buffer has only size-1 dims before its scaled dim, so its first
// m rows are one contiguous prefix; copies are copy_tensor calls (device-neutral, on the stream).
// NOTE: cu_stage is reused by the next call; a CUDA copy from pageable host memory returns only
// once the source has been read, so reuse is safe (keep it pageable, or sync if made pinned).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "linattn/dense.h"
#include "linattn/graph.h"

namespace linattn::runtime {

struct BucketBuffers {
  Capacity cap;
  std::vector<BucketBufferSpec> specs;
  std::vector<Buffer> storage;       // one per spec
  Buffer cu;                         // [N_max + 1] static cu_seqlens
  std::vector<std::byte> cu_stage;   // host staging of the next cu_seqlens
  BucketStatic view;
};

// Validates the specs (names, shapes, scaled dims) and allocates + zeroes every buffer.
void allocate_bucket(BucketBuffers& b, const Capacity& cap, std::vector<BucketBufferSpec> specs,
                     DType cu_dtype, const ExecContext& exec, Device device);

// Checks the caller's tensors for a layout of T tokens in N sequences against the specs:
// every kInput / kInOut spec has one input of its name (kOutput / kInOut: one output), no
// unknown or repeated names, dtype, rank, dims (scaled dim = T or N), contiguous, data, device
// (the bucket's or the CPU). InvalidArgument [address-or-lifetime] naming the tensor.
void check_step_tensors(const BucketBuffers& b, const NamedTensors& inputs,
                        const NamedTensors& outputs, int64_t T, int64_t N, Device device);

// cu_seqlens [N + 1] (host, validated) -> static [N_max + 1], the tail repeating cu[N].
void copy_cu_in(BucketBuffers& b, const TensorView& cu_seqlens, const ExecContext& exec);
void copy_inputs(const BucketBuffers& b, const NamedTensors& inputs, int64_t T, int64_t N,
                 const ExecContext& exec);
void copy_outputs(const BucketBuffers& b, const NamedTensors& outputs, int64_t T, int64_t N,
                  const ExecContext& exec);

}  // namespace linattn::runtime
