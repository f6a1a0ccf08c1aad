// What "copy bandwidth" is on this GPU (the denominator of the conv's "% of copy"): bytes read +
// written per second of a 1 GiB -> 1 GiB copy by (a) cudaMemcpyAsync D2D (what `linattn bench`
// measures), (b) copy kernels of 16-byte loads / stores: grid-stride over the whole range
// (k x SMs blocks of 256 threads, U loads in flight per thread), with and without
// ld.global.nc.L1::no_allocate + st.global.cs, and one contiguous range per block (a persistent
// grid of k x SMs blocks), (c) read-only (a sum) and write-only (cudaMemsetAsync) bandwidth,
// (d) bulk copies (sm_90 TMA engine, cp.async.bulk): one thread per block moves kChunk-byte chunks
// (grid-stride) global -> shared (an mbarrier per stage of a kS ring) -> global (bulk store groups).
// p50 of --iters event-timed calls, interleaved over --rounds. Standalone (built by
// scripts/gpu-convfwd7 / gpu-convtma --pack with nvcc); prints one JSON line per method.
//   copy_bw [MiB=1024] [rounds=3] [iters=20]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#define OK(x)                                                                        \
  do {                                                                               \
    cudaError_t e_ = (x);                                                            \
    if (e_ != cudaSuccess) {                                                         \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                  \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

__device__ __forceinline__ uint4 ld_nc(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
__device__ __forceinline__ void st_cs(uint4* p, uint4 v) {
  asm volatile("st.global.cs.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

// Grid-stride copy of n 16-byte words, U words in flight per thread.
template <int U, bool kHint>
__global__ void copy_stride(const uint4* __restrict__ a, uint4* __restrict__ b, size_t n) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + (U - 1) * stride < n; i += U * stride) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = kHint ? ld_nc(a + i + u * stride) : a[i + u * stride];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (kHint) st_cs(b + i + u * stride, v[u]);
      else b[i + u * stride] = v[u];
    }
  }
  for (; i < n; i += stride) b[i] = a[i];
}

// One contiguous range per block (persistent grid), U words in flight per thread.
template <int U>
__global__ void copy_chunk(const uint4* __restrict__ a, uint4* __restrict__ b, size_t n) {
  const size_t per = (n + gridDim.x - 1) / gridDim.x;
  const size_t lo = per * blockIdx.x, hi = lo + per < n ? lo + per : n;
  size_t i = lo + threadIdx.x;
  for (; i + (U - 1) * blockDim.x < hi; i += U * blockDim.x) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = ld_nc(a + i + u * blockDim.x);
#pragma unroll
    for (int u = 0; u < U; ++u) st_cs(b + i + u * blockDim.x, v[u]);
  }
  for (; i < hi; i += blockDim.x) b[i] = a[i];
}

__device__ __forceinline__ unsigned sa(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }

// Bulk copy: chunk j of this block goes through stage j % kS; stage s is reloaded once the store
// issued from it finished reading (wait_group.read 1: all but the newest store).
template <int kChunk, int kS>
__global__ void copy_bulk(const char* __restrict__ a, char* __restrict__ b, size_t bytes) {
  extern __shared__ __align__(128) unsigned char sm[];
  __shared__ __align__(8) uint64_t bar[kS];
  if (threadIdx.x != 0) return;
  for (int s = 0; s < kS; ++s) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(sa(&bar[s])));
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  const size_t nchunks = bytes / kChunk, first = blockIdx.x, stride = gridDim.x;
  const size_t mine = first < nchunks ? (nchunks - first + stride - 1) / stride : 0;
  auto load = [&](size_t j) {
    const int s = static_cast<int>(j % kS);
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(sa(&bar[s])), "r"(kChunk) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     sa(sm + s * kChunk)),
                 "l"(a + (first + j * stride) * kChunk), "r"(kChunk), "r"(sa(&bar[s]))
                 : "memory");
  };
  for (size_t j = 0; j < kS && j < mine; ++j) load(j);
  for (size_t j = 0; j < mine; ++j) {
    const int s = static_cast<int>(j % kS);
    asm volatile(
        "{\n.reg .pred p;\nW%=:\nmbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n@!p bra W%=;\n}\n" ::"r"(
            sa(&bar[s])),
        "r"(static_cast<unsigned>((j / kS) & 1))
        : "memory");
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(b + (first + j * stride) * kChunk),
                 "r"(sa(sm + s * kChunk)), "r"(kChunk)
                 : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    if (j >= 1 && j - 1 + kS < mine) {  // reload the stage of chunk j - 1
      asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
      load(j - 1 + kS);
    }
  }
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

