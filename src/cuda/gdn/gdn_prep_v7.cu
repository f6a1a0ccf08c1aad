// GDN prep v7 / v8 (v8 the default since session 13, LINATTN_CUDA_GDN_PREP=v7 the previous; gdn_prep_v7.h); the
// kernel body, kernels and launchers in gdn_prep_v7_body.cuh (shared with prep v9, gdn_prep_v9.cu). Grid, front half
// (q / k copies, gate scans, row scales, tma3 records, K K^T and Q K^T: prep_front, gdn_prep_parts.cuh) as v6; then per
// value head j one phase of three warp-uniform roles (BT 64: warps 0-1; 2, 3, 6; 4, 5, 7):
//   diagonal items (row i, its diagonal 16-column segment): head j-1's Ab, then head j's L and P with one decay
//     2^(gam_i - gam_c) per element, then (warp barrier: the block's rows are the warp's own) the 16x16 diagonal
//     inverse of head j's L (solve_diag_blocks);
//   off-diagonal items (i, segment b < i / 16, row-major): head j's L and P (no masks);
//   the same off-diagonal items for head j-1's Ab, and two upper 8-column chunks each: zeros of Ab / Ai (head j-1)
//     and P (head j), consecutive lanes on consecutive chunks of a row (coalesced);
// CTA barrier, the merges by column chains (one warp per column block), CTA barrier: 2 per value head (v6 3).
// v6 formed every decay twice (P of all heads first, from Q K^T in the union, then L per head) over every
// segment with per-element masks: ~half of its 41k warp instructions per CTA (ncu 082dba2). Here L, X and Q K^T
// are the packed lower 16x16 blocks (X's and P's upper blocks are exact zeros, never stored in shared memory), so
// Q K^T stays resident through the value heads at v6's 4 CTAs per SM (~52 KB at G 4).
// Every value is v6's expression in v6's order: bitwise v6's Ab, Ai, gam, rq, rk and records; P too except the
// sign of its upper-triangle zeros (+0 here; v6 stored scale 0 qk_ij).
// Split (opt-in LINATTN_CUDA_GDN_PREP_SPLIT, gdn_prep_v7.h, perf-notes "Prep split"): the SPLIT instances, grid
// (chunk rows, H, S), G / S value heads per CTA (front half recomputed): the unsplit bits.
#include "cuda/gdn/gdn_prep_v7.h"

#include <atomic>
#include <functional>

#include "core/env.h"
#include "core/util.h"
#include "cuda/gdn/gdn_prep_v7_body.cuh"

