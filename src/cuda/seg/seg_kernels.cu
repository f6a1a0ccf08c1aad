// Device kernels of tier 3 (see seg_pass.h): the segment table (one thread per slot, fixed grid:
// no scan is needed because every sequence owns exactly s slots), the forward / reverse combines
// and the gather of per-sequence states; for the first-segment schedule (one sequence) the seed of
// slot 0's initial state with the two one-sided tables, and a combine started from slot 0's final state.
// Combine: one CTA of 256 threads per (column block of 8, value head, sequence) walks the
// sequence's slots in order (reverse for the gradient) with the 128 x 8 fp32 state block in
// shared memory; each thread computes 4 outputs of one key row (fp32 FMAs, fixed order). M (fp32,
// 128 x 128, rows padded to 132 floats: 16-byte cp.async rows, conflict-free float4 row reads) is
// double-buffered in shared memory: step i+1's M is in flight by cp.async while step i computes
// (M does not depend on the walk), so a step costs its FMAs, not an L2 round trip of 64 KB.
// The default since session 12 ("auto"): the same walk on tensor cores (seg_combine_tc.cu) with 8 state columns
// per CTA where that grid fits one wave of CTAs, else 16 (H200 A/B at ee5c88b: 2/8 1x32768 tc8 0.3085 vs ring2
// 0.311-0.312 ms, 4/16 tc 0.550 / 0.550 vs 0.560 / 0.559). "ring2" keeps this FFMA walk; "tc" / "tc8" force 16 / 8.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <string>

#include "core/env.h"
#include "core/util.h"

#include "cuda/common/device_info.h"
#include "cuda/common/launch.h"
#include "cuda/common/pdl.cuh"
#include "cuda/common/mma.cuh"
#include "cuda/gdn/gdn_common.cuh"
#include "cuda/seg/seg_combine_common.cuh"
#include "cuda/seg/seg_combine_tc.h"
#include "cuda/seg/seg_pass.h"

