// GDN prep v6 (opt-in, LINATTN_CUDA_GDN_PREP=v6, read per call; gdn_prep.cu, perf-notes "Prep v6"): the
// default (v5) prep with the row scales of a warp's rows interleaved, the inverse merged by column chains and a
// value head's Ab stores in one phase with the next head's L: 3 CTA barriers per value head instead of 6; the
// same arithmetic in the same order, so bitwise the default's workspace (Ab, Ai, P, gam, rq, rk, the tma3
// scale records). Applies wherever the 3-CTAs-per-SM instances run (P written first, or no P); v2 is v2.
#pragma once
#include <cstdint>

namespace linattn::cuda {

bool gdn_prep_v6_env();
// Launches of a v6 instance so far in this process (tests check it ran).
int64_t gdn_prep_v6_launches();
// Resident CTAs per SM of the bf16 BT-64 v6 kernel (P written) for G value heads per q/k head (4 at G <= 8).
int gdn_prep_v6_ctas_per_sm(int G);

}  // namespace linattn::cuda