namespace linattn::cuda {
namespace {

std::atomic<int64_t> g_v7_launches{0}, g_v8_launches{0}, g_v9_launches{0}, g_split_launches{0};

}  // namespace

// v8 unless LINATTN_CUDA_GDN_PREP names another prep ("v7", "v6", "v5", "v2"): the default since the H200 A/B at
// ebf1299 (bitwise v7; 16/64 1x32768 1.248 / 1.258 -> 1.214 / 1.209 ms graph, 4096x8 1.306 -> 1.253 / 1.265, 16/32
// 1x32768 1.047 -> 1.014); v7 the default since 1ec4943 (16/64 1x32768 1.309 / 1.304 -> 1.292 / 1.295 ms graph).
// "v9" (opt-in, perf-notes "Prep v9"): v8's values with head j + 1's diagonal items and solves in head j's merges.
std::string gdn_prep_switch() {
  std::string v = env_or("LINATTN_CUDA_GDN_PREP", "");
  choice_index("LINATTN_CUDA_GDN_PREP", v, {"v8", "v7", "v6", "v5", "v2", "v9"}, 0);
  return v;
}
bool gdn_prep_v7_env() {  // v8 and v9 run through launch_gdn_prep_v7 too
  const std::string v = gdn_prep_switch();
  return v.empty() || v == "v7" || v == "v8" || v == "v9";
}
bool gdn_prep_v8_env() {  // the default since session 13 (bitwise v7; H200 A/B at ebf1299: 16/64 1x32768 -3.4%)
  const std::string v = gdn_prep_switch();
  return v.empty() || v == "v8";
}
int64_t gdn_prep_v7_launches() { return g_v7_launches.load(); }
int64_t gdn_prep_v8_launches() { return g_v8_launches.load(); }
bool gdn_prep_v9_env() { return gdn_prep_switch() == "v9"; }
int64_t gdn_prep_v9_launches() { return g_v9_launches.load(); }
int64_t gdn_prep_split_launches() { return g_split_launches.load(); }
void note_gdn_prep_split_launch() { g_split_launches.fetch_add(1); }

int gdn_prep_v7_ctas_per_sm(int G) {  // as launch_v7_t and launch() set the carveout and the opt-in
  return ctas_per_sm(reinterpret_cast<const void*>(gdn_prep_v7_kernel<__nv_bfloat16, 64, true, false>),
                     PrepSmemV7<__nv_bfloat16, 64, true>::bytes(G));
}
int gdn_prep_v8_ctas_per_sm(int G) {
  return ctas_per_sm(reinterpret_cast<const void*>(gdn_prep_v8_kernel<__nv_bfloat16, 64, true, false>),
                     PrepSmemV7<__nv_bfloat16, 64, true, true>::bytes(G));
}
int gdn_prep_v7_split_ctas_per_sm(int Gs) {
  return ctas_per_sm(reinterpret_cast<const void*>(gdn_prep_v7_kernel<__nv_bfloat16, 64, true, false, true>),
                     PrepSmemV7<__nv_bfloat16, 64, true>::bytes(Gs));
}

GdnPrepSplit gdn_prep_split_env() {
  constexpr int kSplit[] = {1, 2, 4, 8, 0};  // 0: auto
  return {kSplit[env_choice("LINATTN_CUDA_GDN_PREP_SPLIT", {"1", "2", "4", "8", "auto"}, 0)]};
}

int gdn_prep_split_pick(GdnPrepSplit sw, int G, int64_t ctas, const std::function<int(int)>& ctas_per_sm_at,
                        int sm_count) {
  if (sw.value == 1 || G < 2) return 1;
  if (sw.value > 1) {  // forced: the largest divisor of G not above it
    int s = sw.value;
    while (s > 1 && G % s != 0) s /= 2;
    return s;
  }
  if (sm_count <= 0) sm_count = current_device_info().sm_count;
  for (int s = 8; s > 1; s /= 2)  // auto: the largest split whose grid fits in one wave of resident CTAs
    if (G % s == 0 && ctas * s <= int64_t(ctas_per_sm_at(s)) * sm_count) return s;
  return 1;
}

template <class T, int BT>
void launch_gdn_prep_v7(const GdnFwdParams& p, const GdnChunkWs& ws, const int32_t* chunk_indices, int64_t nt_cap,
                        cudaStream_t stream) {
  if (gdn_prep_v8_env()) {
    g_v8_launches.fetch_add(1);
    launch_v7_bt<T, BT, 8>(p, ws, chunk_indices, nt_cap, stream);
    return;
  }
  if (gdn_prep_v9_env()) {
    g_v9_launches.fetch_add(1);
    if constexpr (BT == 64) launch_gdn_prep_v9<T>(p, ws, chunk_indices, nt_cap, stream);  // gdn_prep_v9.cu
    else launch_v7_bt<T, BT, 8>(p, ws, chunk_indices, nt_cap, stream);  // BT 32: role 0 is chain 0, v8's kernel
    return;
  }
  g_v7_launches.fetch_add(1);
  launch_v7_bt<T, BT, 7>(p, ws, chunk_indices, nt_cap, stream);
}
template void launch_gdn_prep_v7<__nv_bfloat16, 64>(const GdnFwdParams&, const GdnChunkWs&, const int32_t*, int64_t,
                                                    cudaStream_t);
template void launch_gdn_prep_v7<__half, 64>(const GdnFwdParams&, const GdnChunkWs&, const int32_t*, int64_t,
                                             cudaStream_t);
template void launch_gdn_prep_v7<__nv_bfloat16, 32>(const GdnFwdParams&, const GdnChunkWs&, const int32_t*, int64_t,
                                                    cudaStream_t);
template void launch_gdn_prep_v7<__half, 32>(const GdnFwdParams&, const GdnChunkWs&, const int32_t*, int64_t,
                                             cudaStream_t);

}  // namespace linattn::cuda