namespace linattn::cuda::seg {
namespace {

constexpr int kK = 128, kLdM = kK + 4, kCB = 8, kThreads = 256;

// kPdl (LINATTN_CUDA_PDL=1): launched with PDL (waits for the previous kernels, which may read the table or
// write cu_seqlens) and lets the prep / chunk tables launch at once (they wait for the table themselves).
template <bool kPdl = false>
__global__ void seg_table_kernel(GdnFwdParams p, int64_t min_segment, SegTable t) {
  pdl_wait<kPdl>();
  pdl_launch_dependents<kPdl>();
  const int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= t.num) return;
  const int64_t n = k / t.segments, i = k % t.segments;
  int64_t bos, eos;
  seq_bounds(p, n, bos, eos);
  const int64_t L = eos - bos, bt = p.BT;
  const int64_t even = (L + t.segments - 1) / t.segments;
  const int64_t floor_len = max(min_segment, int64_t(1));
  const int64_t len = max((even + bt - 1) / bt * bt, (floor_len + bt - 1) / bt * bt);
  const int64_t b = min(bos + i * len, eos);
  const int64_t e = i + 1 == t.segments ? eos : min(bos + (i + 1) * len, eos);
  int32_t f = 0;
  if (b == e) f |= kSegEmpty;
  if (i == 0) f |= kSegFirst;
  const bool last = (b < e && e == eos) || (L == 0 && i == 0);
  if (last) {
    f |= kSegLast;
    t.last[n] = static_cast<int32_t>(k);
  }
  t.flags[k] = f;
  t.cu[k] = static_cast<int32_t>(b);
  if (k + 1 == t.num) t.cu[t.num] = static_cast<int32_t>(eos);
}

__device__ __forceinline__ void store_as(void* out, ElemType t, int64_t i, float x) {
  switch (t) {
    case ElemType::kF16: static_cast<__half*>(out)[i] = __float2half_rn(x); break;
    case ElemType::kBF16: static_cast<__nv_bfloat16*>(out)[i] = __float2bfloat16_rn(x); break;
    default: static_cast<float*>(out)[i] = x;
  }
}

struct CombineSmem {
  float m[2][kK][kLdM];  // M of steps i (buffer i & 1) and i + 1
  float h[kK][kCB];
};

// Shared body of both combines. REV: walk slots in reverse, multiply by M^T, skip first slots.
// FIRST (forward only, the first-segment schedule): h starts from init_seg's slot n s (fp32
// K-major, slot 0's true final state), which is also slot 0's output; the walk starts at slot 1
// (its M the first prefetched) and each step's flags are loaded one step ahead.
template <bool REV, bool FIRST>
__global__ void __launch_bounds__(kThreads) seg_combine_kernel(GdnFwdParams p, SegTable t, const void* init,
                                                                ElemType init_type, const float* init_seg,
                                                                const float* M, const float* add, float* out) {
  static_assert(!(REV && FIRST), "the first-segment start is forward only");
  constexpr bool kAhead = FIRST;  // flags loaded one step ahead
  extern __shared__ __align__(16) unsigned char smem_raw[];
  CombineSmem& s = *reinterpret_cast<CombineSmem*>(smem_raw);
  const int tid = threadIdx.x, c0 = blockIdx.x * kCB, j = blockIdx.y;
  const int64_t n = blockIdx.z;
  const int V = p.V;
  const auto slot_of = [&](int it) { return n * t.segments + (REV ? t.segments - 1 - it : it); };
  for (int idx = tid; idx < kK * kCB; idx += kThreads) {
    const int row = idx / kCB, c = idx % kCB;
    s.h[row][c] = combine::initial_state<FIRST>(p, n, slot_of(0), j, row, c0 + c, init, init_type, init_seg, out);
  }
  __syncthreads();
  const int orow = tid / 2, oc = (tid % 2) * 4;  // this thread's 4 outputs
  const int32_t stop = REV ? kSegFirst : kSegLast;
  const int it0 = FIRST ? 1 : 0;
  // At most one step's M in flight: a thread waits for its copies of step it's M before issuing
  // step it + 1's (so two copies never target one address at once, even past a skipped slot),
  // and step it + 1's then lands during step it's FMAs. A slot's M is fetched even when the slot
  // is skipped (its buffer is allocated, the values unused): the prefetch never waits on the flags.
  if (it0 < t.segments) combine::prefetch_m<kLdM>(s.m[it0 & 1], M + (slot_of(it0) * p.HV + j) * kK * kK, tid);
  cp_async_commit();
  int32_t next_flags = kAhead && it0 < t.segments ? t.flags[slot_of(it0)] : 0;
  for (int it = it0; it < t.segments; ++it) {
    const int64_t slot = slot_of(it);
    const int64_t head = slot * p.HV + j;
    for (int idx = tid; idx < kK * kCB; idx += kThreads) {
      const int row = idx / kCB, c = idx % kCB;
      out[(head * kK + row) * V + c0 + c] = s.h[row][c];
    }
    cp_async_wait<0>();
    // Buffer (it + 1) & 1 was last read in step it - 1, before its closing barriers.
    if (it + 1 < t.segments)
      combine::prefetch_m<kLdM>(s.m[(it + 1) & 1], M + (slot_of(it + 1) * p.HV + j) * kK * kK, tid);
    cp_async_commit();
    int32_t flags;
    if constexpr (kAhead) {
      flags = next_flags;
      if (it + 1 < t.segments) next_flags = t.flags[slot_of(it + 1)];
    } else {
      flags = t.flags[slot];
    }
    if (flags & (kSegEmpty | stop)) continue;  // uniform over the CTA
    const float4 a = *reinterpret_cast<const float4*>(add + (head * kK + orow) * V + c0 + oc);
    __syncthreads();  // every thread's copies of this step's M are visible
    const float(*m)[kLdM] = s.m[it & 1];
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll 4
    for (int k = 0; k < kK; k += 4) {
      float w[4];
      if constexpr (REV) {
#pragma unroll
        for (int u = 0; u < 4; ++u) w[u] = m[k + u][orow];
      } else {
        const float4 w4 = *reinterpret_cast<const float4*>(&m[orow][k]);
        w[0] = w4.x, w[1] = w4.y, w[2] = w4.z, w[3] = w4.w;
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const float4 hv = *reinterpret_cast<const float4*>(&s.h[k + u][oc]);
        acc[0] = fmaf(w[u], hv.x, acc[0]);
        acc[1] = fmaf(w[u], hv.y, acc[1]);
        acc[2] = fmaf(w[u], hv.z, acc[2]);
        acc[3] = fmaf(w[u], hv.w, acc[3]);
      }
    }
    __syncthreads();  // every thread has read s.h and this step's M
    s.h[orow][oc] = acc[0] + a.x;
    s.h[orow][oc + 1] = acc[1] + a.y;
    s.h[orow][oc + 2] = acc[2] + a.z;
    s.h[orow][oc + 3] = acc[3] + a.w;
    __syncthreads();
  }
  cp_async_wait<0>();
}

// kPdl (LINATTN_CUDA_PDL=1): launched with PDL, waits for the forward over the segments first.
template <bool kPdl = false>
__global__ void seg_gather_kernel(GdnFwdParams p, SegTable t, const float* src, bool use_last, void* out,
                                  ElemType out_type) {
  pdl_wait<kPdl>();
  const int64_t KV = int64_t(p.K) * p.V, total = t.N * p.HV * KV;
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t head = idx / KV, e = idx % KV, n = head / p.HV;
    const int j = static_cast<int>(head % p.HV), row = static_cast<int>(e / p.V), col = static_cast<int>(e % p.V);
    const int64_t slot = use_last ? int64_t(t.last[n]) : n * t.segments;
    store_as(out, out_type, state_index(p, n, j, row, col), src[(slot * p.HV + j) * KV + e]);
  }
}

