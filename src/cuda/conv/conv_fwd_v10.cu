// CUDA short-conv forward v10 (opt-in, LINATTN_CONV_CUDA_FWD=phase=P[,pbuf=N][,pst=bulk|st16|cs]; convfwd9):
// v6's block (1 KiB of every row x one row group, conv_run.cuh), thread mapping (2 bf16 / fp16 or 1 fp32
// channel per thread), x window in registers and FMA order (so y is bitwise v6's), with a block's reads and
// writes batched in phases: a phase is P rows (8-64, a multiple of 8) of x (and residual) copied to shared
// memory by 16-byte cp.async, all in flight together (thread q = tid % 64 moves 16-byte chunk q of rows
// tid / 64 + 4 m); y is computed in place over the x rows, then the whole phase is stored: one
// cp.async.bulk per row slice by warp 0 (pst=bulk, sm_90; st16 elsewhere), or 16-byte st.global (st16) /
// st.global.cs (cs) by every thread. pbuf = phase buffers: 1 = strict phases (read P rows, compute, write P
// rows, in turn), 2 / 3 = the next 1 / 2 phases' loads in flight while a phase is computed and stored.
// Shared memory pbuf x P KiB (x 2 with residual), checked against the device limit at launch. Rows inside
// no sequence (garbage offsets) are not stored: a per-phase mask that every thread computes (block-uniform).
// Question (perf-notes "Version 10"): does grouping a block's reads and writes into 16-64 KiB bursts move
// bytes faster than v6's 8-row tiles interleaved with stores? conv_probe.cu times the same shapes as copies.
#include <map>
#include <mutex>
#include <tuple>

#include "cuda/conv/conv_fwd_tma.cuh"

