// CUDA short-conv forward, long runs (v6; design in conv_run.cuh): y = act(bias + sum_i
// weight[:, i] * xbar[t - W + 1 + i]) + residual. Block = 1 KiB of every row x one group of
// group_rows consecutive rows (any split: the forward has no partial sums); a thread walks every
// row of its group with the x window in registers (loaded from global memory / initial_state once
// per group and at each sequence start) and writes y. x (and residual) come through the staged
// ring; silu and residual are compile-time flags of the kernel. Opt-in (fwd_run_variant,
// LINATTN_CONV_CUDA_FWD, conv_run.cuh: FwdVariant): other grids, and x=cp (conv_fwd_tma.cu).
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "cuda/common/device_info.h"
#include "cuda/common/launch.h"
#include "cuda/conv/conv_run.cuh"

namespace linattn::cuda::conv {
namespace {

template <class E, int kW, bool kSilu, bool kRes>
__global__ void __launch_bounds__(kThreads, 4) fwd_run_kernel(const ConvParams p, int64_t group_rows) {
  constexpr int kR = kRunRows, kS = kRunStages;
  constexpr int kC = run_chans<E>(), SPAN = run_span<E>(), H = kW - 1;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int c0 = static_cast<int>(blockIdx.x) * SPAN;  // rows and D < 2^31: 32-bit indices
  const int c = c0 + static_cast<int>(threadIdx.x) * kC;
  const bool active = c < p.D;
  const int rend = static_cast<int>(seq_start(p, p.N));  // rows past the last sequence are padding
  const int g0 = static_cast<int>(blockIdx.y) * static_cast<int>(group_rows);
  const int g1 = g0 + static_cast<int>(group_rows) < rend ? g0 + static_cast<int>(group_rows) : rend;
  if (g0 >= g1) return;  // block-uniform

  Taps<kW> taps[kC];
  float bias[kC];
#pragma unroll
  for (int j = 0; j < kC; ++j) {
    bias[j] = 0.0f;
#pragma unroll
    for (int k = 0; k < kW; ++k) taps[j].w[k] = 0.0f;
  }
  if (active) load_taps<kW, kC>(taps, bias, p, c, kW);
  float xw[kC][H];  // x of rows u - H + k
  int n = static_cast<int>(find_seq(p, g0)), bos, eos;
  seq_bounds32(p, n, &bos, &eos);
  if (active) run_x_window<E, kW, kC>(xw, p, g0, bos, n, c);
  E* const y0 = static_cast<E*>(p.y.data) + c;
  const int64_t yst = p.y.st;

  auto row = [&](const E* xp, const E* rp, E* yp) {
    float xu[kC], res[kC], out[kC];
    load_lanes<E, kC>(xp, xu);
    if constexpr (kRes) load_lanes<E, kC>(rp, res);
#pragma unroll
    for (int j = 0; j < kC; ++j) {
      float z = fmaf(taps[j].w[H], xu[j], bias[j]);
#pragma unroll
      for (int k = 0; k < H; ++k) z = fmaf(taps[j].w[k], xw[j][k], z);
      if constexpr (kSilu) z = silu_f(z);
      if constexpr (kRes) z += res[j];
      out[j] = z;
#pragma unroll
      for (int k = 0; k + 1 < H; ++k) xw[j][k] = xw[j][k + 1];
      xw[j][H - 1] = xu[j];
    }
    store_lanes<E, kC>(yp, out);
  };

  RunCopy<E, kR> cx, cr;
  cx.init(p.x, g0, c0, p.D, smem_raw);
  if constexpr (kRes) cr.init(p.residual, g0, c0, p.D, smem_raw + kR * kRunRowBytes);
  constexpr int kStage = (kRes ? 2 : 1) * kR * kRunRowBytes;  // bytes: x rows, then residual rows
  const int ntiles = (g1 - g0 + kR - 1) / kR;
  auto issue = [&](int k, int st) {
    const int left = g1 - g0 - k * kR;
    const int nrows = left < kR ? left : kR;
    cx.issue(st * kStage, nrows);
    if constexpr (kRes) cr.issue(st * kStage, nrows);
  };
  auto body = [&](int k, int st) {
    if (!active) return;
    const E* xs = reinterpret_cast<const E*>(smem_raw + st * kStage) + threadIdx.x * kC;
    const E* rs = xs + kR * SPAN;
    const int r = g0 + k * kR;
    E* yp = y0 + static_cast<int64_t>(r) * yst;
    if (r >= bos && r + kR <= eos && r + kR <= g1) {  // one sequence: no tests
#pragma unroll
      for (int i = 0; i < kR; ++i, yp += yst) row(xs + i * SPAN, rs + i * SPAN, yp);
    } else {
      const int nrows = g1 - r < kR ? g1 - r : kR;
#pragma unroll 1
      for (int i = 0; i < nrows; ++i) {
        const int u = r + i;
        if (u >= eos) {
          while (u >= eos && n + 1 < p.N) {
            ++n;
            seq_bounds32(p, n, &bos, &eos);
          }
          run_x_window<E, kW, kC>(xw, p, bos, bos, n, c);  // initial_state taps of the new sequence
        }
        if (u < bos || u >= eos) continue;  // not in a sequence (only with garbage offsets)
        row(xs + i * SPAN, rs + i * SPAN, yp + i * yst);
      }
    }
  };
  run_pipeline<kS>(ntiles, issue, body);
}

template <class E, int kW, bool kSilu, bool kRes>
void launch_one(const ConvParams& p, cudaStream_t stream, dim3 grid, int64_t group_rows) {
  const size_t smem = run_smem_bytes(kRes ? 2 : 1);
  ensure_dynamic_smem(reinterpret_cast<const void*>(fwd_run_kernel<E, kW, kSilu, kRes>), smem);
  fwd_run_kernel<E, kW, kSilu, kRes><<<grid, kThreads, smem, stream>>>(p, group_rows);
}

template <class E, int kW>
void launch_w(const ConvParams& p, cudaStream_t stream, dim3 grid, int64_t group_rows) {
  const bool res = p.residual.data != nullptr;
  if (p.silu) {
    if (res) launch_one<E, kW, true, true>(p, stream, grid, group_rows);
    else launch_one<E, kW, true, false>(p, stream, grid, group_rows);
  } else {
    if (res) launch_one<E, kW, false, true>(p, stream, grid, group_rows);
    else launch_one<E, kW, false, false>(p, stream, grid, group_rows);
  }
}

}  // namespace

template <class E>
void fwd_run(const ConvParams& p, cudaStream_t stream, int64_t group_rows, int64_t groups) {
  const dim3 grid(static_cast<unsigned>((p.D + run_span<E>() - 1) / run_span<E>()), static_cast<unsigned>(groups));
  if (p.W == 2) launch_w<E, 2>(p, stream, grid, group_rows);
  else if (p.W == 3) launch_w<E, 3>(p, stream, grid, group_rows);
  else launch_w<E, 4>(p, stream, grid, group_rows);
  LINATTN_CONV_CUDA_OK(cudaGetLastError());
}

int run_occupancy(const void* k, size_t smem) {  // fixed per (kernel, device, smem), not per call data
  static std::mutex mu;
  static std::map<std::tuple<const void*, int, size_t>, int> occs;  // (kernel, device, smem) -> blocks per SM
  const int dev = current_device_info().ordinal;
  std::lock_guard<std::mutex> lock(mu);
  auto it = occs.find({k, dev, smem});
  if (it == occs.end()) {
    int occ = 0;
    LINATTN_CONV_CUDA_OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, k, kThreads, smem));
    it = occs.emplace(std::make_tuple(k, dev, smem), occ > 0 ? occ : 1).first;
  }
  return it->second;
}

