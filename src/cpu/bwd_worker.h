// One worker of the CPU chunk backward: its fp32 chunk buffers and the two sweeps of one
// (sequence, value head) task (chunk_bwd.h describes the algorithm, ALGORITHMS.md 3.1 / 4 the
// math). Row-major buffers sized for BT rows; `n` (<= BT) is the number of valid rows of the
// current chunk, so padding rows of a partial chunk are never formed, let alone exponentiated.
// State buffers are K-major [K, V]; the per-chunk slots hold S_c^T [V, K] and V^ [n, V].
#pragma once
#include <cstddef>
#include <cstdint>

#include "cpu/chunk_bwd.h"

namespace linattn::cpu::bwd {

// The worker's fp32 buffers (row-major, BT rows each unless noted).
struct WorkerBufs {
  // Chunk inputs after the in-kernel transforms.
  float *q, *k, *v, *dout;              // [BT,K] [BT,K] [BT,V] [BT,V]
  float *q_rstd, *k_rstd;               // [BT]
  float *beta, *dbeta_draw;             // [BT]
  float *g, *dg_draw, *dg_dA;           // [BT, gw]
  double* gam;                          // [BT, gw] chunk-local inclusive cumsum of g
  float *eg, *egl, *egL;                // [BT, gw] e^gam, [BT, gw] e^(gamL - gam), [gw] e^gamL
  float* D;                             // [BT, BT] GDN: e^(gam_i - gam_j) for j <= i, else 0
  float* earg;                          // [BT * max(K, BT)] exponent arguments
  // Forward quantities.
  float *kbg, *kg, *qg, *vb;            // [BT,K] beta e^gam k, [BT,K] e^(gamL-gam) k, [BT,K] e^gam q, [BT,V] beta v
  float *aqk, *L, *ainv;                // [BT, BT]: scale (q k E) lower, L strictly lower, (I+L)^-1
  float* w;                             // [BT, K]
  // Backward.
  float *dvh, *dq, *dk, *dw, *x, *y;    // [BT,V] [BT,K] [BT,K] [BT,K] [BT,K] [BT,V]
  float *dka, *r;                       // [BT, K] column- and row-side intra terms of dk
  float *daqk, *dA, *dL, *t1;           // [BT, BT]
  float* dgam;                          // [BT, K] channelwise d gam (GDN sums over K)
  float *dbeta, *dgtok;                 // [BT], [BT, gw]
  float* tmp;                           // [max(K,V,BT) ^ 2] transposes
  float *S, *dS;                        // [K, V]
  float* slots;                         // [max_chunks][V*K + BT*V]: S_c^T then V^_c
};

// Carves the buffers from `base` (or only counts when base is null); returns floats used.
size_t carve_worker(const ChunkBwdParams& p, int64_t max_chunks, float* base, WorkerBufs* out);

// Per-task reductions: dA_log and ddt_bias partial sums of one (sequence, value head).
struct TaskPartials {
  double* dA_log = nullptr;    // [1]
  double* ddt_bias = nullptr;  // [gate width]
};

// dst[i, :] = f[i] * src[i, :] (gw == 1) or f[i, :] * src[i, :] (gw == cols). May alias.
void scale_rows(int n, int cols, const float* f, int gw, const float* src, float* dst);

class Worker {
 public:
  // `mem` holds carve_worker(p, max_chunks, nullptr, ..) floats (64-byte aligned).
  // dqk_acc: fp32 [B*T, HV, K] x 2 (dq then dk) when G > 1, else null.
  Worker(const ChunkBwdParams& p, float* mem, int64_t max_chunks, float* dqk_acc);

  // Task: sequence n (index of its states), rows [bos, bos + len), value head hv.
  void run(int64_t n, int64_t bos, int64_t len, int64_t hv, TaskPartials part);

 private:
  // Loads the chunk's rows [row0, row0 + n) (k, v, g, beta; q and d_o when `bwd`), applies the
  // in-kernel transforms and forms the gate factors, L, A^-1, W (and U, Aqk).
  void prepare(int64_t row0, int n, bool bwd);
  void load(int64_t row0, int n, bool bwd);
  void gates(int n);
  void intra_fwd(int n, bool with_aqk);  // L (and Aqk): GDN by D, KDA channelwise
  void intra_bwd(int n);                 // dq += .., dka, r (see .cc), dbeta
  void solve(int n);                     // Ainv = (I + L)^-1
  void fwd_chunk(int n, float* S, float* slot_st, float* slot_vh, bool update_state);
  void bwd_chunk(int n, const float* st, const float* vh, float* dS);
  void finish_rows(int64_t row0, int n, TaskPartials part);
  void load_state(const BwdBuf& src, int64_t n, float* S);  // S [K, V]; zeros when absent
  void store_state(const BwdOut& dst, int64_t n, const float* S);

  const ChunkBwdParams& p_;
  int K_, V_, BT_, gw_;
  int64_t hv_ = 0, hq_ = 0;
  int64_t max_chunks_;
  float* dqk_acc_;
  WorkerBufs b_;
};

}  // namespace linattn::cpu::bwd
