// The per-worker scratch of the chunked forward (count-then-carve: one function both sizes and
// slices it) and the chunk-level steps shared by the GDN (scalar gate) and KDA (per-channel gate)
// paths. Buffers are fp32, row-major; ldk / ldv are K and the split width rounded up to a vector.
// Row i of a chunk is token t0 + i; BT is the chunk capacity, n <= BT the valid rows.
#pragma once
#include <cstdint>

#include "cpu/chunk_params.h"
#include "cpu/gemm.h"
#include "cpu/gemm_bf16.h"

namespace linattn::cpu {

struct ChunkWork {
  int64_t K = 0, vt = 0, ldk = 0, ldv = 0;
  int BT = 64;
  float* S = nullptr;    // [K, ldv] state slice (K-major)
  float* Kc = nullptr;   // [BT, ldk] keys (fp32, normalized)
  float* Qc = nullptr;   // [BT, ldk] queries, = Kc + BT * ldk (stacked: one GEMM serves both)
  float* KT = nullptr;   // [ldk, BT] GDN: Kc^T; KDA: the column-relative keys K''^T
  float* X = nullptr;    // [BT, ldv] V, then beta (V - e^g K S), then V^
  float* KS = nullptr;   // [BT, ldv] K S (gated K for KDA)
  float* QS = nullptr;   // [BT, ldv] Q S, then the output; = KS + BT * ldv
  float* Ln = nullptr;   // [BT, BT] -L (strictly lower, beta-scaled, decayed)
  float* P = nullptr;    // [BT, BT] scale * (M (.) D (.) Q K^T); = Ln + BT * BT
  float* beta = nullptr; // [BT]
  float* gam = nullptr;  // [BT] GDN cumulative log-decay
  float* rs = nullptr;   // [BT] GDN e^{gamma_i}
  float* rd = nullptr;   // [BT] GDN e^{gamma_last - gamma_i}
  // KDA only: [BT, ldk] each.
  float* Ag = nullptr;   // e^{g_t} per channel
  float* Kg = nullptr;   // K (.) e^{gamma}
  float* Qg = nullptr;   // Q (.) e^{gamma}; = Kg + BT * ldk
  float* Kd = nullptr;   // K (.) e^{gamma_last - gamma}
  float* Qr = nullptr;   // Q (.) e^{gamma_i - gamma_{sub-chunk start}}
  float* Kr = nullptr;   // K (.) e^{gamma_i - gamma_{sub-chunk start}}
  float* K2 = nullptr;   // K (.) e^{gamma_{sub-chunk end} - gamma_j} (K'', transposed into KT)
  float* Z = nullptr;    // [32, ldk] one sub-chunk pair's scaled rows
  float* ZO = nullptr;   // [32, 16] its products
  float* xv = nullptr;   // [ldk] decay between a row sub-chunk's start and a column sub-chunk's end
  float* el = nullptr;   // [ldk] state row decay e^{gamma_last}
  float* bp = nullptr;   // [BT / 8, ldk] per-sub-chunk decay products
  float* Br = nullptr;   // [K, BT] earlier sub-chunks' K''^T columns scaled to one row sub-chunk
  // bf16 dot-product mode only (bf16 inputs on AVX512-BF16 builds): operands as bf16 pairs.
  bool bf16 = false;
  int64_t ldk2 = 0;          // ceil(K / 2) rounded up to a vector
  uint32_t* KQ2 = nullptr;   // [2 BT, ldk2] rows of [K; Q] (or [Kg; Qg]), pairs along K
  uint32_t* S2 = nullptr;    // [ldk2, ldv] the state, pairs along K
  uint32_t* KT2 = nullptr;   // [ldk2, BT] GDN: K^T, pairs along K
  uint32_t* U2 = nullptr;    // [BT / 2, ldk] update A: K rows (KDA: Kd), pairs along tokens
  uint32_t* X2 = nullptr;    // [BT / 2, ldv] update B: V^ rows, pairs along tokens
};

// A GEMM on two stacked row blocks: A rows [0, n) and [BT, BT + n) -> C rows likewise (the
// halves are a_half / c_half floats apart). One call over 2 BT rows when the chunk is full.
inline void gemm_stacked(GemmArgs g, int n, int BT, int64_t a_half, int64_t c_half) {
  if (n == BT) {
    g.M = 2 * BT;
    gemm(g);
    return;
  }
  g.M = n;
  gemm(g);
  g.A += a_half;
  g.C += c_half;
  gemm(g);
}

inline void gemm_bf16_stacked(GemmBf16Args g, int n, int BT, int64_t a_half, int64_t c_half) {
  if (n == BT) {
    g.M = 2 * BT;
    gemm_bf16(g);
    return;
  }
  g.M = n;
  gemm_bf16(g);
  g.A += a_half;
  g.C += c_half;
  gemm_bf16(g);
}

// Floats per worker; carve(base) lays the buffers out from `base` (64-byte aligned slices).
int64_t chunk_work_floats(const ChunkParams& p, int64_t vt_max, bool bf16);
ChunkWork carve_chunk_work(const ChunkParams& p, int64_t vt_max, bool bf16, float* base);
// Whether the bf16 dot-product mode runs: asked for, bf16 q / k, and an AVX512-BF16 build.
inline bool use_bf16_dot(const ChunkParams& p, const ChunkSchedule& s) {
  return s.bf16_dot && kHaveBf16Dot && p.qk_dtype == DType::kBF16;
}

// Loads rows [t0, t0 + n) of q, k (fp32, normalized), v (columns [v0, v0 + w.vt)) into
// Qc, Kc, X, beta and the gate (GDN: gam, rs, rd; KDA: Ag = e^g) of value head j.
void prep_rows(const ChunkParams& p, const ChunkWork& w, int64_t t0, int n, int64_t j, int64_t v0);

// KS[n, ncols] = kq S over state columns [0, ncols) (kq [n, ldk]: K, or the gated Kg for KDA);
// `stacked` also forms QS from the query rows BT * ldk past kq. Reads S before the update.
// bf16 mode packs both row blocks into KQ2 and the state into S2 (operands rounded for the
// product only).
void state_read(const ChunkWork& w, int n, int K, int ncols, const float* kq, bool stacked);
// S[K, ncols] <- c_scale S (c_rows: row r times c_rows[r] instead) + ku^T X, ku [n, ldk];
// bf16 mode packs into U2 / X2.
void state_update(const ChunkWork& w, int n, int K, int ncols, const float* ku, float c_scale,
                  const float* c_rows);

// Intra-chunk matrices Ln and P for n valid rows (chunk_intra.cc); rows/cols >= n untouched,
// entries above the diagonal of the first n rows zero.
// bf16 mode: the K K^T / Q K^T products use KQ2 / KT2 (packed here).
void gdn_intra(const ChunkWork& w, int n, float scale);
// KDA: from Ag = e^g builds Kg, Qg, Kd, el (running products, no e^{+gamma} anywhere) and Ln, P
// (sub-chunk pairs as products of decay factors <= 1; diagonal sub-chunks pair by pair).
void kda_intra(const ChunkWork& w, int n, float scale);

}  // namespace linattn::cpu
