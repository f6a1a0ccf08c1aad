// Graph capture and replay (GRAPH_CONTRACT.md sections 4-6), backend-neutral.
//   Graph:        capture a sequence of op calls, instantiate, replay many times, destroy.
//                 CPU: capture records the ops' bound, validated work (core/capture.h) into a
//                 program on the capturing thread; replay runs it in order with no validation,
//                 planning or allocation. CUDA (later, same API): stream capture on `stream`.
//   GraphBuckets: a caller-owned helper over several fixed capacities (buckets): picks the
//                 smallest bucket that fits, owns its static buffers, warms up, captures lazily
//                 or up front, copies inputs and cu_seqlens in, replays, copies outputs out;
//                 routes over-capacity and low-utilization inputs to an eager function and
//                 says so in its statistics. Not thread-safe; one instance per stream.
//
// Rules an op must follow to be capturable (every op with use_graph = true, every helper op):
//  1. Validate, plan and bind at call time, then hand the work to run_or_record(name, closure)
//     (core/capture.h). The closure captures POD params BY VALUE (pointers, sizes, options):
//     never references to arguments, TensorViews on the caller's stack, or `this`.
//  2. The closure reads every piece of data when it runs (at each replay): cu_seqlens, gates,
//     states. Nothing derived from data (NT, lengths, max length, chunk tables) may be computed
//     at call time; chunk tables are rebuilt inside the closure (or by prepare_chunk_meta
//     recorded before it). Never cache metadata by pointer or tensor identity.
//  3. Every size, grid and loop bound comes from the Capacity (T_max, N_max, BT, NT_max), never
//     from the data. Sentinel rows (n < 0) exit before touching anything.
//  4. No allocation in the call or the closure: scratch comes from the caller's workspace,
//     carved by the op's one count-then-carve layout function (src/meta/workspace.h).
//  5. Forbidden work raises instead of being recorded, before doing anything:
//     the eager (use_graph = false) path      -> forbid_eager_during_capture   (eager-backend)
//     host-built metadata / host data reads   -> forbid_host_metadata_during_capture
//                                                (stale-or-dynamic-metadata)
//     an allocation                           -> forbid_alloc_during_capture   (address-or-lifetime)
//     a device the active capture cannot record (CUDA tensors under a CPU capture): raise
//     kCaptureViolation [address-or-lifetime]. The helpers check the CPU capture of this
//     thread; CUDA ops also check their stream (cudaStreamIsCapturing) with the same categories.
//  6. A closure does not throw (all checks happen before recording), is re-runnable and
//     deterministic, and fully rewrites or clears every graph-only buffer it writes partially.
//  7. A recorded call does nothing else at capture time: CUDA stream capture does not execute
//     kernels either, so results must not depend on a run during capture.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "linattn/meta.h"
#include "linattn/ops.h"
#include "linattn/tensor.h"

namespace linattn {

namespace runtime { class GraphImpl; }

class Graph {
 public:
  enum class State : uint8_t { kEmpty, kCapturing, kReady };

  // A graph of the backend of `device`; on CUDA, capture and replay use `stream`.
  explicit Graph(Device device = {}, void* stream = nullptr);
  ~Graph();
  Graph(Graph&&) noexcept;
  Graph& operator=(Graph&&) noexcept;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // Starts capturing (CPU: the op calls of this thread). Needs state kEmpty and no other capture
  // active on this thread.
  void begin_capture();
  // Ends the capture (on the thread that began it) and instantiates: state kReady.
  void end_capture();
  // Ends the capture and discards it: state kEmpty. No-op unless capturing.
  void abort_capture();
  // begin_capture, body(), end_capture; on an exception, abort_capture and rethrow.
  void capture(const std::function<void()>& body);
  // Runs the captured program (CPU: in order, on the calling thread; CUDA: on the stream).
  // Not allowed while a capture is active on this thread.
  void replay();
  // Destroys the captured program: state kEmpty (capture again to reuse).
  void reset();

  State state() const;
  Device device() const { return device_; }
  size_t num_nodes() const;               // recorded ops (CPU) / graph nodes (CUDA)
  std::vector<std::string> node_names() const;

 private:
  Device device_;
  std::unique_ptr<runtime::GraphImpl> impl_;
  bool capturing_ = false;
  bool ready_ = false;
};

// ------------------------------------------------------------------ GraphBuckets
struct BucketShape {
  int64_t T_max = 0;
  int64_t N_max = 0;
};

// Which static buffers the step needs, described per bucket (the helper allocates and owns them).
enum class BufferRole : uint8_t {
  kInput,    // copied in from the caller's tensor of the same name before every replay
  kOutput,   // copied out to the caller's tensor after every replay
  kInOut,    // both (e.g. a recurrent state updated in place)
  kScratch,  // neither (workspace, intermediates); zeroed once at allocation
};
enum class BufferScale : uint8_t {
  kTokens,     // shape[scaled_dim] == T_max; the caller's tensor has T there (= cu_seqlens[N])
  kSequences,  // shape[scaled_dim] == N_max; the caller's tensor has N there
  kFixed,      // same shape for the caller (weights, options tensors)
};
struct BucketBufferSpec {
  std::string name;             // unique, not "cu_seqlens"
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;   // the static shape for this bucket's capacity
  BufferRole role = BufferRole::kInput;
  BufferScale scale = BufferScale::kTokens;
  int scaled_dim = 0;           // only size-1 dims before it (so a prefix of rows is contiguous)
};
using BucketDescribeFn = std::function<std::vector<BucketBufferSpec>(const Capacity&)>;

// What the step function sees: one bucket's static buffers.
class BucketStatic {
 public:
  BucketStatic() = default;
  BucketStatic(Capacity cap, TensorView cu, std::vector<std::pair<std::string, TensorView>> buffers,
               ExecContext exec)
      : cap_(cap), cu_(cu), buffers_(std::move(buffers)), exec_(exec) {}
  const Capacity& capacity() const { return cap_; }
  const TensorView& cu_seqlens() const { return cu_; }  // [N_max + 1], options' cu_dtype
  const TensorView& buffer(std::string_view name) const;  // throws naming an unknown buffer
  const ExecContext& exec() const { return exec_; }        // the helper's stream

