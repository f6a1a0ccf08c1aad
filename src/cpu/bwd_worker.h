// One worker of the CPU chunk backward: its fp32 chunk buffers and the two sweeps of one
// (sequence, value head) task (chunk_bwd.h describes the algorithm, ALGORITHMS.md 3.1 / 4 the
// math). Row-major buffers sized for BT rows; `n` (<= BT) is the number of valid rows of the
// current chunk, so padding rows of a partial chunk are never formed, let alone exponentiated.
// Sign / scale conventions (no alpha in the GEMMs): dos = scale * dO, aqk = (q k E) without the
// scale, kbgn = -beta e^gam k, xn = -X = -A^-T dW = Y S^T.
// The state is K-major [K, V]; each chunk's slot keeps S_c^T [V, K], V^ [BT, V],
// Xf = beta v - kbg S_c = (I + L) V^ [BT, V] and A^-1 [BT, BT] from the forward sweep.
#pragma once
#include <cstddef>
#include <cstdint>

#include "cpu/chunk_bwd.h"

namespace linattn::cpu::bwd {

struct WorkerBufs {
  // Chunk inputs after the in-kernel transforms.
  float *q, *k, *v, *dos;               // [BT,K] [BT,K] [BT,V] [2BT,V] (dos = scale * dO; Y after its n rows)
  float *q_rstd, *k_rstd;               // [BT]
  float *beta, *dbeta_draw;             // [BT]
  float *g, *dg_draw, *dg_dA;           // [BT, gw] log-decay and its local derivatives
  float *eg, *egl, *egL;                // [BT, gw] e^gam, [BT, gw] e^(gamL - gam), [gw] e^gamL
  double* gam;                          // [BT] GDN chunk-local cumsum of g
  float* D;                             // [BT, BT] GDN e^(gam_i - gam_j) for j <= i, else 0
  float* ag;                            // [BT, K] KDA e^g per token and channel
  float *rho, *kap;                     // [BT, K] KDA e^(gam_i - gam_first(i)), e^(gam_last(j) - gam_j)
  float *bp, *px;                       // [4, K] KDA sub-chunk decay products, [K] pair factor
  float *z, *zo;                        // [32, K], [32, max(16, K)] KDA sub-chunk pair operands
  float *qr, *bkr;                      // [BT, K] KDA q rho, beta k rho
  float *irho, *colfac, *col, *zc;      // [BT, K] KDA 1/rho (safe sub-chunks), column factors, k colfac, products
  // Forward quantities.
  float *kbgn, *kg, *qg, *vb;           // -beta e^gam k (rows n.. of qg), [BT,K] e^(gamL-gam) k, [2BT,K] e^gam q, [BT,V] beta v
  float *aqk, *Ln;                      // [BT, BT] q k E (lower), -L = -beta k k E (strictly lower)
  float* kT;                            // [K, BT]
  // Backward.
  float *dvh, *dq, *dk, *xn, *y;        // [BT,V] [2BT,K] (xn after its n rows) [BT,K], xn, y (rows n.. of dos)
  float *dka, *r;                       // [BT, K] column- and row-side intra terms of dk
  float *daqk, *dA, *dL, *t1;           // [BT, BT]
  float* dgam;                          // [BT, K] channelwise d gam (GDN sums it)
  float *dbeta, *dgtok, *last;          // [BT], [BT, gw], [K]
  float* tmp;                           // [max(K, V, BT)^2] transposes
  float *S, *dS;                        // [K, V]
  float* slots;                         // [max_chunks][slot_floats]
  float* gacc;                          // [2][max_chunks * BT, K] GVA in-task dq / dk sums, or null
  uint32_t *pk_a, *pk_b;                // bf16 pair packings of the two operands, or null
};

// Floats of one chunk slot: S^T [V, K], V^ [BT, V], Xf [BT, V], A^-1 [BT, BT].
int64_t slot_floats(const ChunkBwdParams& p);

// Carves the buffers from `base` (or only counts when base is null); returns floats used.
// `group_acc`: room for the in-task GVA sums (tasks own a whole q/k head group).
size_t carve_worker(const ChunkBwdParams& p, int64_t max_chunks, bool group_acc, float* base,
                    WorkerBufs* out);

// The grouped dq or dk of token row `row`, q/k head hq, from its fp32 sum over the group `s` [K]
// (overwritten): L2-norm backward (the input row normalized as the worker does) and the store.
void finish_qk_row(const ChunkBwdParams& p, float* s, const BwdBuf& x, const BwdOut& out,
                   int64_t row, int64_t hq, float* tmp);

// Per-task reductions: dA_log and ddt_bias partial sums of one (sequence, value head).
struct TaskPartials {
  double* dA_log = nullptr;    // [1]
  double* ddt_bias = nullptr;  // [gate width]
};

// dst[i, :] = f[i] * src[i, :] (gw == 1) or f[i, :] * src[i, :] (gw == cols). May alias.
void scale_rows(int n, int cols, const float* f, int gw, const float* src, float* dst);

class Worker {
 public:
  // `mem` holds carve_worker(p, max_chunks, group_acc, nullptr, ..) floats (64-byte aligned).
  // dqk_acc: fp32 [rows, HV, K] x 2 (dq then dk) for GVA with per-value-head tasks, else null.
  Worker(const ChunkBwdParams& p, float* mem, int64_t max_chunks, bool group_acc, float* dqk_acc);

