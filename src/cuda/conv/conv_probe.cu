// Copy-bandwidth probe (conv_probe.h; `linattn conv-probe`). Methods, all over `bytes` (multiple of 64 KiB):
//   memcpy / memset            cudaMemcpyAsync D2D / cudaMemsetAsync (write only)
//   read / write               grid-stride 16-byte ld.global (xor-reduced) / st.global, 4 blocks of 256 per SM
//   stride_v{4,8}_u{U}[_cs]    grid-stride copy: each thread moves U items of 16 (v4) or 32 (v8: two adjacent
//                              16-byte words) contiguous bytes in flight, loads then stores; _cs: st.global.cs;
//                              4 blocks of 256 per SM (2 when U x item >= 256 bytes)
//   phase_{P}k_nb{N}_{st|cs|bulk}  block-level phases: a persistent grid (resident blocks x SMs) walks P KiB
//                              chunks; a chunk is read by 16-byte cp.async into shared memory (all in flight),
//                              then written (16-byte st.global / st.global.cs by the thread that loaded the
//                              word, or cp.async.bulk stores of 16 KiB pieces by thread 0); N buffers: 1 =
//                              strict read-then-write phases per block, 2 = the next chunk's reads in flight
//                              while a chunk is written (the v10 forward's pbuf)
//   gphase_{P}k[_nomem]        grid-wide phases: one cooperative grid (resident blocks x SMs) reads a P KiB
//                              chunk per block, grid barrier, writes it, grid barrier: ~SMs x P KiB read, then
//                              written, GPU-wide (DRAM sees separate read and write phases if L2 lets it);
//                              _nomem: the same barriers without the copies (their cost)
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>

#include "cuda/common/device_info.h"
#include "cuda/common/launch.h"
#include "cuda/conv/conv_common.cuh"
#include "cuda/conv/conv_probe.h"

namespace linattn::cuda::conv {
namespace {

constexpr int kPT = 256;  // threads per block of the copy kernels

// Coherent (not .nc) loads with a memory clobber: ptxas may sink .nc loads past stores (it did: U = 16 kept 32
// registers, so far fewer than 16 loads were in flight); coherent loads keep their place before the stores.
__device__ __forceinline__ uint4 ld16(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
  return v;
}
// Volatile asm for the stores as well as the loads: a thread's loads of a step are all issued before its first
// store.
__device__ __forceinline__ void st16(uint4* p, uint4 v, bool cs) {
  if (cs)
    asm volatile("st.global.cs.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
                 : "memory");
  else
    asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
                 : "memory");
}

__global__ void probe_read(const uint4* __restrict__ a, size_t n, unsigned* out) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  unsigned s = 0;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const uint4 v = ld16(a + i);
    s ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (s == 0x9E3779B9u) *out = s;  // keeps the loads; practically never stores
}

__global__ void probe_write(uint4* __restrict__ b, size_t n) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    b[i] = make_uint4(static_cast<unsigned>(i), 1u, 2u, 3u);
}

// Items of V 16-byte words; a thread copies U items (U x V words) per step: all loads, then all stores.
template <int U, int V, bool kCs>
__global__ void probe_stride(const uint4* __restrict__ a, uint4* __restrict__ b, size_t n) {
  const size_t items = n / V, stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + (U - 1) * stride < items; i += U * stride) {
    uint4 v[U][V];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int w = 0; w < V; ++w) v[u][w] = ld16(a + (i + u * stride) * V + w);
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int w = 0; w < V; ++w) st16(b + (i + u * stride) * V + w, v[u][w], kCs);
  }
  for (; i < items; i += stride)
#pragma unroll
    for (int w = 0; w < V; ++w) b[i * V + w] = a[i * V + w];
}

