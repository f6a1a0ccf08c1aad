// CUDA short-conv forward v11 (opt-in, LINATTN_CONV_CUDA_FWD=reg[=8|4|16][,rx=ld|cp][,yst=cs|plain][,blocks= |
// waves=]; convfwd11): conv-probe's best SM copy (16-byte loads straight into registers, 4 per thread in flight,
// 16-byte st.global.cs stores: 4.00 TB/s at 1 GiB, cudaMemcpy 4.26) with the conv in between. A thread owns
// V = 16 / sizeof(E) adjacent channels (8 bf16 / fp16, 4 fp32: one 16-byte load of x (and residual) and one 16-byte
// store of y per row) and walks every row of its block's row group in order with the x window in registers and the
// next kU rows in flight in a ring (the slot of row u is refilled with row u + kU once row u is read): rx=ld (default)
// a register ring of coherent ld.global.L1::no_allocate (kU 8 = "reg": 128 bytes per thread; 4: 64 as the probe's
// copy); rx=cp the thread's own 16-byte shared-memory slots filled by cp.async (kU 8 / 16, one cp.async group per row,
// waited to <= kU - 1 pending; no other thread touches them, so no barrier). Block = 256 threads on a 4 KiB slice of
// every row (a warp reads / writes 512 contiguous bytes), grid = (slices, row groups), 2 blocks per SM (<= 128
// registers), no barriers. Register ring: the window's taps live in shared memory, each thread's own (ptxas reads
// them once per kU rows), the newest tap and the bias in registers; cp ring: all taps in registers. y stores
// st.global.cs (yst=cs, evict-first) or plain st.global (yst=plain). Group rows: waves=2 unless blocks= / waves= say
// otherwise, a multiple of kU. Per channel the FMAs of v6 in v6's order (conv_fwd_run.cu: bias + newest tap, then
// the window oldest first; silu_f; + residual), so y is bitwise v6's. Rows inside no sequence (garbage offsets) are
// not stored. ptxas (sm_90a, bf16, W 4, no residual): register ring kU 8 128 registers, cp ring kU 16 128 / 102
// (silu / none), no spills; fast step ~12 instructions per element. With a residual the register ring runs kU 4
// (kU 8 would spill ~750 bytes; kU 4 spills 16), the cp ring kU 8.
#include "cuda/common/launch.h"
#include "cuda/conv/conv_run.cuh"

namespace linattn::cuda::conv {
namespace {

constexpr int kRegBlocksPerSm = 2;

struct RegArgs {
  int64_t group_rows;
  int cs;  // 1: st.global.cs y stores
};

// Coherent 16-byte load (not .nc: ptxas may sink .nc loads past the stores, conv_probe.cu), L1 bypassed.
__device__ __forceinline__ uint4 ld_row16(const void* p) {
  uint4 v;
  asm volatile("ld.global.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
// One asm with both stores predicated (a branch here would split ptxas's scheduling regions).
__device__ __forceinline__ void st_row16(void* p, uint4 v, int cs) {
  asm volatile(
      "{\n .reg .pred q;\n setp.ne.s32 q, %5, 0;\n"
      " @q st.global.cs.v4.u32 [%0], {%1, %2, %3, %4};\n"
      " @!q st.global.v4.u32 [%0], {%1, %2, %3, %4};\n}\n" ::"l"(p),
      "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "r"(cs)
      : "memory");  // the per-row shared-memory tap loads stay in the loop
}

// 16-byte shared load and a cp.async wait, both ordered (asm volatile, memory clobber) after the previous one.
__device__ __forceinline__ uint4 lds16(unsigned a) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(a)
               : "memory");
  return v;
}
template <int N>
__device__ __forceinline__ void cp_wait_mem() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

// The thread's kU-row ring of one tensor: registers (kCp = false: 16-byte loads into Raw slots) or its own 16-byte
// slots in shared memory filled by cp.async (kCp; slot s at s0 + s * kThreads * 16: a warp's slot is 512
// contiguous bytes). take(s) reads slot s (kCp: after the caller's wait), issue(s, g) refills it with the row at g.
template <int kU, bool kCp>
struct Ring16 {
  Raw<16> r[kCp ? 1 : kU];
  unsigned s0;

