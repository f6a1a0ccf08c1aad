// GraphBuckets: bucket choice, lazy / up-front capture, replay with copies in and out, eager
// fallback and statistics (include/linattn/graph.h). Buckets are sorted smallest first
// (NT_max, then T_max, then N_max); a layout goes to the first one that fits, and to the eager
// function when it fits none or fills less than min_utilization of that bucket's chunks.
#include <algorithm>
#include <optional>
#include <sstream>

#include "core/capture.h"
#include "core/check.h"
#include "linattn/graph.h"
#include "runtime/bucket_io.h"

namespace linattn {

namespace {
constexpr ErrorCode kInv = ErrorCode::kInvalidArgument;
}

const char* bucket_route_name(BucketRoute r) {
  switch (r) {
    case BucketRoute::kGraph: return "graph";
    case BucketRoute::kEagerOverCapacity: return "eager-over-capacity";
    case BucketRoute::kEagerLowUtilization: return "eager-low-utilization";
  }
  return "?";
}

std::string GraphBucketsStats::str() const {
  std::ostringstream os;
  os << "calls=" << calls << " replays=" << replays << " hits=" << hits << " misses=" << misses
     << " captures=" << captures << " fallbacks_over_capacity=" << fallbacks_over_capacity
     << " fallbacks_low_utilization=" << fallbacks_low_utilization << " real_tokens=" << real_tokens
     << " padding_tokens=" << padding_tokens << " real_chunks=" << real_chunks
     << " padding_chunks=" << padding_chunks << " eager_tokens=" << eager_tokens;
  return os.str();
}

const TensorView& BucketStatic::buffer(std::string_view name) const {
  for (const auto& [n, v] : buffers_) {
    if (n == name) return v;
  }
  LINATTN_CHECK_CODE(false, kInv, FailureCategory::kAddressOrLifetime, "BucketStatic::buffer: expected the name of a ",
                     "buffer spec, got '", name, "'");
  return cu_;  // not reached
}

struct GraphBuckets::Impl {
  struct Bucket {
    Capacity cap;
    std::optional<runtime::BucketBuffers> buffers;
    std::optional<Graph> graph;
    GraphBucketsStats stats;
  };
  std::vector<Bucket> buckets;
  BucketDescribeFn describe;
  BucketStepFn step;
  BucketEagerFn eager;
  GraphBucketsOptions opt;
  ExecContext exec;
  GraphBucketsStats stats;

  Bucket& at(int i) {
    LINATTN_CHECK(i >= 0 && i < static_cast<int>(buckets.size()), "bucket: expected an index in [0, ",
                  buckets.size(), "), got ", i);
    return buckets[static_cast<size_t>(i)];
  }

  runtime::BucketBuffers& buffers(Bucket& b) {
    if (!b.buffers) {
      runtime::BucketBuffers bb;
      runtime::allocate_bucket(bb, b.cap, describe(b.cap), opt.cu_dtype, exec, opt.device);
      b.buffers = std::move(bb);
    }
    return *b.buffers;
  }

