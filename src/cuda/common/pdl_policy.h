// LINATTN_CUDA_PDL=auto (session 13; the default since session 14): Programmatic Dependent Launch only where an op's
// kernel chain is short. Measured on the H200 at 46d13bb: PDL helps tier 3 (2/8 1x32768 eager 0.306 -> 0.299 ms) and
// the short forward (16/32 512 tokens 49.4 -> 48.3 us graph) but costs ~2% where a prep of many waves feeds the chain
// (16/64 1x32768 eager 1.175 -> 1.196 ms). Under auto, an op that launches a long chain holds a PdlLongChain scope on
// its thread and pdl_enabled() (launch.h) is false inside it; "1" and "0" ignore the scope.
#pragma once
#include <cstdint>

namespace linattn::cuda {

class PdlLongChain {
 public:
  explicit PdlLongChain(bool long_chain);  // marks this thread's launches as a long chain while alive (if true)
  ~PdlLongChain();
  PdlLongChain(const PdlLongChain&) = delete;
  PdlLongChain& operator=(const PdlLongChain&) = delete;

 private:
  bool prev_;
};

// LINATTN_CUDA_PDL=auto.
bool pdl_auto();

// A chain is long when its first big grid (`ctas` CTAs at `ctas_per_sm` per SM) runs more than two waves.
bool pdl_long_chain(int64_t ctas, int ctas_per_sm, int sm_count);

}  // namespace linattn::cuda
