// V-slice 32 instance of the pipelined wgmma fused forward (opt-in LINATTN_CUDA_WGP_VS=32; the warpgroups
// are gdn_fused_wgp_vs32.cuh's, the layout and loaders gdn_fused_wgp_common.cuh's with VS 32). Its own
// translation unit, so the default instances in gdn_fused_wgp.cu compile as before.
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "cuda/common/launch.h"
#include "cuda/gdn/gdn_fused_wg.h"
#include "cuda/gdn/gdn_fused_wgp_vs32.cuh"

namespace linattn::cuda {
namespace {
using namespace wgp;

// One CTA per (32 columns of v, value head j, sequence n): WG0 the state chain on S [key][v], WG1 the output.
template <class T, bool KDA>
__global__ void __launch_bounds__(kThreads, 1) gdn_fused_wgp_vs32_kernel(GdnFwdParams p, GdnChunkWs ws) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* base = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  WgpSmem32<T, KDA>& s = *reinterpret_cast<WgpSmem32<T, KDA>*>(base);
  const int tid = threadIdx.x, t = tid & 127;
  const int v0 = blockIdx.x * 32, j = blockIdx.y, h = j / (p.HV / p.H);
  const int64_t n = ws_sequence(ws, blockIdx.z);
  int64_t bos, eos;
  seq_bounds(p, n, bos, eos);
  const int nchunks = static_cast<int>((eos - bos + kBT - 1) / kBT);
  if (tid < 128) state_warpgroup_vs32<T, KDA>(s, p, ws, n, bos, eos, nchunks, h, j, v0, t);
  else output_warpgroup_vs32<T, KDA>(s, p, ws, bos, eos, nchunks, h, j, v0, t);
}

static_assert(sizeof(WgpSmem32<__nv_bfloat16, false>) + 1024 <= 227 * 1024 &&
                  sizeof(WgpSmem32<__nv_bfloat16, true>) + 1024 <= 227 * 1024,
              "gdn fused (pipelined, V-slice 32): shared memory per CTA over the sm_90 limit");

std::atomic<int64_t> g_vs32_launches{0};

template <class T, bool KDA>
void launch_t(const GdnFwdParams& p, const GdnChunkWs& ws, cudaStream_t stream) {
  launch(gdn_fused_wgp_vs32_kernel<T, KDA>, dim3(p.V / 32, p.HV, p.N), dim3(kThreads), sizeof(WgpSmem32<T, KDA>) + 1024,
         stream, p, ws);
}

}  // namespace

int64_t gdn_fused_wgp_vs32_launches() { return g_vs32_launches.load(); }

void launch_gdn_fused_wgp_vs32(const GdnFwdParams& p, const GdnChunkWs& ws, cudaStream_t stream) {
  g_vs32_launches.fetch_add(1);
  const bool bf = p.io == ElemType::kBF16;
  if (p.kda) bf ? launch_t<__nv_bfloat16, true>(p, ws, stream) : launch_t<__half, true>(p, ws, stream);
  else bf ? launch_t<__nv_bfloat16, false>(p, ws, stream) : launch_t<__half, false>(p, ws, stream);
}

}  // namespace linattn::cuda