  // Warm-up (eager runs of the step on the static buffers), then capture.
  void capture(Bucket& b) {
    runtime::BucketBuffers& bb = buffers(b);
    for (int i = 0; i < opt.warmup_runs; ++i) step(bb.view);
    Graph g(opt.device, opt.stream);
    g.capture([&] { step(bb.view); });
    b.graph = std::move(g);
    ++b.stats.captures;
    ++stats.captures;
  }
};

double default_min_utilization(const Device& device) { return device.type == DeviceType::kCUDA ? 0.0 : 0.5; }

GraphBuckets::GraphBuckets(std::vector<BucketShape> shapes, BucketDescribeFn describe,
                           BucketStepFn step, BucketEagerFn eager, GraphBucketsOptions opt)
    : impl_(std::make_unique<Impl>()) {
  constexpr FailureCategory kMeta = FailureCategory::kStaleOrDynamicMetadata;
  LINATTN_CHECK_CODE(!shapes.empty(), kInv, kMeta, "buckets: expected at least one bucket, got none");
  LINATTN_CHECK(describe && step, "GraphBuckets: expected describe and step functions, got ",
                describe ? "" : "no describe ", step ? "" : "no step");
  if (opt.min_utilization < 0.0) opt.min_utilization = default_min_utilization(opt.device);
  LINATTN_CHECK(opt.min_utilization >= 0.0 && opt.min_utilization <= 1.0,
                "min_utilization: expected in [0, 1] (or < 0: the device's default), got ", opt.min_utilization);
  LINATTN_CHECK(opt.warmup_runs >= 0, "warmup_runs: expected >= 0, got ", opt.warmup_runs);
  LINATTN_CHECK(opt.cu_dtype == DType::kI32 || opt.cu_dtype == DType::kI64,
                "cu_dtype: expected int32 or int64, got ", dtype_name(opt.cu_dtype));
  Impl& m = *impl_;
  for (size_t i = 0; i < shapes.size(); ++i) {
    Impl::Bucket b;
    b.cap = Capacity{shapes[i].T_max, shapes[i].N_max, opt.BT};
    try {
      b.cap.validate();
    } catch (const Error& e) {
      LINATTN_CHECK_CODE(false, e.code(), kMeta, "buckets[", i, "]: ", e.message());
    }
    for (const Impl::Bucket& o : m.buckets) {
      LINATTN_CHECK_CODE(!(o.cap == b.cap), kInv, kMeta, "buckets[", i, "]: expected distinct buckets, got ",
                         b.cap, " twice");
    }
    m.buckets.push_back(std::move(b));
  }
  std::sort(m.buckets.begin(), m.buckets.end(), [](const Impl::Bucket& a, const Impl::Bucket& b) {
    const Capacity &x = a.cap, &y = b.cap;
    if (x.NT_max() != y.NT_max()) return x.NT_max() < y.NT_max();
    if (x.T_max != y.T_max) return x.T_max < y.T_max;
    return x.N_max < y.N_max;
  });
  m.describe = std::move(describe);
  m.step = std::move(step);
  m.eager = std::move(eager);
  m.opt = opt;
  m.exec.stream = opt.stream;
  if (opt.capture_up_front) capture_all();
}

GraphBuckets::~GraphBuckets() = default;

BucketDecision GraphBuckets::choose(const TensorView& cu_seqlens) const {
  const Impl& m = *impl_;
  BucketDecision d;
  d.NT = count_chunks(cu_seqlens, m.opt.BT);  // validates: host, starts at 0, non-decreasing
  d.N = cu_seqlens.shape[0] - 1;
  d.T = cu_seqlens.dtype == DType::kI64 ? cu_seqlens.ptr<const int64_t>()[d.N]
                                        : cu_seqlens.ptr<const int32_t>()[d.N];
  for (size_t i = 0; i < m.buckets.size(); ++i) {
    const Capacity& cap = m.buckets[i].cap;
    if (!cap.fits(d.T, d.N)) continue;
    d.bucket = static_cast<int>(i);
    d.utilization = static_cast<double>(d.NT) / static_cast<double>(cap.NT_max());
    const bool low = m.eager && d.utilization < m.opt.min_utilization;
    d.route = low ? BucketRoute::kEagerLowUtilization : BucketRoute::kGraph;
    return d;
  }
  d.route = BucketRoute::kEagerOverCapacity;
  return d;
}

BucketDecision GraphBuckets::run(const TensorView& cu_seqlens, const NamedTensors& inputs,
                                 const NamedTensors& outputs) {
  forbid_during_capture("GraphBuckets::run (copies, replays and may capture)",
                        FailureCategory::kUnsupportedOp);
  Impl& m = *impl_;
  const BucketDecision d = choose(cu_seqlens);
  if (d.route == BucketRoute::kEagerOverCapacity) {
    LINATTN_CHECK_CODE(static_cast<bool>(m.eager), kInv, FailureCategory::kEagerBackend,
                       "cu_seqlens: expected a layout within the largest bucket ", m.buckets.back().cap,
                       ", got T = ", d.T, ", N = ", d.N, " (no eager function to fall back to)");
  }
  if (d.route != BucketRoute::kGraph) {
    m.eager(cu_seqlens, inputs, outputs);
    const bool over = d.route == BucketRoute::kEagerOverCapacity;
    for (GraphBucketsStats* s : {&m.stats, over ? nullptr : &m.at(d.bucket).stats}) {
      if (!s) continue;
      ++s->calls;
      ++(over ? s->fallbacks_over_capacity : s->fallbacks_low_utilization);
      s->eager_tokens += d.T;
    }
    return d;
  }
  Impl::Bucket& b = m.at(d.bucket);
  runtime::BucketBuffers& bb = m.buffers(b);
  runtime::check_step_tensors(bb, inputs, outputs, d.T, d.N, m.opt.device);
  const bool miss = !b.graph;
  if (miss) m.capture(b);
  runtime::copy_cu_in(bb, cu_seqlens, m.exec);
  runtime::copy_inputs(bb, inputs, d.T, d.N, m.exec);
  b.graph->replay();
  runtime::copy_outputs(bb, outputs, d.T, d.N, m.exec);
  for (GraphBucketsStats* s : {&m.stats, &b.stats}) {
    ++s->calls;
    ++s->replays;
    ++(miss ? s->misses : s->hits);
    s->real_tokens += d.T;
    s->padding_tokens += b.cap.T_max - d.T;
    s->real_chunks += d.NT;
    s->padding_chunks += b.cap.NT_max() - d.NT;
  }
  return d;
}

void GraphBuckets::capture_all() {
  forbid_during_capture("GraphBuckets::capture_all", FailureCategory::kUnsupportedOp);
  for (Impl::Bucket& b : impl_->buckets) {
    if (!b.graph) impl_->capture(b);
  }
}

int GraphBuckets::num_buckets() const { return static_cast<int>(impl_->buckets.size()); }
Capacity GraphBuckets::capacity(int i) const { return impl_->at(i).cap; }
bool GraphBuckets::captured(int i) const { return impl_->at(i).graph.has_value(); }
const BucketStatic& GraphBuckets::bucket(int i) { return impl_->buffers(impl_->at(i)).view; }
const GraphBucketsStats& GraphBuckets::stats() const { return impl_->stats; }
const GraphBucketsStats& GraphBuckets::bucket_stats(int i) const { return impl_->at(i).stats; }

}  // namespace linattn