  __device__ __forceinline__ void issue(int s, const char* g) {
    if constexpr (kCp) cp_async16_s(s0 + static_cast<unsigned>(s) * (kThreads * 16), g);
    else r[s].v = ld_row16(g);
  }
  __device__ __forceinline__ Raw<16> take(int s) const {
    Raw<16> v;
    if constexpr (kCp) v.v = lds16(s0 + static_cast<unsigned>(s) * (kThreads * 16));
    else v = r[s];
    return v;
  }
};

// x window (rows u - H .. u - 1, oldest first) of V channels at row u of sequence n (first row bos): rows
// >= bos from x (16-byte loads), earlier ones from initial_state slots (zero without it).
template <class E, int kW, int V>
__device__ __forceinline__ void reg_window(float (*xw)[kW - 1], const ConvParams& p, int u, int bos, int n, int c) {
  constexpr int H = kW - 1;
#pragma unroll
  for (int k = 0; k < H; ++k) {
    const int q = u - H + k;
    float v[V];
    if (q >= bos) {
      Raw<16> r;
      r.v = ld_row16(static_cast<const E*>(p.x.data) + static_cast<int64_t>(q) * p.x.st + c);
      Lanes<E, V>::to_float(r, v);
    } else {
#pragma unroll
      for (int j = 0; j < V; ++j)
        v[j] = p.h0 ? load_small(p.h0, p.h0_dtype, (static_cast<int64_t>(n) * p.D + c + j) * kW + kW + q - bos) : 0.0f;
    }
#pragma unroll
    for (int j = 0; j < V; ++j) xw[j][k] = v[j];
  }
}

template <class E, int kW, bool kSilu, bool kRes, int kU, bool kCp>
__global__ void __launch_bounds__(kThreads, kRegBlocksPerSm) fwd_reg_kernel(const ConvParams p, const RegArgs a) {
  constexpr int V = 16 / static_cast<int>(sizeof(E)), H = kW - 1, SPAN = kThreads * V, Q = V / 4;
  using L = Lanes<E, V>;
  // [(k * Q + h) * kThreads + tid]: taps k < H of the thread's channels 4h..4h+3; then (kCp) the x ring, kU slots
  // of kThreads x 16 bytes, then the residual ring.
  extern __shared__ float4 tap_sm[];
  const int tid = static_cast<int>(threadIdx.x);
  const int c = static_cast<int>(blockIdx.x) * SPAN + tid * V;  // D, rows < 2^31: 32-bit indices
  if (c >= p.D) return;  // no barriers in this kernel: a thread reads back only its own taps
  const int rend = static_cast<int>(seq_start(p, p.N));  // rows past the last sequence are padding
  const int g0 = static_cast<int>(blockIdx.y) * static_cast<int>(a.group_rows);
  const int g1 = g0 + static_cast<int>(a.group_rows) < rend ? g0 + static_cast<int>(a.group_rows) : rend;
  if (g0 >= g1) return;
  const int len = g1 - g0;
  const int cs = a.cs;
  const int64_t xst = p.x.st * static_cast<int64_t>(sizeof(E)), rst = p.residual.st * static_cast<int64_t>(sizeof(E));
  const int64_t yst = p.y.st * static_cast<int64_t>(sizeof(E));
  const int64_t r0 = g0;
  const char* xn = reinterpret_cast<const char*>(static_cast<const E*>(p.x.data) + r0 * p.x.st + c);
  const char* rn = nullptr;
  if constexpr (kRes)
    rn = reinterpret_cast<const char*>(static_cast<const E*>(p.residual.data) + r0 * p.residual.st + c);
  char* yp = reinterpret_cast<char*>(static_cast<E*>(p.y.data) + r0 * p.y.st + c);

  // The ring first (the long round trips), then taps, bias and window: all in flight together. kCp: one cp.async
  // group per row (empty past the group's rows), so waiting for <= kU - 1 pending groups before taking row i
  // means row i has landed.
  Ring16<kU, kCp> xr, rr;
  {
    const unsigned ring0 = static_cast<unsigned>(__cvta_generic_to_shared(tap_sm + H * Q * kThreads)) + tid * 16;
    xr.s0 = ring0, rr.s0 = ring0 + kU * kThreads * 16;
  }
#pragma unroll
  for (int s = 0; s < kU; ++s) {
    if constexpr (!kCp) xr.r[s].v = make_uint4(0u, 0u, 0u, 0u), rr.r[s].v = make_uint4(0u, 0u, 0u, 0u);
    if (s < len) {
      xr.issue(s, xn);
      if constexpr (kRes) rr.issue(s, rn);
    }
    if constexpr (kCp) cp_async_commit();
    xn += xst;
    if constexpr (kRes) rn += rst;
  }
  // Registers keep the newest tap and the bias; the window's taps go to shared memory (read back in the row loop;
  // ptxas reloads them once per kU rows: 128 registers cannot hold them next to an 8-row ring for every row).
  float wl[V], bias[V];
  float twr[kCp ? H : 1][V];  // kCp: the window taps in registers (the ring is not in registers there)
  {
    Taps<kW> taps[V];
#pragma unroll
    for (int j = 0; j < V; ++j) {
      bias[j] = 0.0f;
#pragma unroll
      for (int k = 0; k < kW; ++k) taps[j].w[k] = 0.0f;
    }
    load_taps<kW, V>(taps, bias, p, c, kW);
#pragma unroll
    for (int j = 0; j < V; ++j) wl[j] = taps[j].w[H];
#pragma unroll
    for (int k = 0; k < H; ++k) {
#pragma unroll
      for (int j = 0; j < V; ++j) twr[kCp ? k : 0][j] = taps[j].w[k];
      if constexpr (!kCp) {
#pragma unroll
        for (int h = 0; h < Q; ++h)
          tap_sm[(k * Q + h) * kThreads + tid] =
              make_float4(taps[4 * h].w[k], taps[4 * h + 1].w[k], taps[4 * h + 2].w[k], taps[4 * h + 3].w[k]);
      }
    }
  }
  float xw[V][H];  // x of rows u - H + k
  int n = static_cast<int>(find_seq(p, g0)), bos, eos;
  seq_bounds32(p, n, &bos, &eos);
  reg_window<E, kW, V>(xw, p, g0, bos, n, c);

  // v6's row step (conv_fwd_run.cu) on V channels: the same FMAs in the same order; y row to yr.
  auto row = [&](const float* xu, const float* res, char* yr) {
    float tw[H][V];
#pragma unroll
    for (int k = 0; k < H; ++k)
#pragma unroll
      for (int h = 0; h < Q; ++h) {
        float4 t;
        if constexpr (kCp) t = make_float4(twr[k][4 * h], twr[k][4 * h + 1], twr[k][4 * h + 2], twr[k][4 * h + 3]);
        else t = tap_sm[(k * Q + h) * kThreads + tid];
        tw[k][4 * h] = t.x, tw[k][4 * h + 1] = t.y, tw[k][4 * h + 2] = t.z, tw[k][4 * h + 3] = t.w;
      }
    float out[V];
#pragma unroll
    for (int j = 0; j < V; ++j) {
      float z = fmaf(wl[j], xu[j], bias[j]);
#pragma unroll
      for (int k = 0; k < H; ++k) z = fmaf(tw[k][j], xw[j][k], z);
      if constexpr (kSilu) z = silu_f(z);
      if constexpr (kRes) z += res[j];
      out[j] = z;
#pragma unroll
      for (int k = 0; k + 1 < H; ++k) xw[j][k] = xw[j][k + 1];
      xw[j][H - 1] = xu[j];
    }
    st_row16(yr, L::from_float(out).v, cs);
  };

  for (int i0 = 0; i0 < len; i0 += kU) {
    const int r = g0 + i0;
    if (r >= bos && r + kU <= eos && i0 + 2 * kU <= len) {  // kU rows of one sequence, kU more rows to load
#pragma unroll
      for (int s = 0; s < kU; ++s) {
        float xu[V], res[V];
        if constexpr (kCp) cp_wait_mem<kU - 1>();
        L::to_float(xr.take(s), xu);
        xr.issue(s, xn);
        xn += xst;
        if constexpr (kRes) {
          L::to_float(rr.take(s), res);
          rr.issue(s, rn);
          rn += rst;
        }
        if constexpr (kCp) cp_async_commit();
        row(xu, res, yp);
        yp += yst;
      }
    } else {
#pragma unroll
      for (int s = 0; s < kU; ++s) {
        const int i = i0 + s;
        if (i < len) {
          float xu[V], res[V];
          if constexpr (kCp) cp_wait_mem<kU - 1>();
          L::to_float(xr.take(s), xu);
          if constexpr (kRes) L::to_float(rr.take(s), res);
          if (i + kU < len) {
            xr.issue(s, xn);
            if constexpr (kRes) rr.issue(s, rn);
          }
          if constexpr (kCp) cp_async_commit();
          xn += xst;
          if constexpr (kRes) rn += rst;
          const int u = g0 + i;
          if (u >= eos) {
            while (u >= eos && n + 1 < p.N) {
              ++n;
              seq_bounds32(p, n, &bos, &eos);
            }
            reg_window<E, kW, V>(xw, p, bos, bos, n, c);  // initial_state taps of the new sequence
          }
          if (u >= bos && u < eos) row(xu, res, yp);  // else: in no sequence (only with garbage offsets)
          yp += yst;
        }
      }
    }
  }
}

// Dynamic shared memory: the window taps of a block's channels, then (kCp) the x and residual rings.
template <class E>
constexpr size_t reg_smem_bytes(int W, int kU, bool cp, bool res) {
  return static_cast<size_t>(W - 1) * kThreads * 16 * sizeof(float) / sizeof(E) +
         (cp ? static_cast<size_t>(kU) * kThreads * 16 * (res ? 2 : 1) : 0u);
}

// kRes instances: register rings of 4 rows, cp rings of 8 (launch_reg_u picks kU so; deeper ones would spill /
// halve the blocks per SM).
template <class E, int kW, int kU, bool kCp>
void launch_reg(const ConvParams& p, cudaStream_t stream, const FwdVariant& v) {
  const bool res = p.residual.data != nullptr;
  constexpr bool kResOk = kU == (kCp ? 8 : 4);
  void (*k)(ConvParams, RegArgs);
  if constexpr (!kResOk) {
    k = p.silu ? fwd_reg_kernel<E, kW, true, false, kU, kCp> : fwd_reg_kernel<E, kW, false, false, kU, kCp>;
  } else if (p.silu) {
    k = res ? fwd_reg_kernel<E, kW, true, true, kU, kCp> : fwd_reg_kernel<E, kW, true, false, kU, kCp>;
  } else {
    k = res ? fwd_reg_kernel<E, kW, false, true, kU, kCp> : fwd_reg_kernel<E, kW, false, false, kU, kCp>;
  }
  const size_t smem = reg_smem_bytes<E>(kW, kU, kCp, res);
  if (smem > 48 * 1024) ensure_dynamic_smem(reinterpret_cast<const void*>(k), smem);
  FwdVariant g = v;
  if (g.blocks == 0 && g.waves == 0) g.waves = 2;
  // waves= counts kRegBlocksPerSm blocks per SM (the 16-bit W = 4 instances' occupancy: 128 registers; leaner
  // instances may fit 3): a constant, so no occupancy query (none inside a stream capture either).
  constexpr int64_t span = kThreads * (16 / static_cast<int64_t>(sizeof(E)));
  RegArgs a;
  a.group_rows = variant_group_rows(p, g, span, kU, kRegBlocksPerSm);
  a.cs = v.reg_cs ? 1 : 0;
  const int64_t spans = (p.D + span - 1) / span;
  const int64_t groups = (p.B * p.T + a.group_rows - 1) / a.group_rows;
  k<<<dim3(static_cast<unsigned>(spans), static_cast<unsigned>(groups)), kThreads, smem, stream>>>(p, a);
  LINATTN_CONV_CUDA_OK(cudaGetLastError());
}

template <class E, int kW>
void launch_reg_u(const ConvParams& p, cudaStream_t stream, const FwdVariant& v) {
  const bool res = p.residual.data != nullptr;
  if (v.reg_cp) {
    if (v.reg == 16 && !res) launch_reg<E, kW, 16, true>(p, stream, v);
    else launch_reg<E, kW, 8, true>(p, stream, v);
  } else if (v.reg == 4 || res) {
    launch_reg<E, kW, 4, false>(p, stream, v);
  } else {
    launch_reg<E, kW, 8, false>(p, stream, v);
  }
}

}  // namespace

template <class E>
void fwd_reg(const ConvParams& p, cudaStream_t stream, const FwdVariant& v) {
  if (p.W == 2) launch_reg_u<E, 2>(p, stream, v);
  else if (p.W == 3) launch_reg_u<E, 3>(p, stream, v);
  else launch_reg_u<E, 4>(p, stream, v);
}

template void fwd_reg<float>(const ConvParams&, cudaStream_t, const FwdVariant&);
template void fwd_reg<__nv_bfloat16>(const ConvParams&, cudaStream_t, const FwdVariant&);
template void fwd_reg<__half>(const ConvParams&, cudaStream_t, const FwdVariant&);

}  // namespace linattn::cuda::conv
