// Device kernels of context parallelism on CUDA (cp_dev_*.cu), as host launchers without CUDA
// types (stream = cudaStream_t as void*). Every kernel reads the rank layout on the device
// (Layout: global cu_seqlens and rank row offsets, both device int32 / int64) and clamps what it
// reads, so a captured graph replays any new layout of the same capacity; grids depend only on
// shapes. Sequence n is "on" rank r when its rows meet [off[r], off[r+1]); its head / tail
// rules follow cp_shard.h (an empty sequence belongs to the highest rank whose first row is <=
// its offset). States: fp32, [N, HV, K, V] K-major or [N, HV, V, K] (v_first); records fp32.
#pragma once
#include <cstdint>

#include "linattn/tensor.h"

namespace linattn::parallel::dev {

struct Layout {
  const void* cu = nullptr;  // [N + 1] global cu_seqlens, or null: one sequence of every row
  bool cu64 = false;
  int64_t N = 1;
  const void* off = nullptr;  // [world + 1] rank row offsets
  bool off64 = false;
  int world = 1, rank = 0;
  int64_t rows = 0;  // this rank's rows (host shape; device reads are clamped to it)
};

// vcu[i] = clamp(cu[i] - off[rank], 0, rows), i in [0, N]: this rank's virtual cu_seqlens (sequence
// n keeps index n; sequences elsewhere are empty). seg (optional, int32 [6]): {0, tail_bos, rows,
// 1, tail_skip, 0}: the tail segment as slot 1 of a two-slot table for the state pass (cu [3] then
// flags [2]: slot 0, the rows before the tail, always skipped; tail_skip = 1 without a tail).
void virtual_cu(const Layout& L, int64_t* vcu, int32_t* seg, void* stream);

// dst[n] (E elements, dtype ddt) = src[n] (dtype sdt, or zeros when src is null) for the sequences
// picked; the others get zeros (zero_others) or stay untouched.
enum class Pick { kAll, kStartsHere, kEndsHere };
void copy_states(const Layout& L, Pick pick, bool zero_others, const void* src, DType sdt, void* dst, DType ddt,
                 int64_t E, void* stream);

// dst[i] (dtype dt) = sum over ranks r < parts of all[r * stride + i] (fp64, rank order), i < n.
void sum_ranks(const float* all, int parts, int64_t stride, int64_t n, void* dst, DType dt, void* stream);

// ---- conv (W-slot states [N, D, W], slot W-1 newest)
// rec [W, D] = the last W rows of this rank's x (rows before the first: 0); x rows strided.
void conv_tail_rows(const void* x, DType dt, int64_t row_stride, int64_t rows, int64_t D, int64_t W, float* rec,
                    void* stream);
// h0_local [N, D, W] fp32: the head sequence's virtual initial state (slot s = global row
// off[rank] - W + s, from the rank holding it in all [world, W, D], or the sequence's own initial
// state before its first row); every other sequence: h0 (dtype h0dt) or zeros.
void conv_head_state(const Layout& L, const float* all, const void* h0, DType h0dt, int64_t D, int64_t W,
                     float* h0_local, void* stream);
// rec [D, W] = dh0_local[head] (zeros without a head).
void conv_head_grad(const Layout& L, const float* dh0_local, int64_t D, int64_t W, float* rec, void* stream);
// Adds every later rank's head gradient (all [world, D, W]) onto this rank's dx rows it came from.
void conv_scatter_dx(const Layout& L, const float* all, void* dx, DType dt, int64_t row_stride, int64_t D, int64_t W,
                     void* stream);
// dinit[n] = dh0_local[n] plus the later ranks' head gradients that reach the initial-state slots
// of n, for the sequences starting here; zeros for the others.
void conv_dinit(const Layout& L, const float* all, const float* dh0_local, void* dinit, DType dt, int64_t D, int64_t W,
                void* stream);

// ---- GDN / KDA (records: M [HV, K, K] then S [HV, K, V], fp32 K-major; REC = HV K (K + V))
struct StateDims {
  int64_t HV = 0, K = 0, V = 0;
  bool v_first = false;
  constexpr int64_t rec() const { return HV * K * (K + V); }
  constexpr int64_t state() const { return HV * K * V; }
};
// The head's initial state chained over the earlier ranks of its sequence (records at
// all + r * stride: M [HV, K, K] then S [HV, K, V]), from the rank it starts on: S = M_r h0 + S_r
// with h0 = h0_local[head] (relative records), or S = S_r (absolute: that rank's true final
// state); then S <- M_r S + S_r for each rank it crosses. Written to h0_local[head] (op layout),
// or, with S_out, to S_out [HV, K, V] fp32 K-major (zeros without a head).
void chunk_head_state(const Layout& L, const StateDims& s, const float* all, int64_t stride, float* h0_local,
                      bool absolute, float* S_out, void* stream);
// dht_local[tail] = the state gradient at this rank's end: from dht_local[tail] (the sequence's
// terminal gradient, already there), back over the later ranks r of the tail's sequence:
// d <- D_r for the rank it ends on (its dS record already includes its terminal gradient),
// then d <- M_r^T d + D_r for the ranks it crosses. mall: the forward records (M at
// mall + r * mstride), dall: the dS records (dall + r * dstride, [HV K V]).
void chunk_tail_grad(const Layout& L, const StateDims& s, const float* mall, int64_t mstride, const float* dall,
                     int64_t dstride, float* dht_local, void* stream);
// rec [HV K V] = src[head] in K-major fp32 (zeros without a head); src in the op's state layout.
void chunk_head_record(const Layout& L, const StateDims& s, const float* src, float* rec, void* stream);

// Token-by-token state pass (any shape / dtype / option): S_loc and M of this rank's tail
// segment (seg from virtual_cu: rows [seg[1], seg[2]) unless seg[3]) into rec.
struct TokenPass {
  int64_t H = 0, HV = 0, K = 0, V = 0;
  DType io = DType::kBF16, g_dt = DType::kF32, beta_dt = DType::kF32;
  bool kda = false, l2norm = false, gate_in_kernel = false, beta_sigmoid = false, neg_eigval = false;
  bool has_lower_bound = false;
  float lower_bound = 0.f;
  const void* k = nullptr;  // [rows, H, K]
  const void* v = nullptr;  // [rows, HV, V]
  const void* g = nullptr;  // [rows, HV] (KDA [rows, HV, K])
  const void* beta = nullptr;
  const float* A_log = nullptr;
  const float* dt_bias = nullptr;
};
void token_state_pass(const TokenPass& p, const int32_t* seg, float* rec, void* stream);

// ---- chained forward (cp_dev_chain.cu; A = V + K)
// v_aug [rows, HV, A] (dtype dt) = [v | 0], v element (t, j, c) at v + t * v_row + j * v_head + c;
// h0_aug [N, HV, K, A] fp32 K-major = [0 | I] for this rank's head, [h0_local[n] | 0] otherwise
// (h0_local in the op's state layout).
void chain_aug_inputs(const Layout& L, const StateDims& s, const void* v, DType dt, int64_t v_row, int64_t v_head,
                      void* v_aug, const float* h0_local, float* h0_aug, void* stream);
// rec (M [HV, K, K] then S [HV, K, V]) of this rank's tail, from the forward's final states: aug:
// ht [N, HV, K, A] K-major, S = the first V columns, and M = the last K when the tail does not
// start on this rank (else absolute: S is the true final state, M unwritten); !aug: ht in the
// op's state layout (S only). Nothing without a tail.
void chain_tail_record(const Layout& L, const StateDims& s, const float* ht, bool aug, float* rec, void* stream);
void to_dtype(const float* src, void* dst, DType dt, int64_t n, void* stream);
// o[t, j, :] = o_aug[t, j, :V] for the rows of this rank's sequences (padding rows untouched),
// with simt also + o_aug[t, j, V:] S[j] over the head's rows (S fp32 K-major [HV, K, V]).
void chain_aug_output(const Layout& L, const StateDims& s, const void* o_aug, DType adt, void* o, DType odt,
                      int64_t o_row, int64_t o_head, const float* S, bool simt, void* stream);
// ht_local[n] (op layout) = ht_aug[n][:, :V], the head's + ht_aug[head][:, V:] S.
void chain_aug_states(const Layout& L, const StateDims& s, const float* ht_aug, const float* S, float* ht_local,
                      void* stream);

}  // namespace linattn::parallel::dev