// First-segment schedule, one sequence (N == 1): the seed of slot 0's initial state and the two
// one-sided tables (seg_pass.h build_first_split); grid-stride over max(s + 1, HV K V) indices.
__global__ void seg_first_split_kernel(GdnFwdParams p, SegTable t, float* h0_seg, int32_t* cu_first,
                                       int32_t* cu_rest) {
  const int64_t KV = int64_t(p.K) * p.V, total = max(int64_t(p.HV) * KV, t.num + 1);
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    if (idx <= t.num) {
      cu_first[idx] = idx == 0 ? t.cu[0] : t.cu[1];     // slot 0, then empty slots at its end
      cu_rest[idx] = idx == 0 ? t.cu[1] : t.cu[idx];    // slot 0 empty at its end, then the others
    }
    if (idx < int64_t(p.HV) * KV) {
      const int j = static_cast<int>(idx / KV), row = static_cast<int>((idx % KV) / p.V),
                col = static_cast<int>(idx % p.V);
      h0_seg[idx] = p.h0 ? load_elem(p.h0, p.h0_type, state_index(p, 0, j, row, col)) : 0.f;
    }
  }
}

std::atomic<int64_t> g_tc_launches{0};

void check_shape(const GdnFwdParams& p, const SegTable& t) {
  LINATTN_CHECK(p.K == kK, "tier 3: K must be ", kK, ", got ", p.K);
  LINATTN_CHECK(p.V % kCB == 0, "tier 3: V must be a multiple of ", kCB, ", got ", p.V);
  LINATTN_CHECK(t.N == p.N && t.num == t.N * t.segments, "tier 3: table of ", t.N, " x ", t.segments,
                " slots for ", p.N, " sequences");
}

// One launch of the combine the switch picks (seg_pass.h seg_combine_mode).
template <bool REV, bool FIRST>
void launch_combine(const GdnFwdParams& p, const SegTable& t, const void* init, ElemType init_type,
                    const float* init_seg, const float* M, const float* add, float* out, void* stream) {
  const int mode = seg_combine_mode();
  if (mode != 0) {
    // auto: 8 columns per CTA while that grid (from the capacity: t.N) fits one wave, else 16 (half the CTAs)
    const int64_t grid8 = int64_t(p.V / 8) * p.HV * t.N;
    const int cb = mode == 1 ? 16 : mode == 2 ? 8 : (grid8 <= current_device_info().sm_count ? 8 : 16);
    g_tc_launches.fetch_add(1);
    launch_combine_tc(REV, FIRST, cb, p, t, init, init_type, init_seg, M, add, out, stream);
    return;
  }
  const dim3 grid(p.V / kCB, p.HV, static_cast<unsigned>(t.N));
  launch(seg_combine_kernel<REV, FIRST>, grid, dim3(kThreads), sizeof(CombineSmem), static_cast<cudaStream_t>(stream),
         p, t, init, init_type, init_seg, M, add, out);
}

}  // namespace