namespace linattn::cuda::conv {
namespace {

struct PhaseArgs {
  int64_t group_rows;
  int rows;  // P: rows per phase, a multiple of 8, <= 64
  int nbuf;  // 1..3
  int st;    // 0 bulk row stores, 1 16-byte st.global, 2 st.global.cs
};

__device__ __forceinline__ void st_global_16(void* p, uint4 v, bool cs) {
  if (cs)
    asm volatile("st.global.cs.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
                 : "memory");
  else
    *static_cast<uint4*>(p) = v;
}

template <class E, int kW, bool kSilu, bool kRes>
__global__ void __launch_bounds__(kThreads, 4) fwd_phase_kernel(const ConvParams p, const PhaseArgs a) {
  constexpr int kC = run_chans<E>(), SPAN = run_span<E>(), H = kW - 1, RB = kRunRowBytes;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32;
  const int c0 = static_cast<int>(blockIdx.x) * SPAN;  // rows and D < 2^31: 32-bit indices
  const int c = c0 + tid * kC;
  const bool active = c < p.D;
  const unsigned slice = static_cast<unsigned>((p.D - c0 < SPAN ? p.D - c0 : SPAN) * sizeof(E));  // row slice bytes
  const int rend = static_cast<int>(seq_start(p, p.N));  // rows past the last sequence are padding
  const int g0 = static_cast<int>(blockIdx.y) * static_cast<int>(a.group_rows);
  const int g1 = g0 + static_cast<int>(a.group_rows) < rend ? g0 + static_cast<int>(a.group_rows) : rend;
  if (g0 >= g1) return;  // block-uniform
  const int P = a.rows, nbuf = a.nbuf;
  const bool bulk = a.st == 0, cs = a.st == 2;
  const int buf_bytes = (kRes ? 2 : 1) * P * RB;

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
  E* const yg = static_cast<E*>(p.y.data);
  const int64_t yst = p.y.st;

  auto row = [&](const E* xp, const E* rp, E* yp) {  // v6's row step (conv_fwd_run.cu), y into yp
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

  // Copies: 16-byte chunk q of rows ro + 4 m of a phase (chunks past D are not copied / stored).
  const int q = tid % 64, ro = tid / 64;
  const int cq = c0 + q * (16 / static_cast<int>(sizeof(E)));
  const bool qon = cq < p.D;
  const unsigned sbase = static_cast<unsigned>(__cvta_generic_to_shared(smem_raw));
  const int nph = (g1 - g0 + P - 1) / P;
  auto phase_rows = [&](int j) {
    const int left = g1 - g0 - j * P;
    return left < P ? left : P;
  };
  auto issue = [&](int j) {
    if (!qon) return;
    const int nr = phase_rows(j), r0 = g0 + j * P;
    const unsigned s = sbase + (j % nbuf) * buf_bytes + ro * RB + q * 16;
#pragma unroll 4
    for (int i = ro; i < nr; i += 4) {
      cp_async16_s(s + (i - ro) * RB, static_cast<const E*>(p.x.data) + static_cast<int64_t>(r0 + i) * p.x.st + cq);
      if constexpr (kRes)
        cp_async16_s(s + P * RB + (i - ro) * RB,
                     static_cast<const E*>(p.residual.data) + static_cast<int64_t>(r0 + i) * p.residual.st + cq);
    }
  };
  // Computes phase j in place (y over the x rows); returns the mask of rows in no sequence (not stored).
  auto compute = [&](int j) {
    E* const xs = reinterpret_cast<E*>(smem_raw + (j % nbuf) * buf_bytes) + tid * kC;
    const E* const rs = xs + P * SPAN;
    const int r0 = g0 + j * P, nr = phase_rows(j);
    uint64_t m = 0;
#pragma unroll 1
    for (int t = 0; t < nr; t += 8) {
      const int r = r0 + t;
      if (r >= bos && r + 8 <= eos && r + 8 <= g1) {  // one sequence: no tests (v6's fast tile)
        if (active) {
#pragma unroll
          for (int i = t; i < t + 8; ++i) row(xs + i * SPAN, rs + i * SPAN, xs + i * SPAN);
        }
      } else {
        const int tr = g1 - r < 8 ? g1 - r : 8;
#pragma unroll 1
        for (int i = t; i < t + tr; ++i) {
          const int u = r0 + i;
          if (u >= eos) {
            while (u >= eos && n + 1 < p.N) {
              ++n;
              seq_bounds32(p, n, &bos, &eos);
            }
            if (active) run_x_window<E, kW, kC>(xw, p, bos, bos, n, c);  // initial_state taps of the new sequence
          }
          if (u < bos || u >= eos) {  // not in a sequence (only with garbage offsets): not stored
            m |= uint64_t{1} << i;
            continue;
          }
          if (active) row(xs + i * SPAN, rs + i * SPAN, xs + i * SPAN);
        }
      }
    }
    return m;
  };
  auto store = [&](int j, uint64_t m) {
    const int nr = phase_rows(j), r0 = g0 + j * P;
    if (bulk) {
      if (tid < 32) {
        for (int i = lane; i < nr; i += 32)
          if (!((m >> i) & 1))
            bulk_store_row(yg + static_cast<int64_t>(r0 + i) * yst + c0, sbase + (j % nbuf) * buf_bytes + i * RB, slice);
        bulk_commit();
      }
    } else if (qon) {
      const unsigned char* sb = smem_raw + (j % nbuf) * buf_bytes + q * 16;
#pragma unroll 4
      for (int i = ro; i < nr; i += 4)
        if (!((m >> i) & 1))
          st_global_16(yg + static_cast<int64_t>(r0 + i) * yst + cq, *reinterpret_cast<const uint4*>(sb + i * RB), cs);
    }
  };

  // Phase j's buffer is j % nbuf. pbuf 1: warp 0 waits until the previous phase's bulk stores read the buffer,
  // a barrier, then phase j's loads, all awaited. pbuf 2 / 3: phases j + 1 (.. j + 2) are in flight; phase j
  // awaited, then (after warp 0 saw phase j - 1's stores done reading, and a barrier) phase j + nbuf - 1 goes into
  // phase j - 1's buffer. Then compute, (async-proxy fence), a barrier, and the stores of phase j.
  for (int k = 0; k < nbuf - 1; ++k) {
    if (k < nph) issue(k);
    cp_async_commit();
  }
  for (int j = 0; j < nph; ++j) {
    if (nbuf == 1) {
      if (bulk && tid < 32) bulk_wait_read<0>();
      __syncthreads();
      issue(j);
      cp_async_commit();
      cp_async_wait<0>();
    } else {
      if (nbuf == 3) cp_async_wait<1>();
      else cp_async_wait<0>();
      if (bulk && tid < 32) bulk_wait_read<0>();
    }
    __syncthreads();
    if (nbuf > 1) {
      if (j + nbuf - 1 < nph) issue(j + nbuf - 1);
      cp_async_commit();
    }
    const uint64_t m = compute(j);
    if (bulk) fence_view_async_shared();
    __syncthreads();
    store(j, m);
  }
  if (bulk && tid < 32) bulk_wait0();
}

template <class E, int kW>
void launch_phase(const ConvParams& p, cudaStream_t stream, const FwdVariant& v) {
  const bool res = p.residual.data != nullptr;
  void (*k)(ConvParams, PhaseArgs);
  if (p.silu) k = res ? fwd_phase_kernel<E, kW, true, true> : fwd_phase_kernel<E, kW, true, false>;
  else k = res ? fwd_phase_kernel<E, kW, false, true> : fwd_phase_kernel<E, kW, false, false>;
  const DeviceInfo& dev = current_device_info();
  const size_t smem = static_cast<size_t>(v.pbuf) * (res ? 2 : 1) * v.phase * kRunRowBytes;
  LINATTN_CHECK(smem <= dev.smem_per_block_optin, "LINATTN_CONV_CUDA_FWD: phase=", v.phase, " x pbuf=", v.pbuf,
                res ? " x 2 (residual)" : "", " needs ", smem, " bytes of shared memory, the device has ",
                dev.smem_per_block_optin);
  ensure_dynamic_smem(reinterpret_cast<const void*>(k), smem);
  prefer_max_shared_carveout(reinterpret_cast<const void*>(k));  // 2-4 blocks of 32-128 KiB per SM
  int occ = 0;
  if (v.waves > 0) {  // resident blocks per SM of this kernel at this shared-memory size: fixed per device
    static std::mutex mu;
    static std::map<std::tuple<const void*, int, size_t>, int> occs;
    std::lock_guard<std::mutex> lock(mu);
    auto it = occs.find({reinterpret_cast<const void*>(k), dev.ordinal, smem});
    if (it == occs.end()) {
      LINATTN_CONV_CUDA_OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, k, kThreads, smem));
      it = occs.emplace(std::make_tuple(reinterpret_cast<const void*>(k), dev.ordinal, smem), occ > 0 ? occ : 1).first;
    }
    occ = it->second;
  }
  PhaseArgs a;
  a.group_rows = variant_group_rows(p, v, run_span<E>(), kRunRows, occ);
  a.rows = v.phase;
  a.nbuf = v.pbuf;
  a.st = v.pst == 0 && dev.cc_major != 9 ? 1 : v.pst;  // bulk stores: the sm_90a binary only
  const int64_t spans = (p.D + run_span<E>() - 1) / run_span<E>();
  const int64_t groups = (p.B * p.T + a.group_rows - 1) / a.group_rows;
  k<<<dim3(static_cast<unsigned>(spans), static_cast<unsigned>(groups)), kThreads, smem, stream>>>(p, a);
  LINATTN_CONV_CUDA_OK(cudaGetLastError());
}

}  // namespace

template <class E>
void fwd_phase(const ConvParams& p, cudaStream_t stream, const FwdVariant& v) {
  if (p.W == 2) launch_phase<E, 2>(p, stream, v);
  else if (p.W == 3) launch_phase<E, 3>(p, stream, v);
  else launch_phase<E, 4>(p, stream, v);
}

template void fwd_phase<float>(const ConvParams&, cudaStream_t, const FwdVariant&);
template void fwd_phase<__nv_bfloat16>(const ConvParams&, cudaStream_t, const FwdVariant&);
template void fwd_phase<__half>(const ConvParams&, cudaStream_t, const FwdVariant&);

}  // namespace linattn::cuda::conv
