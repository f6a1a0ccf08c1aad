// Tier-3 "fold" (opt-in LINATTN_CUDA_SEG_COMBINE=fold; cuda/seg/tier3.cc, docs/perf-notes.md "The combine folded
// into pass 2"): the forward's combine kernel is dropped and each pass-2 CTA of the tma3 chain (V-slice 64) walks
// its own segment's initial state in a prologue, restricted to its 64 state columns (M acts on the key rows only):
// h = the sequence's h0 (or 0); for the earlier slots i of the sequence whose flags & skip == 0: h = M_i h + S_loc_i
// (mma.sync 3xTF32, the tc combine's precision); h is stored to h0_seg (what the combine wrote) before the chain
// reads it from there. Slot n of the virtual problem is sequence n / segments, slot n % segments.
#pragma once
#include <cstdint>

#include "cuda/gdn/gdn_params.h"

namespace linattn::cuda {

struct SegFold {  // by value to the fold kernel
  const float* M = nullptr;      // [slots, HV, K, K] fp32 K-major (the state pass's transitions)
  const float* S = nullptr;      // [slots, HV, K, V] fp32 K-major (local final states)
  const int32_t* flags = nullptr;  // [slots] (cuda/seg/seg_pass.h kSeg* bits)
  int32_t skip = 0;              // a slot with flags & skip makes no step (empty, the sequence's last)
  int segments = 1;              // slots per sequence
  const void* h0 = nullptr;      // the caller's initial states ([N, HV, K, V] or V-first), optional
  ElemType h0_type = ElemType::kF32;
  bool h0_v_first = false;
  float* h0_seg = nullptr;       // [slots, HV, K, V] fp32 K-major out; the pass's p.h0 (same buffer)
};

// Host side of a fold request (gdn_fwd's `fold`): where the fused launch cannot take the fold instance (another
// chain mode, V-slice 32, not the pipelined kernel), gdn_fwd calls fallback(ctx, stream) before that launch (tier 3:
// the combine kernel), so h0_seg is always written before the pass reads it.
struct SegFoldRequest {
  SegFold dev;
  void (*fallback)(void* ctx, void* stream) = nullptr;
  void* ctx = nullptr;
};

// Launches of the fold instance so far in this process (gdn_fused_wgp.cu; tests check it ran).
int64_t gdn_fused_wgp_fold_launches();

}  // namespace linattn::cuda