// Block-level phases (see the file comment). P16: 16-byte words per chunk; st: 0 st.global, 1 .cs, 2 bulk.
__global__ void __launch_bounds__(kPT) probe_phase(const uint4* __restrict__ a, uint4* __restrict__ b, size_t n,
                                                   int P16, int nbuf, int st) {
  extern __shared__ __align__(128) uint4 psm[];
  const int tid = static_cast<int>(threadIdx.x);
  const size_t G = gridDim.x, bid = blockIdx.x, nchunks = (n + P16 - 1) / P16;
  const size_t mine = bid < nchunks ? (nchunks - 1 - bid) / G + 1 : 0;
  auto units = [&](size_t j) {
    const size_t base = (bid + j * G) * P16;
    return n - base < static_cast<size_t>(P16) ? static_cast<int>(n - base) : P16;
  };
  auto issue = [&](size_t j) {
    const size_t base = (bid + j * G) * P16;
    uint4* s = psm + (j % nbuf) * P16;
    const int m = units(j);
    for (int u = tid; u < m; u += kPT) cp_async16(s + u, a + base + u);
  };
  auto store = [&](size_t j) {
    const size_t base = (bid + j * G) * P16;
    const uint4* s = psm + (j % nbuf) * P16;
    const int m = units(j);
    if (st == 2) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
      if (tid == 0) {
        for (int u = 0; u < m; u += 1024) {  // 16 KiB pieces
          const int w = m - u < 1024 ? m - u : 1024;
          asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(b + base + u),
                       "r"(static_cast<unsigned>(__cvta_generic_to_shared(s + u))), "r"(w * 16)
                       : "memory");
        }
        asm volatile("cp.async.bulk.commit_group;" ::: "memory");
      }
#endif
    } else {
      for (int u = tid; u < m; u += kPT) st16(b + base + u, s[u], st == 1);
    }
  };
  auto wait_read = [&] {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if (st == 2 && tid == 0) asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
#endif
  };
  for (int k = 0; k < nbuf - 1; ++k) {
    if (static_cast<size_t>(k) < mine) issue(k);
    cp_async_commit();
  }
  for (size_t j = 0; j < mine; ++j) {
    if (nbuf == 1) {
      wait_read();
      __syncthreads();
      issue(j);
      cp_async_commit();
    }
    if (nbuf == 3) cp_async_wait<1>();
    else cp_async_wait<0>();
    if (nbuf > 1) wait_read();
    __syncthreads();
    if (nbuf > 1) {
      if (j + nbuf - 1 < mine) issue(j + nbuf - 1);
      cp_async_commit();
    }
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if (st == 2) asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
    __syncthreads();
    store(j);
  }
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if (st == 2 && tid == 0) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
#endif
}

// Every block arrives (release: its writes before it are visible GPU-wide), then waits for all (acquire).
__device__ __forceinline__ void grid_barrier(unsigned* count, unsigned& target) {
  __syncthreads();
  if (threadIdx.x == 0) {
    target += gridDim.x;
    asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(count) : "memory");
    unsigned v = 0;
    do {
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(count) : "memory");
    } while (v < target);
  }
  __syncthreads();
}

// Grid-wide phases (cooperative launch: every block resident). count = 0 at the start.
__global__ void __launch_bounds__(kPT) probe_gphase(const uint4* __restrict__ a, uint4* __restrict__ b, size_t n,
                                                    int P16, int mem, unsigned* count) {
  extern __shared__ __align__(128) uint4 gsm[];
  const int tid = static_cast<int>(threadIdx.x);
  const size_t G = gridDim.x, nchunks = (n + P16 - 1) / P16, rounds = (nchunks + G - 1) / G;
  unsigned target = 0;
  for (size_t r = 0; r < rounds; ++r) {
    const size_t chunk = r * G + blockIdx.x, base = chunk * P16;
    const int m = chunk < nchunks ? (n - base < static_cast<size_t>(P16) ? static_cast<int>(n - base) : P16) : 0;
    if (mem) {
      for (int u = tid; u < m; u += kPT) cp_async16(gsm + u, a + base + u);
      cp_async_commit();
      cp_async_wait<0>();
    }
    grid_barrier(count, target);  // every block's reads are done
    if (mem)
      for (int u = tid; u < m; u += kPT) b[base + u] = gsm[u];
    grid_barrier(count, target);  // every block's writes are visible GPU-wide
  }
}

