// CUDA short-conv forward, long runs (v6; design in conv_run.cuh): y = act(bias + sum_i
// weight[:, i] * xbar[t - W + 1 + i]) + residual. Block = 1 KiB of every row x one group of
// group_rows consecutive rows (any split: the forward has no partial sums); a thread walks every
// row of its group with the x window in registers (loaded from global memory / initial_state once
// per group and at each sequence start) and writes y. x (and residual) come through the staged
// ring; silu and residual are compile-time flags of the kernel. v7 (opt-in, fwd_run_variant):
// the same kernel with other rings (kR-row tiles x kS stages), L2 eviction policies on the x /
// residual copies and the y stores (kHint; W = 4 only), and other grids (conv_run.cuh: FwdVariant).
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

// y store of one thread's 4 bytes with an L2 cache policy (the hinted instances).
template <class E, int kC>
__device__ __forceinline__ void store_lanes_hint(E* p, const float* v, uint64_t pol) {
  uint32_t bits;
  if constexpr (kC == 1) {
    static_assert(sizeof(E) == 4, "kC = 1: fp32");
    bits = __float_as_uint(v[0]);
  } else if constexpr (std::is_same_v<E, __nv_bfloat16>) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(v[0], v[1]);
    bits = *reinterpret_cast<const uint32_t*>(&h);
  } else {
    const __half2 h = __floats2half2_rn(v[0], v[1]);
    bits = *reinterpret_cast<const uint32_t*>(&h);
  }
  asm volatile("st.global.L2::cache_hint.b32 [%0], %1, %2;\n" ::"l"(p), "r"(bits), "l"(pol) : "memory");
}

// hints (kHint only): ld policy code + 4 * st policy code + 16 * L2::256B prefetch.
template <class E, int kW, bool kSilu, bool kRes, int kR = kRunRows, int kS = kRunStages, bool kHint = false>
__global__ void __launch_bounds__(kThreads, 4)
    fwd_run_kernel(const ConvParams p, int64_t group_rows, [[maybe_unused]] int hints) {
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

  uint64_t ld_pol = 0, st_pol = 0;
  [[maybe_unused]] const bool pf256 = (hints >> 4) & 1;
  if constexpr (kHint) ld_pol = l2_policy(hints & 3), st_pol = l2_policy((hints >> 2) & 3);
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
    if constexpr (kHint) store_lanes_hint<E, kC>(yp, out, st_pol);
    else store_lanes<E, kC>(yp, out);
  };

  RunCopy<E, kR> cx, cr;
  cx.init(p.x, g0, c0, p.D, smem_raw);
  if constexpr (kRes) cr.init(p.residual, g0, c0, p.D, smem_raw + kR * kRunRowBytes);
  constexpr int kStage = (kRes ? 2 : 1) * kR * kRunRowBytes;  // bytes: x rows, then residual rows
  const int ntiles = (g1 - g0 + kR - 1) / kR;
  auto issue = [&](int k, int st) {
    const int left = g1 - g0 - k * kR;
    const int nrows = left < kR ? left : kR;
    if constexpr (kHint) {
      cx.issue_hint(st * kStage, nrows, ld_pol, pf256);
      if constexpr (kRes) cr.issue_hint(st * kStage, nrows, ld_pol, pf256);
    } else {
      cx.issue(st * kStage, nrows);
      if constexpr (kRes) cr.issue(st * kStage, nrows);
    }
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
  fwd_run_kernel<E, kW, kSilu, kRes><<<grid, kThreads, smem, stream>>>(p, group_rows, 0);
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

namespace {

template <class E, int kW, int kR, int kS, bool kHint>
void launch_variant(const ConvParams& p, cudaStream_t stream, const FwdVariant& v) {
  const bool res = p.residual.data != nullptr;
  void (*k)(ConvParams, int64_t, int);
  if (p.silu)
    k = res ? fwd_run_kernel<E, kW, true, true, kR, kS, kHint> : fwd_run_kernel<E, kW, true, false, kR, kS, kHint>;
  else
    k = res ? fwd_run_kernel<E, kW, false, true, kR, kS, kHint> : fwd_run_kernel<E, kW, false, false, kR, kS, kHint>;
  const size_t smem = run_smem_bytes(res ? 2 : 1, kR, kS);
  ensure_dynamic_smem(reinterpret_cast<const void*>(k), smem);
  int occ = 0;
  if (v.waves > 0) {  // the device's resident blocks of this instance: fixed per device, not per call data
    static std::mutex mu;
    static std::map<std::tuple<const void*, int, size_t>, int> occs;  // (kernel, device, smem) -> blocks per SM
    const int dev = current_device_info().ordinal;
    std::lock_guard<std::mutex> lock(mu);
    auto it = occs.find({reinterpret_cast<const void*>(k), dev, smem});
    if (it == occs.end()) {
      LINATTN_CONV_CUDA_OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, k, kThreads, smem));
      it = occs.emplace(std::make_tuple(reinterpret_cast<const void*>(k), dev, smem), occ > 0 ? occ : 1).first;
    }
    occ = it->second;
  }
  const int64_t spans = (p.D + run_span<E>() - 1) / run_span<E>();
  const int64_t g = variant_group_rows(p, v, run_span<E>(), kR, occ);
  const int64_t groups = (p.B * p.T + g - 1) / g;
  const dim3 grid(static_cast<unsigned>(spans), static_cast<unsigned>(groups));
  k<<<grid, kThreads, smem, stream>>>(p, g, v.ld + 4 * v.st + (v.pf256 ? 16 : 0));
  LINATTN_CONV_CUDA_OK(cudaGetLastError());
}

