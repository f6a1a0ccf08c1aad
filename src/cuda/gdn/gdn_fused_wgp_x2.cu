// Two CTAs per SM of the V-slice 32 pipelined forward (opt-in LINATTN_CUDA_WGP_X2=1, GDN only; gdn_fused_wg.h):
// the warpgroups of gdn_fused_wgp_vs32.cuh on a smaller layout, WG0's k / v / Ab ring 2 stages (one chunk
// ahead), WG1's q / P ring 1 stage (loaded once chunk c's products are done) and one S^T / V^T hand-off buffer
// (freed in two halves: kBarEmpty after Q S, kBarEmptyV after P V^), ~109 KB, so that one CTA's dependent
// wgmma / barrier round trips overlap the other's. Same arithmetic in the same order: the V-slice 32 bits.
// KDA's stage (+ kgl) does not fit twice in 113 KB.
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "core/util.h"
#include "cuda/common/launch.h"
#include "cuda/gdn/gdn_fused_wg.h"
#include "cuda/gdn/gdn_fused_wgp_vs32.cuh"

namespace linattn::cuda {
namespace {
using namespace wgp;

template <class T>
using WgpSmemX2 = WgpSmemT<T, false, 32, 2, 1, 1>;

template <class T>
__global__ void __launch_bounds__(kThreads, 2) gdn_fused_wgp_x2_kernel(GdnFwdParams p, GdnChunkWs ws) {
  extern __shared__ unsigned char smem_raw[];
  vs32_cta<T, false, WgpSmemX2<T>>(p, ws, smem_raw);
}

// Two CTAs per SM: 2 x (dynamic + 1 KB reserved) <= 228 KB.
static_assert(2 * (sizeof(WgpSmemX2<__nv_bfloat16>) + 1024 + 1024) <= 228 * 1024,
              "gdn fused (pipelined, two CTAs per SM): shared memory per CTA over half an SM");

std::atomic<int64_t> g_x2_launches{0};

template <class T>
void launch_t(const GdnFwdParams& p, const GdnChunkWs& ws, cudaStream_t stream) {
  prefer_max_shared_carveout(reinterpret_cast<const void*>(gdn_fused_wgp_x2_kernel<T>));
  launch(gdn_fused_wgp_x2_kernel<T>, dim3(p.V / 32, p.HV, p.N), dim3(kThreads), sizeof(WgpSmemX2<T>) + 1024, stream, p,
         ws);
}

}  // namespace

bool gdn_fused_wgp_x2_enabled() { return env_or("LINATTN_CUDA_WGP_X2", "") == "1"; }

int64_t gdn_fused_wgp_x2_launches() { return g_x2_launches.load(); }

void launch_gdn_fused_wgp_x2(const GdnFwdParams& p, const GdnChunkWs& ws, cudaStream_t stream) {
  LINATTN_CHECK(!p.kda, "gdn fused (pipelined, two CTAs per SM): GDN only");
  g_x2_launches.fetch_add(1);
  if (p.io == ElemType::kBF16) launch_t<__nv_bfloat16>(p, ws, stream);
  else launch_t<__half>(p, ws, stream);
}

}  // namespace linattn::cuda