// Spinner for the engine test: 2 blocks of 1024 threads per SM take every thread slot, so no other block runs.
__global__ void __launch_bounds__(1024, 2) probe_spin(const volatile unsigned* flag, volatile unsigned* started,
                                                      unsigned long long limit_ns) {
  if (threadIdx.x == 0) {
    started[blockIdx.x] = 1;
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (*flag == 0 && t - t0 < limit_ns);
  }
  __syncthreads();
}

struct Method {
  int kind = -1;  // 0 memcpy, 1 memset, 2 read, 3 write, 4 stride, 5 phase, 6 gphase
  int v = 1, u = 1, cs = 0;           // stride
  int pk = 0, nbuf = 1, st = 0;       // phase / gphase: KiB per chunk, buffers, store mode; gphase: st = mem
};

Method parse(const std::string& s) {
  Method m;
  int a = 0, b = 0;
  char c[16] = {0};
  if (s == "memcpy") m.kind = 0;
  else if (s == "memset") m.kind = 1;
  else if (s == "read") m.kind = 2;
  else if (s == "write") m.kind = 3;
  else if (std::sscanf(s.c_str(), "stride_v%d_u%d%15s", &a, &b, c) >= 2) {
    m.kind = 4, m.v = a, m.u = b, m.cs = std::string(c) == "_cs";
    LINATTN_CHECK((a == 4 || a == 8) && (b == 1 || b == 4 || b == 8 || b == 16) && (c[0] == 0 || m.cs),
                  "conv-probe: unknown method ", s);
  } else if (std::sscanf(s.c_str(), "phase_%dk_nb%d_%15s", &a, &b, c) == 3) {
    m.kind = 5, m.pk = a, m.nbuf = b;
    const std::string t(c);
    m.st = t == "st" ? 0 : (t == "cs" ? 1 : (t == "bulk" ? 2 : -1));
    LINATTN_CHECK(a >= 4 && a <= 224 && a % 4 == 0 && b >= 1 && b <= 3 && m.st >= 0 && a * b <= 224,
                  "conv-probe: unknown method ", s);
  } else if (std::sscanf(s.c_str(), "gphase_%dk%15s", &a, c) >= 1) {
    m.kind = 6, m.pk = a, m.st = std::string(c) == "_nomem" ? 0 : 1;
    LINATTN_CHECK(a >= 4 && a <= 224 && a % 4 == 0 && (c[0] == 0 || m.st == 0), "conv-probe: unknown method ", s);
  }
  LINATTN_CHECK(m.kind >= 0, "conv-probe: unknown method ", s);
  return m;
}

template <class K>
int resident(K kernel, int threads, size_t smem) {
  if (smem > 48 * 1024) ensure_dynamic_smem(reinterpret_cast<const void*>(kernel), smem);
  prefer_max_shared_carveout(reinterpret_cast<const void*>(kernel));  // the occupancy the launch then gets
  int occ = 0;
  LINATTN_CONV_CUDA_OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kernel, threads, smem));
  return occ > 0 ? occ : 1;
}

// Grid blocks and dynamic shared memory of a kernel method.
void shape_of(const Method& m, int* blocks, size_t* smem) {
  const int sms = current_device_info().sm_count;
  *smem = 0;
  if (m.kind == 5) {
    *smem = static_cast<size_t>(m.pk) * 1024 * m.nbuf;
    *blocks = resident(probe_phase, kPT, *smem) * sms;
  } else if (m.kind == 6) {
    *smem = static_cast<size_t>(m.pk) * 1024;
    *blocks = resident(probe_gphase, kPT, *smem) * sms;
  } else {
    *blocks = (m.kind == 4 && m.u * m.v * 16 >= 256 ? 2 : 4) * sms;
  }
}

template <int U, int V>
void launch_stride(const Method& m, int blocks, const uint4* a, uint4* b, size_t n, cudaStream_t st) {
  if (m.cs) probe_stride<U, V, true><<<blocks, kPT, 0, st>>>(a, b, n);
  else probe_stride<U, V, false><<<blocks, kPT, 0, st>>>(a, b, n);
}