int policy_code(const std::string& key, const std::string& val) {
  if (val == "normal") return 0;
  if (val == "first") return 1;
  if (val == "last") return 2;
  LINATTN_CHECK(false, "LINATTN_CONV_CUDA_FWD: ", key, " expected normal / first / last, got ", val);
  return 0;
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

FwdVariant parse_variant(const std::string& s) {
  FwdVariant v;
  v.on = true;
  bool v10_knob = false, v11_knob = false;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    const std::string item = s.substr(pos, end - pos);
    pos = end + 1;
    if (item.empty() || item == "v6") continue;
    if (item == "tma") {
      v.tma = true;
      continue;
    }
    if (item == "reg") {  // v11 (conv_fwd_reg.cu), 8 rows in flight
      v.reg = 8;
      continue;
    }
    const size_t eq = item.find('=');
    LINATTN_CHECK(eq != std::string::npos, "LINATTN_CONV_CUDA_FWD: expected key=value, got ", item);
    const std::string key = item.substr(0, eq), val = item.substr(eq + 1);
    if (key == "ring") {
      const char* rings[] = {"8x4", "8x6", "16x3", "16x4", "32x3", "8x3"};
      v.ring = -1;
      for (int i = 0; i < 6; ++i)
        if (val == rings[i]) v.ring = i;
      LINATTN_CHECK(v.ring >= 0, "LINATTN_CONV_CUDA_FWD: ring expected 8x4 / 8x6 / 16x3 / 16x4 / 32x3 / 8x3, got ",
                    val);
      v.hint = true;
    } else if (key == "ld" || key == "st") {
      (key == "ld" ? v.ld : v.st) = policy_code(key, val);
      v.hint = true;
    } else if (key == "pf") {
      LINATTN_CHECK(val == "256", "LINATTN_CONV_CUDA_FWD: pf expected 256, got ", val);
      v.pf256 = v.hint = true;
    } else if (key == "x") {
      LINATTN_CHECK(val == "bulk" || val == "cp", "LINATTN_CONV_CUDA_FWD: x expected bulk / cp, got ", val);
      v.tma_x = val == "cp" ? 1 : 0;
      v.tma = true;
    } else if (key == "y") {
      LINATTN_CHECK(val == "bulk" || val == "st16" || val == "direct" || val == "tile",
                    "LINATTN_CONV_CUDA_FWD: y expected bulk / st16 / direct / tile, got ", val);
      v.tma_y = val == "bulk" ? 0 : (val == "st16" ? 1 : (val == "direct" ? 2 : 3));
      v.tma = true;
    } else if (key == "order") {
      LINATTN_CHECK(val == "span" || val == "group" || val == "spread",
                    "LINATTN_CONV_CUDA_FWD: order expected span / group / spread, got ", val);
      v.order = val == "span" ? 0 : (val == "group" ? 1 : 2);
      v.tma = true;
    } else if (key == "ystage") {
      LINATTN_CHECK(val == "2" || val == "3" || val == "4", "LINATTN_CONV_CUDA_FWD: ystage expected 2 / 3 / 4, got ",
                    val);
      v.ystage = val[0] - '0';
      v.tma = true;
    } else if (key == "phase") {  // v10 (conv_fwd_v10.cu)
      const int r = std::atoi(val.c_str());
      LINATTN_CHECK(r >= 8 && r <= 64 && r % 8 == 0 && val == std::to_string(r),
                    "LINATTN_CONV_CUDA_FWD: phase expected 8 / 16 / 24 / 32 / 40 / 48 / 56 / 64, got ", val);
      v.phase = r;
    } else if (key == "pbuf") {
      LINATTN_CHECK(val == "1" || val == "2" || val == "3", "LINATTN_CONV_CUDA_FWD: pbuf expected 1 / 2 / 3, got ", val);
      v.pbuf = val[0] - '0';
      v10_knob = true;
    } else if (key == "pst") {
      LINATTN_CHECK(val == "bulk" || val == "st16" || val == "cs",
                    "LINATTN_CONV_CUDA_FWD: pst expected bulk / st16 / cs, got ", val);
      v.pst = val == "bulk" ? 0 : (val == "st16" ? 1 : 2);
      v10_knob = true;
    } else if (key == "reg") {  // v11
      LINATTN_CHECK(val == "4" || val == "8" || val == "16", "LINATTN_CONV_CUDA_FWD: reg expected 4 / 8 / 16, got ",
                    val);
      v.reg = std::atoi(val.c_str());
    } else if (key == "rx") {  // v11
      LINATTN_CHECK(val == "ld" || val == "cp", "LINATTN_CONV_CUDA_FWD: rx expected ld / cp, got ", val);
      v.reg_cp = val == "cp";
      v11_knob = true;
    } else if (key == "yst") {  // v11
      LINATTN_CHECK(val == "cs" || val == "plain", "LINATTN_CONV_CUDA_FWD: yst expected cs / plain, got ", val);
      v.reg_cs = val == "cs";
      v11_knob = true;
    } else if (key == "blocks" || key == "waves") {
      const long long n = std::atoll(val.c_str());
      LINATTN_CHECK(n > 0 && n <= (1 << 22), "LINATTN_CONV_CUDA_FWD: ", key, " expected 1 .. 2^22, got ", val);
      (key == "blocks" ? v.blocks : v.waves) = n;
    } else {
      LINATTN_CHECK(false, "LINATTN_CONV_CUDA_FWD: unknown key ", key,
                    " (ring, ld, st, pf, blocks, waves, x, y, order, ystage, phase, pbuf, pst, reg, rx, yst;",
                    " flags v6, tma, reg)");
    }
  }
  LINATTN_CHECK(!v10_knob || v.phase > 0, "LINATTN_CONV_CUDA_FWD: pbuf= / pst= need phase=");
  LINATTN_CHECK(!v11_knob || v.reg > 0, "LINATTN_CONV_CUDA_FWD: rx= / yst= need reg");
  LINATTN_CHECK(v.reg_cp ? v.reg != 4 : v.reg != 16, "LINATTN_CONV_CUDA_FWD: reg=16 needs rx=cp, rx=cp reg 8 / 16");
  LINATTN_CHECK(v.reg == 0 || (!v.tma && !v.hint && v.phase == 0 && v.order == 0 && v.ystage == 2),
                "LINATTN_CONV_CUDA_FWD: reg (v11) takes only yst, blocks, waves (no tma, phase or ring / ld / st / pf "
                "keys)");
  LINATTN_CHECK(v.phase == 0 || (!v.tma && !v.hint), "LINATTN_CONV_CUDA_FWD: phase= (v10) takes only pbuf, pst, "
                "blocks, waves (no tma or ring / ld / st / pf keys)");
  LINATTN_CHECK(v.ring != 5 || v.tma, "LINATTN_CONV_CUDA_FWD: ring=8x3 is a tma ring (x=cp,ystage=3)");
  if (v.tma) {
    LINATTN_CHECK(v.ring <= 2 || v.ring == 5,
                  "LINATTN_CONV_CUDA_FWD: tma takes ring 8x4 / 8x6 / 16x3 / 8x3, got ring code ", v.ring);
    // The instances conv_fwd_tma_knobs2.cu has: x=cp, y=bulk with ring 8x4 x ystage 2-4, 8x3 x ystage 3,
    // 8x6 / 16x3 x ystage 2 (no silent fallback for a combination that has none).
    const bool cpb = v.tma_x == 1 && v.tma_y == 0;
    LINATTN_CHECK(v.ring != 5 || (cpb && v.ystage == 3),
                  "LINATTN_CONV_CUDA_FWD: ring=8x3 needs x=cp, y=bulk, ystage=3");
    LINATTN_CHECK(v.ystage == 2 || (cpb && (v.ring == 0 || v.ring == 5)),
                  "LINATTN_CONV_CUDA_FWD: ystage 3 / 4 needs x=cp, y=bulk and ring 8x4 (or 8x3 with ystage 3)");
    LINATTN_CHECK(v.ystage != 4 || v.ring == 0, "LINATTN_CONV_CUDA_FWD: ystage=4 needs ring 8x4");
    LINATTN_CHECK(v.tma_x == 0 || (v.ring != 1 && v.ring != 2) || v.tma_y == 0,
                  "LINATTN_CONV_CUDA_FWD: x=cp with ring 8x6 / 16x3 needs y=bulk");
    LINATTN_CHECK(v.tma_y != 3 || (v.tma_x == 1 && v.ring == 0 && v.ystage == 2),
                  "LINATTN_CONV_CUDA_FWD: y=tile needs x=cp, ring 8x4, ystage 2");
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

// The variant that aligned flat layouts without a residual run when LINATTN_CONV_CUDA_FWD is unset (where v6
// would run: grids of >= kRunMinBlocks blocks); "" = v6. A variant string as the variable takes, e.g. "reg"
// (v11) once an H200 A/B shows it faster at every benchmarked shape and its y bitwise equal to v6's.
constexpr const char* kFwdDefault = "";

FwdVariant fwd_default_variant() {
  static const FwdVariant v = *kFwdDefault ? parse_variant(kFwdDefault) : FwdVariant{};
  return v;
}

template <class E>
void fwd_run_variant(const ConvParams& p, cudaStream_t stream, const FwdVariant& v) {
  if (v.reg > 0) {  // v11 (conv_fwd_reg.cu)
    fwd_reg<E>(p, stream, v);
  } else if (v.phase > 0) {  // v10 (conv_fwd_v10.cu)
    fwd_phase<E>(p, stream, v);
  } else if (v.tma && current_device_info().cc_major == 9) {  // bulk copies + mbarriers: the sm_90a binary
    fwd_tma<E>(p, stream, v);
  } else if (p.W == 4 && v.hint && !v.tma) {
    if (v.ring == 1) launch_variant<E, 4, 8, 6, true>(p, stream, v);
    else if (v.ring == 2) launch_variant<E, 4, 16, 3, true>(p, stream, v);
    else if (v.ring == 3) launch_variant<E, 4, 16, 4, true>(p, stream, v);
    else if (v.ring == 4) launch_variant<E, 4, 32, 3, true>(p, stream, v);
    else launch_variant<E, 4, kRunRows, kRunStages, true>(p, stream, v);
  } else if (p.W == 2) {
    launch_variant<E, 2, kRunRows, kRunStages, false>(p, stream, v);
  } else if (p.W == 3) {
    launch_variant<E, 3, kRunRows, kRunStages, false>(p, stream, v);
  } else {
    launch_variant<E, 4, kRunRows, kRunStages, false>(p, stream, v);
  }
}

template void fwd_run_variant<float>(const ConvParams&, cudaStream_t, const FwdVariant&);
template void fwd_run_variant<__nv_bfloat16>(const ConvParams&, cudaStream_t, const FwdVariant&);
template void fwd_run_variant<__half>(const ConvParams&, cudaStream_t, const FwdVariant&);
template void fwd_run<float>(const ConvParams&, cudaStream_t, int64_t, int64_t);
template void fwd_run<__nv_bfloat16>(const ConvParams&, cudaStream_t, int64_t, int64_t);
template void fwd_run<__half>(const ConvParams&, cudaStream_t, int64_t, int64_t);

}  // namespace linattn::cuda::conv