 private:
  Capacity cap_;
  TensorView cu_;
  std::vector<std::pair<std::string, TensorView>> buffers_;
  ExecContext exec_;
};
// One step on static buffers: ops with use_graph = true, max_num_seqs = capacity().N_max.
using BucketStepFn = std::function<void(const BucketStatic&)>;

struct NamedTensor {
  std::string name;
  TensorView view;
};
using NamedTensors = std::vector<NamedTensor>;
// The eager path, on the caller's exact-size tensors.
using BucketEagerFn = std::function<void(const TensorView& cu_seqlens, const NamedTensors& inputs,
                                         const NamedTensors& outputs)>;

struct GraphBucketsOptions {
  int BT = 64;                   // chunk size of every bucket's Capacity
  // NT / NT_max of the chosen bucket below this -> eager; < 0: default_min_utilization(device).
  double min_utilization = -1.0;
  bool capture_up_front = false; // capture every bucket in the constructor
  int warmup_runs = 1;           // eager runs of the step on a bucket's buffers before capture
  DType cu_dtype = DType::kI32;  // dtype of the static cu_seqlens (int32 or int64)
  Device device{};
  void* stream = nullptr;
};

// The measured break-even utilization per device type, used when min_utilization < 0.
// CPU 0.5 (`linattn bench --sweep utilization`, bench/results/cpu-sweeps-20261130.jsonl: a layer's
// graph costs ~T_max / T, its GEMMs run over the padding, and beats eager only in full buckets).
// CUDA 0: on the H200 the bucket's fixed-capacity call costs less than an eager call even at 25%
// utilization (`linattn layer-demo --backend cuda`, bench/results/h200-layer-demo-20261130-34910b0.txt:
// eager-live p50 2.9 / 4.0 ms vs eager-fixed 0.44 / 0.70 ms for GDN / KDA, <= 2048 tokens), so a
// batch that fits a bucket always replays.
double default_min_utilization(const Device& device);

enum class BucketRoute : uint8_t { kGraph, kEagerOverCapacity, kEagerLowUtilization };
const char* bucket_route_name(BucketRoute r);

struct BucketDecision {
  BucketRoute route = BucketRoute::kGraph;
  int bucket = -1;           // index (buckets sorted smallest first); -1 when over capacity
  int64_t T = 0, N = 0, NT = 0;
  double utilization = 0.0;  // NT / NT_max of the bucket (0 when over capacity)
};

struct GraphBucketsStats {
  int64_t calls = 0;
  int64_t replays = 0;        // calls served by a graph
  int64_t hits = 0;           // ... whose bucket was already captured
  int64_t misses = 0;         // ... that had to capture first (lazy)
  int64_t captures = 0;       // graphs captured (lazy + up front)
  int64_t fallbacks_over_capacity = 0;
  int64_t fallbacks_low_utilization = 0;
  int64_t real_tokens = 0, padding_tokens = 0;  // over replays: T and T_max - T
  int64_t real_chunks = 0, padding_chunks = 0;  // over replays: NT and NT_max - NT
  int64_t eager_tokens = 0;                     // over fallbacks
  int64_t fallbacks() const { return fallbacks_over_capacity + fallbacks_low_utilization; }
  std::string str() const;
};

class GraphBuckets {
 public:
  // `eager` may be empty: then inputs over capacity raise [eager-backend] and low-utilization
  // inputs use the graph anyway.
  GraphBuckets(std::vector<BucketShape> buckets, BucketDescribeFn describe, BucketStepFn step,
               BucketEagerFn eager, GraphBucketsOptions opt = {});
  ~GraphBuckets();
  GraphBuckets(const GraphBuckets&) = delete;
  GraphBuckets& operator=(const GraphBuckets&) = delete;

  // The route of a layout (host cu_seqlens [N + 1], validated), without running anything.
  BucketDecision choose(const TensorView& cu_seqlens) const;
  // One step. inputs / outputs: the caller's exact-size tensors by the names of the specs with
  // role kInput / kInOut (inputs) and kOutput / kInOut (outputs); all are checked before any
  // copy. Padding rows of static inputs keep what earlier calls left there (ops must ignore
  // them). On the graph route: warm-up + capture on first use of the bucket, copy in, replay,
  // copy out (CUDA: asynchronous on the stream).
  BucketDecision run(const TensorView& cu_seqlens, const NamedTensors& inputs,
                     const NamedTensors& outputs);
  void capture_all();

  int num_buckets() const;
  Capacity capacity(int bucket) const;
  bool captured(int bucket) const;
  // A bucket's static buffers (allocated on first use), e.g. to seed or inspect them.
  const BucketStatic& bucket(int bucket);
  const GraphBucketsStats& stats() const;
  const GraphBucketsStats& bucket_stats(int bucket) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace linattn