unsigned* scratch() {  // the grid barrier's counter and the read kernel's sink, allocated once
  static std::mutex mu;
  static unsigned* p = nullptr;
  std::lock_guard<std::mutex> lock(mu);
  if (!p) LINATTN_CONV_CUDA_OK(cudaMalloc(&p, 64));
  return p;
}

}  // namespace

std::vector<std::string> probe_methods() {
  return {"memcpy",          "memset",           "read",             "write",           "stride_v4_u1",
          "stride_v4_u4",    "stride_v4_u4_cs",  "stride_v4_u16",    "stride_v8_u4",    "stride_v8_u8",
          "phase_8k_nb1_st", "phase_32k_nb1_st", "phase_32k_nb1_cs", "phase_32k_nb1_bulk", "phase_32k_nb2_st",
          "phase_32k_nb2_bulk", "phase_64k_nb1_st", "phase_64k_nb1_bulk", "phase_192k_nb1_st", "gphase_192k",
          "gphase_192k_nomem", "gphase_64k",     "gphase_96k"};
}

std::string probe_config(const std::string& method, size_t bytes) {
  const Method m = parse(method);
  if (m.kind <= 1) return "runtime call, " + std::to_string(bytes) + " bytes";
  int blocks = 0;
  size_t smem = 0;
  shape_of(m, &blocks, &smem);
  return "grid " + std::to_string(blocks) + " x " + std::to_string(kPT) + " threads, dynamic smem " +
         std::to_string(smem) + (m.kind == 6 ? ", cooperative" : "");
}

double probe_run(const std::string& method, const void* src, void* dst, size_t bytes, void* stream) {
  const Method m = parse(method);
  LINATTN_CHECK(bytes % 65536 == 0 && bytes > 0, "conv-probe: bytes expected a multiple of 64 KiB, got ", bytes);
  const auto st = static_cast<cudaStream_t>(stream);
  const auto* a = static_cast<const uint4*>(src);
  auto* b = static_cast<uint4*>(dst);
  const size_t n = bytes / 16;
  const double rw = 2.0 * static_cast<double>(bytes);
  if (m.kind == 0) {
    LINATTN_CONV_CUDA_OK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, st));
    return rw;
  }
  if (m.kind == 1) {
    LINATTN_CONV_CUDA_OK(cudaMemsetAsync(dst, 3, bytes, st));
    return static_cast<double>(bytes);
  }
  int blocks = 0;
  size_t smem = 0;
  shape_of(m, &blocks, &smem);
  if (m.kind == 2) {
    probe_read<<<blocks, kPT, 0, st>>>(a, n, scratch() + 8);
  } else if (m.kind == 3) {
    probe_write<<<blocks, kPT, 0, st>>>(b, n);
  } else if (m.kind == 4) {
    if (m.v == 4 && m.u == 1) launch_stride<1, 1>(m, blocks, a, b, n, st);
    else if (m.v == 4 && m.u == 4) launch_stride<4, 1>(m, blocks, a, b, n, st);
    else if (m.v == 4 && m.u == 8) launch_stride<8, 1>(m, blocks, a, b, n, st);
    else if (m.v == 4) launch_stride<16, 1>(m, blocks, a, b, n, st);
    else if (m.u == 1) launch_stride<1, 2>(m, blocks, a, b, n, st);
    else if (m.u == 4) launch_stride<4, 2>(m, blocks, a, b, n, st);
    else launch_stride<8, 2>(m, blocks, a, b, n, st);  // v8 with u8 / u16: 8 items of 32 bytes
  } else if (m.kind == 5) {
    probe_phase<<<blocks, kPT, smem, st>>>(a, b, n, m.pk * 64, m.nbuf, m.st);
  } else {
    unsigned* count = scratch();
    LINATTN_CONV_CUDA_OK(cudaMemsetAsync(count, 0, 4, st));
    int p16 = m.pk * 64, mem = m.st;
    void* args[] = {&a, &b, const_cast<size_t*>(&n), &p16, &mem, &count};
    LINATTN_CONV_CUDA_OK(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(probe_gphase), dim3(blocks),
                                                     dim3(kPT), args, smem, st));
  }
  LINATTN_CONV_CUDA_OK(cudaGetLastError());
  return m.kind == 2 || m.kind == 3 ? static_cast<double>(bytes) : (m.kind == 6 && m.st == 0 ? 0.0 : rw);
}