namespace {

// The v6 kernel on a variant's grid (blocks= / waves=; x=cp where it has no instance).
template <class E, int kW>
void launch_variant(const ConvParams& p, cudaStream_t stream, const FwdVariant& v) {
  const bool res = p.residual.data != nullptr;
  void (*k)(ConvParams, int64_t);
  if (p.silu) k = res ? fwd_run_kernel<E, kW, true, true> : fwd_run_kernel<E, kW, true, false>;
  else k = res ? fwd_run_kernel<E, kW, false, true> : fwd_run_kernel<E, kW, false, false>;
  const size_t smem = run_smem_bytes(res ? 2 : 1);
  ensure_dynamic_smem(reinterpret_cast<const void*>(k), smem);
  const int occ = v.waves > 0 ? run_occupancy(reinterpret_cast<const void*>(k), smem) : 0;
  const int64_t spans = (p.D + run_span<E>() - 1) / run_span<E>();
  const int64_t g = variant_group_rows(p, v, run_span<E>(), kRunRows, occ);
  const int64_t groups = (p.B * p.T + g - 1) / g;
  const dim3 grid(static_cast<unsigned>(spans), static_cast<unsigned>(groups));
  k<<<grid, kThreads, smem, stream>>>(p, g);
  LINATTN_CONV_CUDA_OK(cudaGetLastError());
}

}  // namespace

