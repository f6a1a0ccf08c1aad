// Kernels of the chained CUDA forward (cp_chunk_cuda.cc, cp_dev.h "chained forward"): the
// augmented inputs of a rank > 0 (values [v | 0], initial states [0 | I] for the head and
// [h0 | 0] otherwise, width A = V + K), the tail's record from the forward's final states, and
// the head's correction after the exchange (o = o0 + Qt S_init, final state M S_init + S_loc).
// One thread per output element, grid-stride loops, fixed grids (shapes only); the head / tail /
// sequence rows are read from the device layout, so a captured graph replays any layout.
// The o correction here (simt) is the fallback for captures on a stream without a cuBLAS
// context; eager calls and prepared streams take a cuBLAS GEMM per value head instead.
#include <algorithm>

#include "cuda/common/check.h"
#include "parallel/cp_dev_meta.cuh"

namespace linattn::parallel::dev {
namespace {

__device__ int64_t clamp_rows(int64_t v, int64_t rows) { return v < 0 ? 0 : (v > rows ? rows : v); }

__global__ void aug_inputs_kernel(Layout L, StateDims s, const void* v, DType dt, int64_t v_row, int64_t v_head,
                                  void* v_aug, const float* h0_local, float* h0_aug) {
  const Rd rd(L);
  const int64_t A = s.V + s.K, head = rd.head(L.rank);
  CP_GRID_LOOP(i, L.rows * s.HV * A) {
    const int64_t t = i / (s.HV * A), j = (i / A) % s.HV, c = i % A;
    st(v_aug, dt, i, c < s.V ? ld(v, dt, t * v_row + j * v_head + c) : 0.0f);
  }
  CP_GRID_LOOP(i, L.N * s.HV * s.K * A) {
    const int64_t n = i / (s.HV * s.K * A), j = (i / (s.K * A)) % s.HV, d = (i / A) % s.K, c = i % A;
    float x;
    if (n == head) x = (c >= s.V && c - s.V == d) ? 1.0f : 0.0f;
    else x = c < s.V ? h0_local[state_at(s, n, j, d, c)] : 0.0f;
    h0_aug[i] = x;
  }
}

__global__ void tail_record_kernel(Layout L, StateDims s, const float* ht, bool aug, float* rec) {
  const Rd rd(L);
  const int64_t n = rd.tail(L.rank);
  if (n < 0) return;
  const int64_t A = s.V + s.K, MK = s.HV * s.K * s.K;
  CP_GRID_LOOP(i, s.state()) {
    const int64_t j = i / (s.K * s.V), d = (i / s.V) % s.K, c = i % s.V;
    rec[MK + i] = aug ? ht[((n * s.HV + j) * s.K + d) * A + c] : ht[state_at(s, n, j, d, c)];
  }
  if (!aug || rd.starts_on(n, L.rank)) return;  // absolute record: no transition
  CP_GRID_LOOP(i, MK) {
    const int64_t j = i / (s.K * s.K), d = (i / s.K) % s.K, e = i % s.K;
    rec[i] = ht[((n * s.HV + j) * s.K + d) * A + s.V + e];
  }
}

__global__ void to_dtype_kernel(const float* src, void* dst, DType dt, int64_t n) {
  CP_GRID_LOOP(i, n) st(dst, dt, i, src[i]);
}

__global__ void aug_output_kernel(Layout L, StateDims s, const void* o_aug, DType adt, void* o, DType odt,
                                  int64_t o_row, int64_t o_head, const float* S, bool simt) {
  const Rd rd(L);
  const int64_t A = s.V + s.K, R0 = rd.off(L.rank), head = rd.head(L.rank);
  const int64_t end = clamp_rows(rd.cu(L.N) - R0, L.rows);                  // rows of sequences
  const int64_t hend = head < 0 ? 0 : clamp_rows(rd.cu(head + 1) - R0, L.rows);  // the head's rows
  CP_GRID_LOOP(i, end * s.HV * s.V) {
    const int64_t t = i / (s.HV * s.V), j = (i / s.V) % s.HV, c = i % s.V;
    const int64_t base = (t * s.HV + j) * A;
    float x = ld(o_aug, adt, base + c);
    if (simt && t < hend)
      for (int64_t e = 0; e < s.K; ++e) x += ld(o_aug, adt, base + s.V + e) * S[(j * s.K + e) * s.V + c];
    st(o, odt, t * o_row + j * o_head + c, x);
  }
}

__global__ void aug_states_kernel(Layout L, StateDims s, const float* ht_aug, const float* S, float* ht_local) {
  const Rd rd(L);
  const int64_t A = s.V + s.K, head = rd.head(L.rank);
  CP_GRID_LOOP(i, L.N * s.state()) {
    const int64_t n = i / s.state(), j = (i / (s.K * s.V)) % s.HV, d = (i / s.V) % s.K, c = i % s.V;
    const float* row = ht_aug + ((n * s.HV + j) * s.K + d) * A;
    float x = row[c];
    if (n == head)
      for (int64_t e = 0; e < s.K; ++e) x += row[s.V + e] * S[(j * s.K + e) * s.V + c];
    ht_local[state_at(s, n, j, d, c)] = x;
  }
}

}  // namespace

void chain_aug_inputs(const Layout& L, const StateDims& s, const void* v, DType dt, int64_t v_row, int64_t v_head,
                      void* v_aug, const float* h0_local, float* h0_aug, void* stream) {
  const int64_t n = std::max(L.rows * s.HV * (s.V + s.K), L.N * s.HV * s.K * (s.V + s.K));
  aug_inputs_kernel<<<blocks_for(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(L, s, v, dt, v_row, v_head,
                                                                                       v_aug, h0_local, h0_aug);
  LINATTN_CUDA_CHECK_LAUNCH();
}

void chain_tail_record(const Layout& L, const StateDims& s, const float* ht, bool aug, float* rec, void* stream) {
  tail_record_kernel<<<blocks_for(s.HV * s.K * (s.K + s.V)), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      L, s, ht, aug, rec);
  LINATTN_CUDA_CHECK_LAUNCH();
}

void to_dtype(const float* src, void* dst, DType dt, int64_t n, void* stream) {
  if (n == 0) return;
  to_dtype_kernel<<<blocks_for(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(src, dst, dt, n);
  LINATTN_CUDA_CHECK_LAUNCH();
}

void chain_aug_output(const Layout& L, const StateDims& s, const void* o_aug, DType adt, void* o, DType odt,
                      int64_t o_row, int64_t o_head, const float* S, bool simt, void* stream) {
  if (L.rows == 0) return;
  aug_output_kernel<<<blocks_for(L.rows * s.HV * s.V), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      L, s, o_aug, adt, o, odt, o_row, o_head, S, simt);
  LINATTN_CUDA_CHECK_LAUNCH();
}

void chain_aug_states(const Layout& L, const StateDims& s, const float* ht_aug, const float* S, float* ht_local,
                      void* stream) {
  if (L.N * s.state() == 0) return;
  aug_states_kernel<<<blocks_for(L.N * s.state()), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(L, s, ht_aug, S,
                                                                                                   ht_local);
  LINATTN_CUDA_CHECK_LAUNCH();
}

}  // namespace linattn::parallel::dev