ProbeEngine probe_memcpy_engine(const void* src, void* dst, size_t bytes) {
  ProbeEngine r;
  const int sms = current_device_info().sm_count;
  int occ = 0;
  LINATTN_CONV_CUDA_OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, probe_spin, 1024, 0));
  r.spin_blocks = (occ > 0 ? occ : 1) * sms;
  unsigned *hflag = nullptr, *hstart = nullptr, *dflag = nullptr, *dstart = nullptr;
  LINATTN_CONV_CUDA_OK(cudaHostAlloc(reinterpret_cast<void**>(&hflag), 64, cudaHostAllocMapped));
  LINATTN_CONV_CUDA_OK(cudaHostAlloc(reinterpret_cast<void**>(&hstart), 4 * r.spin_blocks, cudaHostAllocMapped));
  LINATTN_CONV_CUDA_OK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dflag), hflag, 0));
  LINATTN_CONV_CUDA_OK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dstart), hstart, 0));
  volatile unsigned* vflag = hflag;
  volatile unsigned* vstart = hstart;
  *vflag = 0;
  for (int i = 0; i < r.spin_blocks; ++i) vstart[i] = 0;
  cudaStream_t s1, s2;
  LINATTN_CONV_CUDA_OK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  LINATTN_CONV_CUDA_OK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  LINATTN_CONV_CUDA_OK(cudaEventCreate(&e0));
  LINATTN_CONV_CUDA_OK(cudaEventCreate(&e1));
  for (int i = 0; i < 3; ++i) {  // solo (the last of 3)
    LINATTN_CONV_CUDA_OK(cudaEventRecord(e0, s2));
    LINATTN_CONV_CUDA_OK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s2));
    LINATTN_CONV_CUDA_OK(cudaEventRecord(e1, s2));
    LINATTN_CONV_CUDA_OK(cudaEventSynchronize(e1));
  }
  LINATTN_CONV_CUDA_OK(cudaEventElapsedTime(&r.solo_ms, e0, e1));
  probe_spin<<<r.spin_blocks, 1024, 0, s1>>>(dflag, dstart, 300000000ull);
  LINATTN_CONV_CUDA_OK(cudaGetLastError());
  const auto t0 = std::chrono::steady_clock::now();
  auto since = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  while (since() < 0.1) {  // every spinner resident (they stop by themselves after 300 ms)
    int k = 0;
    for (int i = 0; i < r.spin_blocks; ++i) k += vstart[i] != 0;
    r.spin_started = k;
    if (k == r.spin_blocks) break;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  LINATTN_CONV_CUDA_OK(cudaEventRecord(e0, s2));
  LINATTN_CONV_CUDA_OK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s2));
  LINATTN_CONV_CUDA_OK(cudaEventRecord(e1, s2));
  const auto t1 = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count() < 0.05) {
    const cudaError_t q = cudaEventQuery(e1);
    if (q == cudaSuccess) {
      r.memcpy_done_while_full = true;
      break;
    }
    LINATTN_CONV_CUDA_OK(q == cudaErrorNotReady ? cudaSuccess : q);
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  // Done only counts while every spinner still ran: if they timed out (300 ms), the SMs were free again.
  r.memcpy_done_while_full = r.memcpy_done_while_full && since() < 0.25 && r.spin_started == r.spin_blocks;
  *vflag = 1;
  LINATTN_CONV_CUDA_OK(cudaDeviceSynchronize());
  LINATTN_CONV_CUDA_OK(cudaEventElapsedTime(&r.memcpy_ms, e0, e1));
  cudaEventDestroy(e0), cudaEventDestroy(e1), cudaStreamDestroy(s1), cudaStreamDestroy(s2);
  cudaFreeHost(hflag), cudaFreeHost(hstart);
  return r;
}

}  // namespace linattn::cuda::conv