  // Task: sequence n (index of its states), rows [bos, bos + len), value head hv.
  void run(int64_t n, int64_t bos, int64_t len, int64_t hv, TaskPartials part);
  // GVA task owning q/k head hq: its G value heads in order (dq / dk summed in the worker's
  // fp32 group buffer, same order as the global group sum), then the group's dq / dk rows.
  // part(hv) gives the partials of value head hv.
  template <class PartFn>
  void run_group(int64_t n, int64_t bos, int64_t len, int64_t hq, PartFn part) {
    const int64_t G = p_.f.HV / p_.f.H;
    for (int64_t g = 0; g < G; ++g) {
      group_first_ = g == 0;
      task_bos_ = bos;
      run(n, bos, len, hq * G + g, part(hq * G + g));
    }
    finish_group(bos, len, hq);
  }

 private:
  // Loads the chunk's rows [row0, row0 + n) (k, v, g, beta; q and d_o when `bwd`), applies the
  // in-kernel transforms, forms the gate factors and kbgn, kg, vb (qg when `bwd`).
  void prepare(int64_t row0, int n, bool bwd);
  void load_inputs(int64_t row0, int n, bool bwd);
  void gate_transform(int n);
  void gates(int n);
  void intra_fwd(int n, bool aqk);  // L (forward sweep) or aqk (reverse sweep)
  void intra_bwd(int n);            // dq += .., dka, r, dbeta += k.r'
  // KDA (bwd_kda_intra.cc)
  void kda_block_factors(int n);              // diag_safe_, irho
  int kda_columns(int sc, int s0, int m);     // colfac / col of row sub-chunk sc; returns columns
  void kda_intra_fwd(int n, bool with_aqk);
  void kda_intra_bwd(int n);
  void kda_diag_fwd_exact(int s0, int s1, bool with_aqk);
  void kda_diag_bwd_exact(int s0, int s1);
  void solve(int n, float* ainv);   // (I + L)^-1 from Ln
  void fwd_chunk(int n, float* S, float* slot, bool update_state);
  void bwd_chunk(int n, const float* slot, float* dS);
  void finish_rows(int64_t row0, int n, TaskPartials part);
  void finish_group(int64_t bos, int64_t len, int64_t hq);
  // A state-sized product: mm(), or mm_bf16() when p.bf16_dot (same operand conventions). Used
  // for X S, kg dS, [dO; Y] S^T and [qg; kbgn]^T [dO; Y]; the state update and V^ dS^T stay fp32
  // (measured: bf16 there doubles the dA_log / ddt_bias error, past the bf16 bars).
  void big(int M, int N, int Kd, const float* A, int64_t lda, bool a_t, const float* B, int64_t ldb,
           float* C, int64_t ldc, bool acc, float c_scale = 1.0f, const float* row_scale = nullptr);
  void load_state(const BwdBuf& src, int64_t n, float* S);  // S [K, V]; zeros when absent
  void store_state(const BwdOut& dst, int64_t n, const float* S);

  const ChunkBwdParams& p_;
  int K_, V_, BT_, gw_;
  int64_t hv_ = 0, hq_ = 0;
  int64_t max_chunks_;
  bool stream_slots_ = false;
  bool diag_safe_[4] = {};     // KDA: sub-chunk decay small enough for the 1/rho factorization  // non-temporal slot writes (the task's slots exceed L2)
  float* dqk_acc_;
  bool group_first_ = true;    // in-task GVA: the first value head writes the sums, the rest add
  int64_t task_bos_ = 0;
  WorkerBufs b_;
};

}  // namespace linattn::cpu::bwd
