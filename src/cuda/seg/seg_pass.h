// Exact sequence splitting on one CUDA device (tier 3; docs/perf-notes.md "Sequence parallelism"),
// also the building blocks of CUDA context parallelism (src/parallel). A segment is rows
// [bos, eos) of one sequence, chunked from bos; segments are chunk-aligned from their sequence's
// start, so they walk exactly tier 1's chunks. The state map of a segment is affine:
//   S(eos) = M S(bos) + S_loc       (M: K x K transition, S_loc: final state from S(bos) = 0)
//   dS(bos) = M^T dS(eos) + dS_loc  (dS_loc: state gradient at bos from a zero gradient at eos)
// All buffers are device memory; states fp32 K-major [slot, HV, K, V], transitions fp32
// [slot, HV, K, K] (M[row][col]: row = output key row). Nothing here reads the device from the
// host, allocates or synchronizes: every call is capture-safe with fixed capacity, so a graph
// replays any new layout of cu_seqlens.
// Slots: sequence n owns `s` consecutive slots [n s, n s + s) (s = segments per sequence); slot
// n s + i holds rows [bos + i len, min(bos + (i + 1) len, eos)), len = max(round_up(min_segment,
// BT), round_up(ceil(L / s), BT)), L = eos - bos (the CPU rule, cpu/seg_table.cc); the slots past
// the sequence's last rows are empty at eos. Supported: the chunked CUDA forward's shapes
// (K = 128, V % 32 == 0, bf16 / fp16, BT 32 / 64, 16-byte aligned; GDN and KDA).
// Interface stability: the signatures below are kept stable for src/parallel (cpcuda).
#pragma once
#include <cstddef>
#include <cstdint>

#include "cuda/gdn/gdn_params.h"