void build_seg_table(const GdnFwdParams& p, int64_t min_segment, const SegTable& t, void* stream) {
  LINATTN_CHECK(p.T_total < (int64_t(1) << 31), "tier 3: T_total = ", p.T_total, " needs int64 segment tables");
  LINATTN_CHECK(t.num == t.N * t.segments && t.segments >= 1, "tier 3: bad table ", t.N, " x ", t.segments);
  const int64_t blocks = (t.num + 255) / 256;
  const bool pdl = pdl_enabled();
  launch_pdl(pdl, pdl ? seg_table_kernel<true> : seg_table_kernel<>, dim3(static_cast<unsigned>(blocks)), dim3(256), 0,
             static_cast<cudaStream_t>(stream), p, min_segment, t);
}

// LINATTN_CUDA_SEG_COMBINE: "auto" or unset = the tensor-core combine at 8 or 16 columns per CTA (the default),
// "ring2" = the FFMA combine, "tc" / "tc8" = the tensor-core one at 16 / 8 columns per CTA (seg_combine_tc.cu);
// anything else (also the removed ring3 / blk / blk3) is an error.
int seg_combine_mode() {
  constexpr int kMode[] = {3, 0, 1, 2};  // auto, ring2, tc, tc8
  return kMode[env_choice("LINATTN_CUDA_SEG_COMBINE", {"auto", "ring2", "tc", "tc8"}, 0,
                          "ring3, blk and blk3 were removed")];
}

int64_t seg_combine_tc_launches() { return g_tc_launches.load(); }

void combine_forward(const GdnFwdParams& p, const SegTable& t, const float* M, const float* S_loc, float* h0_seg,
                     void* stream) {
  check_shape(p, t);
  launch_combine<false, false>(p, t, p.h0, p.h0_type, nullptr, M, S_loc, h0_seg, stream);
}

void combine_reverse(const GdnFwdParams& p, const void* dht, ElemType dht_type, const SegTable& t, const float* M,
                     const float* dS_loc, float* dht_seg, void* stream) {
  check_shape(p, t);
  launch_combine<true, false>(p, t, dht, dht_type, nullptr, M, dS_loc, dht_seg, stream);
}

void build_first_split(const GdnFwdParams& p, const SegTable& t, float* h0_seg, int32_t* cu_first, int32_t* cu_rest,
                       void* stream) {
  check_shape(p, t);
  LINATTN_CHECK(t.N == 1 && t.segments >= 2, "tier 3 first-segment tables: one sequence and >= 2 slots, got ", t.N,
                " x ", t.segments);
  const int64_t total = std::max<int64_t>(int64_t(p.HV) * p.K * p.V, t.num + 1);
  const int64_t blocks = std::min<int64_t>((total + 255) / 256, 64);  // small: it runs beside the prep
  launch(seg_first_split_kernel, dim3(static_cast<unsigned>(blocks)), dim3(256), 0, static_cast<cudaStream_t>(stream),
         p, t, h0_seg, cu_first, cu_rest);
}

void combine_forward_from_first(const GdnFwdParams& p, const SegTable& t, const float* M, const float* S_loc,
                                const float* ht_seg, float* h0_seg, void* stream) {
  check_shape(p, t);
  LINATTN_CHECK(ht_seg != nullptr, "tier 3 first-segment combine: ht_seg is required");
  launch_combine<false, true>(p, t, nullptr, p.h0_type, ht_seg, M, S_loc, h0_seg, stream);
}

void gather_states(const GdnFwdParams& p, const SegTable& t, const float* src, bool use_last, void* out,
                   ElemType out_type, void* stream) {
  const int64_t total = t.N * p.HV * int64_t(p.K) * p.V;
  const int64_t blocks = std::min<int64_t>((total + 255) / 256, 4096);
  const dim3 grid(static_cast<unsigned>(std::max<int64_t>(blocks, 1)));
  if (pdl_enabled())
    launch_pdl(true, seg_gather_kernel<true>, grid, dim3(256), 0, static_cast<cudaStream_t>(stream), p, t, src, use_last,
               out, out_type);
  else
    launch(seg_gather_kernel<>, grid, dim3(256), 0, static_cast<cudaStream_t>(stream), p, t, src, use_last, out, out_type);
}

}  // namespace linattn::cuda::seg