int64_t variant_group_rows(const ConvParams& p, const FwdVariant& v, int64_t span, int kR, int occ) {
  const int64_t rows = p.B * p.T;
  const int64_t spans = (p.D + span - 1) / span;
  int64_t target = v.blocks;
  if (v.waves > 0) target = v.waves * current_device_info().sm_count * (occ > 0 ? occ : 1);
  int64_t g = (rows * spans + (target > 0 ? target : 2048) - 1) / (target > 0 ? target : 2048);
  if (target <= 0 && g < 64) g = 64;  // v6's rule (run_group_rows in conv_fwd.cu)
  const int64_t min_g = (rows + 65534) / 65535;  // grid.y <= 65535
  g = g < min_g ? min_g : g;
  return (g + kR - 1) / kR * kR;
}

namespace {

constexpr const char* kFwdAccepted = "v6, x=cp, blocks=N, waves=N (comma-separated)";

// Keys and flags of the v7-v11 variants removed in session 10: named explicitly so a stale A/B setting fails
// with a pointer to why rather than as an unknown key.
bool removed_item(const std::string& key) {
  for (const char* r : {"tma", "reg", "ring", "ld", "st", "pf", "x", "y", "order", "ystage", "phase", "pbuf", "pst",
                        "rx", "yst"})
    if (key == r) return true;
  return false;
}

FwdVariant parse_variant(const std::string& s) {
  FwdVariant v;
  v.on = true;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    const std::string item = s.substr(pos, end - pos);
    pos = end + 1;
    if (item.empty() || item == "v6") continue;
    if (item == "x=cp") {
      v.bulk_y = true;
      continue;
    }
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq), val = eq == std::string::npos ? "" : item.substr(eq + 1);
    LINATTN_CHECK(!removed_item(key), "LINATTN_CONV_CUDA_FWD=", s, ": ", item,
                  " names a forward variant removed in session 10 (measured slower at every shape; "
                  "docs/perf-notes.md, Short conv, Pruned); accepted: ",
                  kFwdAccepted);
    LINATTN_CHECK(eq != std::string::npos && (key == "blocks" || key == "waves"), "LINATTN_CONV_CUDA_FWD=", s,
                  ": unknown item ", item, "; accepted: ", kFwdAccepted);
    const long long n = std::atoll(val.c_str());
    LINATTN_CHECK(n > 0 && n <= (1 << 22), "LINATTN_CONV_CUDA_FWD=", s, ": ", key, " expected 1 .. 2^22, got ", val);
    (key == "blocks" ? v.blocks : v.waves) = n;
  }
  return v;
}

}  // namespace

// Parsed once per distinct value of the variable (the forward asks on every call).
FwdVariant fwd_variant() {
  const char* e = std::getenv("LINATTN_CONV_CUDA_FWD");
  if (e == nullptr || *e == '\0') return FwdVariant{};
  static std::mutex mu;
  static std::string last;
  static FwdVariant cached;
  std::lock_guard<std::mutex> lock(mu);
  if (!cached.on || last != e) {
    cached = parse_variant(e);  // throws on a bad value: nothing cached then
    last = e;
  }
  return cached;
}

template <class E>
void fwd_run_variant(const ConvParams& p, cudaStream_t stream, const FwdVariant& v) {
  if (v.bulk_y && fwd_bulk_y<E>(p, stream, v)) return;
  if (p.W == 2) launch_variant<E, 2>(p, stream, v);
  else if (p.W == 3) launch_variant<E, 3>(p, stream, v);
  else launch_variant<E, 4>(p, stream, v);
}

template void fwd_run_variant<float>(const ConvParams&, cudaStream_t, const FwdVariant&);
template void fwd_run_variant<__nv_bfloat16>(const ConvParams&, cudaStream_t, const FwdVariant&);
template void fwd_run_variant<__half>(const ConvParams&, cudaStream_t, const FwdVariant&);
template void fwd_run<float>(const ConvParams&, cudaStream_t, int64_t, int64_t);
template void fwd_run<__nv_bfloat16>(const ConvParams&, cudaStream_t, int64_t, int64_t);
template void fwd_run<__half>(const ConvParams&, cudaStream_t, int64_t, int64_t);

}  // namespace linattn::cuda::conv