__global__ void read_sum(const uint4* __restrict__ a, size_t n, unsigned* out) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  unsigned s = 0;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const uint4 v = ld_nc(a + i);
    s ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (s == 0x12345678u) *out = s;  // keeps the loads; practically never stores
}

int main(int argc, char** argv) {
  const size_t mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1024;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 3, iters = argc > 3 ? std::atoi(argv[3]) : 20;
  const size_t bytes = mib << 20, n = bytes / 16;
  int sms = 0;
  OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  uint4 *a, *b;
  unsigned* flag;
  OK(cudaMalloc(&a, bytes));
  OK(cudaMalloc(&b, bytes));
  OK(cudaMalloc(&flag, 4));
  OK(cudaMemset(a, 1, bytes));
  OK(cudaMemset(b, 2, bytes));
  cudaStream_t st;
  OK(cudaStreamCreate(&st));
  struct M {
    std::string name;
    double bytes_moved;
    std::function<void()> fn;
    std::vector<float> ms;
  };
  std::vector<M> ms;
  const double rw = 2.0 * static_cast<double>(bytes);
  ms.push_back({"memcpy_d2d", rw, [&] { OK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, st)); }, {}});
  for (int k : {4, 8, 16}) {
    ms.push_back({"stride_u1_plain_" + std::to_string(k) + "xSM", rw,
                  [&, k] { copy_stride<1, false><<<k * sms, 256, 0, st>>>(a, b, n); }, {}});
    ms.push_back({"stride_u4_plain_" + std::to_string(k) + "xSM", rw,
                  [&, k] { copy_stride<4, false><<<k * sms, 256, 0, st>>>(a, b, n); }, {}});
    ms.push_back({"stride_u4_nc_cs_" + std::to_string(k) + "xSM", rw,
                  [&, k] { copy_stride<4, true><<<k * sms, 256, 0, st>>>(a, b, n); }, {}});
    ms.push_back({"chunk_u4_nc_cs_" + std::to_string(k) + "xSM", rw,
                  [&, k] { copy_chunk<4><<<k * sms, 256, 0, st>>>(a, b, n); }, {}});
  }
  auto bulk = [&](auto kern, int chunk, int stages, int k) {
    const int smem = chunk * stages;
    OK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    ms.push_back({"bulk_" + std::to_string(chunk >> 10) + "k_x" + std::to_string(stages) + "_" + std::to_string(k) +
                      "xSM",
                  rw, [=, &st] { kern<<<k * sms, 32, smem, st>>>(reinterpret_cast<const char*>(a),
                                                                reinterpret_cast<char*>(b), bytes); },
                  {}});
  };
  bulk(copy_bulk<16384, 4>, 16384, 4, 2);
  bulk(copy_bulk<16384, 4>, 16384, 4, 3);
  bulk(copy_bulk<8192, 6>, 8192, 6, 4);
  bulk(copy_bulk<32768, 6>, 32768, 6, 1);
  ms.push_back({"read_only_8xSM", static_cast<double>(bytes),
                [&] { read_sum<<<8 * sms, 256, 0, st>>>(a, n, flag); }, {}});
  ms.push_back({"write_only_memset", static_cast<double>(bytes), [&] { OK(cudaMemsetAsync(b, 3, bytes, st)); }, {}});
  cudaEvent_t e0, e1;
  OK(cudaEventCreate(&e0));
  OK(cudaEventCreate(&e1));
  for (int r = 0; r < rounds; ++r)
    for (M& m : ms) {
      m.fn(), m.fn();
      OK(cudaStreamSynchronize(st));
      for (int i = 0; i < iters; ++i) {
        OK(cudaEventRecord(e0, st));
        m.fn();
        OK(cudaEventRecord(e1, st));
        OK(cudaEventSynchronize(e1));
        float t = 0;
        OK(cudaEventElapsedTime(&t, e0, e1));
        m.ms.push_back(t);
      }
    }
  OK(cudaGetLastError());
  for (M& m : ms) {
    std::sort(m.ms.begin(), m.ms.end());
    const double p50 = m.ms[m.ms.size() / 2];
    std::printf("{\"kind\":\"copy\",\"method\":\"%s\",\"mib\":%zu,\"sms\":%d,\"n\":%zu,\"p50_ms\":%.6f,\"min_ms\":%.6f,"
                "\"gbps\":%.1f}\n",
                m.name.c_str(), mib, sms, m.ms.size(), p50, static_cast<double>(m.ms.front()),
                m.bytes_moved / (p50 * 1e-3) * 1e-9);
  }
  return 0;
}