namespace linattn::cuda::seg {

// Slot flags (SegTable::flags).
constexpr int32_t kSegEmpty = 1;  // no rows
constexpr int32_t kSegFirst = 2;  // holds the sequence's first rows (slot n s)
constexpr int32_t kSegLast = 4;   // holds the sequence's last rows (slot n s for an empty sequence)

struct SegTable {
  int64_t N = 0;            // sequences
  int segments = 1;         // slots per sequence (s)
  int64_t num = 0;          // N * s
  int32_t* cu = nullptr;    // [num + 1] virtual cu_seqlens: slot i = rows [cu[i], cu[i + 1])
  int32_t* flags = nullptr; // [num] kSeg* bits
  int32_t* last = nullptr;  // [N] slot with the sequence's last rows (n s for an empty sequence)
};

// Bytes of a table for N sequences x s slots (256-byte aligned pieces) and its carving.
size_t seg_table_bytes(int64_t N, int segments);
SegTable carve_seg_table(void* mem, int64_t N, int segments);

// Builds the table on `stream` from p's layout (p.cu_seqlens int32 / int64 on the device, clamped
// like the kernels clamp it, or fixed length p.T_seq). One launch, fixed grid. Needs
// p.T_total < 2^31 (int32 virtual cu_seqlens).
void build_seg_table(const GdnFwdParams& p, int64_t min_segment, const SegTable& t, void* stream);

// The segments as sequences: p with N = t.num, cu_seqlens = t.cu (int32), fp32 K-major h0 / ht
// (h0_seg / ht_seg, either may be null), state_v_first off. The tensors q, k, v, g, beta, o stay.
GdnFwdParams virtual_params(const GdnFwdParams& p, const SegTable& t, const float* h0_seg, float* ht_seg);

// Pass 1: S_loc and M of every segment of `v` (segments as sequences: v.cu_seqlens the segment
// bounds, v.N their number; v's h0 / o / ht are ignored) whose flags & skip == 0 (flags may be
// null: every segment). One prep launch and one fused launch: the pipelined wgmma kernel's
// state-pass mode where it is eligible (cuda/gdn/gdn_fused_wgp.cu, 128 columns of [S | M] per CTA;
// LINATTN_CUDA_SEG_WGMMA=0 opts out), else gdn_fused.cu with K / VS extra transition CTAs per head.
// The workspace holds the forward's prep intermediates.
size_t state_pass_workspace_bytes(const GdnFwdParams& v, int sm_count);
void state_pass(const GdnFwdParams& v, const int32_t* flags, int32_t skip,
                float* S_loc,  // [v.N, HV, K, V] out
                float* M,      // [v.N, HV, K, K] out
                int sm_count, void* workspace, size_t workspace_bytes, void* stream);

// state_pass in two halves, for callers that launch between them (tier 3's first-segment
// schedule runs the state pass beside another kernel): the prep over every segment of v, then the
// fused kernel in state-pass mode. state_pass = state_pass_prep + state_pass_fused.
void state_pass_prep(const GdnFwdParams& v, int sm_count, void* workspace, size_t workspace_bytes, void* stream);
void state_pass_fused(const GdnFwdParams& v, const int32_t* flags, int32_t skip, float* S_loc, float* M,
                      int sm_count, void* workspace, size_t workspace_bytes, void* stream);

// Forward combine, per (sequence n, value head, column block), in slot order: h = the initial
// state of n (p.h0 in p's layout and type, or zero); for every slot i of n: h0_seg[i] = h, then,
// unless i is empty or n's last slot, h = M_i h + S_loc_i (fp32).
void combine_forward(const GdnFwdParams& p, const SegTable& t, const float* M, const float* S_loc,
                     float* h0_seg,  // [t.num, HV, K, V] out
                     void* stream);

// Reverse combine: d = n's terminal state gradient (dht in p's state layout / type, or zero when
// null); for the slots of n in reverse: dht_seg[i] = d, then, unless i is empty or n's first slot,
// d = M_i^T d + dS_loc_i.
void combine_reverse(const GdnFwdParams& p, const void* dht, ElemType dht_type, const SegTable& t, const float* M,
                     const float* dS_loc, float* dht_seg,  // [t.num, HV, K, V] out
                     void* stream);

// Environment LINATTN_CUDA_SEG_COMBINE (read per launch) picks the combines' kernel (all three above and below):
// "auto" or unset = the default since session 12: each step on mma.sync in 3xTF32 (seg_combine_tc.cu; ~fp32
// rounding) with 8 state columns per CTA where that grid fits one wave of CTAs, else 16; "ring2" = the previous
// default (seg_kernels.cu: 256 threads, fp32 FMAs in a fixed order, two M buffers); "tc" / "tc8" force 16 / 8
// columns. Any other value is an error (ring3, blk and blk3 were removed in session 12).
// seg_combine_mode: 0 ring2, 1 tc, 2 tc8, 3 auto (throws on a bad value); seg_combine_tc_launches: launches of
// the tensor-core combine (auto / tc / tc8) so far.
int seg_combine_mode();
int64_t seg_combine_tc_launches();

// First-segment schedule (tier3.cc, LINATTN_CUDA_TIER3_FIRST; one sequence: p.N == 1, s >= 2).
// build_first_split: h0_seg[slot 0] = p.h0 (p's layout / type) or zero, and two more virtual
// cu_seqlens over the same s slots: cu_first keeps slot 0's rows and empties every other slot (at
// slot 0's end), cu_rest empties slot 0 (at its end) and keeps the others, so a forward over the
// segments with either table runs only those slots (the empty ones copy h0_seg to ht_seg).
void build_first_split(const GdnFwdParams& p, const SegTable& t, float* h0_seg,  // [t.num, HV, K, V] out (slot 0)
                       int32_t* cu_first, int32_t* cu_rest,                     // [t.num + 1] out each
                       void* stream);
// combine_forward_from_first: h = ht_seg[slot n s] (fp32 K-major: slot 0's true final state, from
// its forward); h0_seg[n s] = h; for the slots i > 0 of n in order: h0_seg[i] = h, then, unless i is
// empty or n's last slot, h = M_i h + S_loc_i.
void combine_forward_from_first(const GdnFwdParams& p, const SegTable& t, const float* M, const float* S_loc,
                                const float* ht_seg,  // [t.num, HV, K, V]
                                float* h0_seg,        // [t.num, HV, K, V] out
                                void* stream);

// out[n, j] (p's state layout: state_v_first, type out_type) = src[slot(n), j] for every
// sequence, slot(n) = t.last[n] (use_last) or n s (the first slot).
void gather_states(const GdnFwdParams& p, const SegTable& t, const float* src, bool use_last, void* out,
                   ElemType out_type, void* stream);

}  // namespace linattn::cuda::seg
