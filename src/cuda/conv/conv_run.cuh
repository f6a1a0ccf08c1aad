// Long-run short conv (v6, both passes; conv_fwd_run.cu / conv_bwd_run.cu). A block of kThreads
// threads owns a 1 KiB slice of every row (512 bf16 / fp16 or 256 fp32 channels: 4 bytes per
// thread) and one group of consecutive rows; each thread walks ALL rows of its group in order
// with the x window (and, backward, the dz window) in registers, so the W - 1 halo rows are
// paid once per group (hundreds of rows), not once per 16. Rows reach shared memory in
// kRunRows-row tiles by 16-byte cp.async through a kRunStages-deep ring (one barrier per tile);
// a tile whose rows all lie inside one sequence (and away from its ends) runs a fully unrolled
// step without range tests, the rest runs a general per-row step. Applies to layouts whose row
// slices are 16-byte aligned, D a multiple of 16 / sizeof(E), flat rows (varlen, B = 1, or batch
// stride = T * row stride: row r at r * st) and W in {2, 3, 4}; grids depend only on shapes.
#pragma once
#include "cuda/conv/conv_stream.cuh"

namespace linattn::cuda::conv {

constexpr int kRunRows = 8;    // rows per tile (the unrolled fast step), default
constexpr int kRunStages = 4;  // tiles in the ring: 3 in flight while one is computed, default
constexpr int kRunRowBytes = kThreads * 4;

template <class E>
constexpr int run_span() {  // channels per block
  return kRunRowBytes / static_cast<int>(sizeof(E));
}
template <class E>
constexpr int run_chans() {  // channels per thread
  return 4 / static_cast<int>(sizeof(E));
}
// Dynamic shared memory of a block with `tensors` staged tensors, kR-row tiles, kS stages.
inline size_t run_smem_bytes(int tensors, int kR = kRunRows, int kS = kRunStages) {
  return static_cast<size_t>(kS) * tensors * kR * kRunRowBytes;
}

inline bool run_flat(const ConvRows& t, const ConvParams& p) {
  return !t.data || p.varlen || p.B == 1 || t.sb == p.T * t.st;
}

// Whether the long-run kernels take an eligible layout: LINATTN_CONV_CUDA_PATH=run forces them,
// =tiles / =stream exclude them; otherwise when the grid has >= kRunMinBlocks blocks (below that,
// short inputs keep the v3 tiles' finer split: more blocks for few rows).
constexpr int64_t kRunMinBlocks = 384;
inline bool use_run(int64_t blocks) {
  static const std::string v = env_or("LINATTN_CONV_CUDA_PATH", "");
  if (v == "run") return true;
  if (v == "tiles" || v == "stream") return false;
  return blocks >= kRunMinBlocks;
}

// 16-byte cp.async to a shared address (sm_80+; the kernels run on sm_90a).
__device__ __forceinline__ void cp_async16_s(unsigned smem, const void* gmem) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem), "l"(gmem));
#endif
}

// The same with an L2 cache policy (a createpolicy value; conv_fwd_run.cu's hinted variants), and
// optionally the L2::256B prefetch-size hint.
__device__ __forceinline__ void cp_async16_s_hint(unsigned smem, const void* gmem, uint64_t pol, bool pf256) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if (pf256)
    asm volatile("cp.async.cg.shared.global.L2::cache_hint.L2::256B [%0], [%1], 16, %2;\n" ::"r"(smem), "l"(gmem),
                 "l"(pol));
  else
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;\n" ::"r"(smem), "l"(gmem), "l"(pol));
#endif
}

// createpolicy for code 0 (evict_normal), 1 (evict_first), 2 (evict_last), whole-line fraction 1
// (the hinted variants' x / residual loads and y stores, cp.async and bulk copies alike).
__device__ __forceinline__ uint64_t l2_policy(int code) {
  uint64_t pol = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if (code == 1) asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
  else if (code == 2) asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
  else asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(pol));
#endif
  return pol;
}

// One staged tensor's copy: the thread moves 16-byte chunk (tid % 64) of tile rows tid / 64 + 4 m;
// src walks the tensor one tile per issue (rows past the group are not copied). Addresses are
// set up once: per tile an issue is kR / 4 predicated cp.async and one pointer step.
template <class E, int kR = kRunRows>
struct RunCopy {
  static_assert(kR % 4 == 0, "4-row passes");
  const char* src;
  int64_t step4;  // bytes of 4 rows
  unsigned dst;   // shared address of the chunk in stage 0
  int ro;         // the thread's first tile row
  bool on;        // the chunk's channels are < D

  __device__ __forceinline__ void init(const ConvRows& t, int r0, int c0, int64_t D, const void* stage0) {
    const int q = static_cast<int>(threadIdx.x) % 64;
    ro = static_cast<int>(threadIdx.x) / 64;
    const int c = c0 + q * (16 / static_cast<int>(sizeof(E)));
    on = t.data != nullptr && c < D;
    step4 = 4 * t.st * static_cast<int64_t>(sizeof(E));
    src = on ? reinterpret_cast<const char*>(static_cast<const E*>(t.data) + static_cast<int64_t>(r0 + ro) * t.st + c)
             : nullptr;
    dst = static_cast<unsigned>(__cvta_generic_to_shared(stage0)) + ro * kRunRowBytes + q * 16;
  }
  // Copies rows [0, nrows) of the tile into the stage `off` bytes past stage 0, then steps src on.
  __device__ __forceinline__ void issue(unsigned off, int nrows) {
    if (on) {
#pragma unroll
      for (int m = 0; m < kR / 4; ++m)
        if (ro + 4 * m < nrows) cp_async16_s(dst + off + m * 4 * kRunRowBytes, src + m * step4);
      src += (kR / 4) * step4;
    }
  }
  // issue() with the L2 cache policy pol (and the 256-byte prefetch hint) on every copy.
  __device__ __forceinline__ void issue_hint(unsigned off, int nrows, uint64_t pol, bool pf256) {
    if (on) {
#pragma unroll
      for (int m = 0; m < kR / 4; ++m)
        if (ro + 4 * m < nrows) cp_async16_s_hint(dst + off + m * 4 * kRunRowBytes, src + m * step4, pol, pf256);
      src += (kR / 4) * step4;
    }
  }
};

// kS-deep cp.async ring over ntiles (block-uniform) tiles: issue(k, s) copies tile k into stage s
// (no commit), body(k, s) computes it. Tile k + kS - 1 goes into the stage of tile k - 1 right
// after the barrier that ends every thread's work on k - 1.
template <int kS = kRunStages, class Issue, class Body>
__device__ __forceinline__ void run_pipeline(int ntiles, Issue&& issue, Body&& body) {
  static_assert(kS >= 2, "a ring of at least two stages");
#pragma unroll
  for (int k = 0; k < kS - 1; ++k) {
    if (k < ntiles) issue(k, k);
    cp_async_commit();
  }
  for (int k = 0; k < ntiles; ++k) {
    cp_async_wait<kS - 2>();
    __syncthreads();
    const int nk = k + kS - 1;
    if (nk < ntiles) issue(nk, nk % kS);
    cp_async_commit();
    body(k, k % kS);
  }
}

// seq_bounds in 32 bits (rows < 2^31, checked at launch): the kernels keep them in registers.
__device__ __forceinline__ void seq_bounds32(const ConvParams& p, int n, int* bos, int* eos) {
  int64_t b, e;
  seq_bounds(p, n, &b, &e);
  *bos = static_cast<int>(b);
  *eos = static_cast<int>(e);
}

// x window (rows u - H .. u - 1, oldest first) of kC channels at row u of sequence n (first row
// bos): x rows from global memory, rows before bos from initial_state slots (zero without it).
template <class E, int kW, int kC>
__device__ __forceinline__ void run_x_window(float (*xw)[kW > 1 ? kW - 1 : 1], const ConvParams& p, int u, int bos,
                                             int n, int c) {
  constexpr int H = kW - 1;
#pragma unroll
  for (int k = 0; k < H; ++k) {
    const int q = u - H + k;
    float v[kC];
    if (q >= bos) {
      load_lanes<E, kC>(static_cast<const E*>(p.x.data) + static_cast<int64_t>(q) * p.x.st + c, v);
    } else {
#pragma unroll
      for (int j = 0; j < kC; ++j)
        v[j] = p.h0 ? load_small(p.h0, p.h0_dtype, (static_cast<int64_t>(n) * p.D + c + j) * kW + kW + q - bos) : 0.0f;
    }
#pragma unroll
    for (int j = 0; j < kC; ++j) xw[j][k] = v[j];
  }
}

// Forward variants for A/B runs (v7 / v8, opt-in; conv_fwd_run.cu): LINATTN_CONV_CUDA_FWD, parsed
// once per distinct value, a comma-separated list of key=value: ring=8x4|8x6|16x3|16x4|32x3 (rows per
// tile x stages; 16 x 4: 3 blocks per SM, 32 x 3: 2),
// ld=normal|first|last and st=normal|first|last (L2 eviction policy of the x / residual copies and
// of the y stores), pf=256 (the copies' L2::256B prefetch hint), blocks=N (target grid) or waves=N
// (N x the resident blocks of the device);
// "v6" alone = the default kernel and grid. Set and non-empty, it forces the long-run path
// wherever eligible (as LINATTN_CONV_CUDA_PATH=run). A ring, a policy or pf selects the hinted W = 4
// instances (other W keep the 8 x 4 ring without hints); blocks / waves alone keep the v6 kernel.
// v8 (conv_fwd_tma.cu): "tma" selects the bulk-copy kernel (sm_90 only; elsewhere the v6 kernel):
// x / residual row slices by cp.async.bulk into an mbarrier ring, y staged in shared memory and
// written by cp.async.bulk stores; x=bulk|cp (cp: v6's 16-byte cp.async), y=bulk|st16|direct
// (st16: 16-byte st.global from the staged tile; direct: v6's 4-byte stores), ring=8x4|8x6|16x3,
// blocks / waves as above (x, y or a ring other than 8 x 4: 16-bit W = 4 only, else the 8 x 4 bulk
// instance; ring 8 x 6 / 16 x 3 run bulk x and y unless x=cp). x= / y= imply tma. Measured (perf-notes,
// Version 8): no faster than v6, so opt-in. v9 knobs of tma (convtma2; runtime unless said): ld= / st= / pf=
// put L2 cache hints on its x loads (cp.async or bulk) / bulk y stores; order=span|group|spread (the
// block -> (span, row group) map: v6's span-fastest, group-fastest, or groups strided by a unit mod the
// group count so concurrent blocks spread over the tensor); ystage=2|3|4 (y staging tiles; x=cp, y=bulk,
// ring 8x4, or 3 with ring=8x3); ring=8x3 (x=cp, ystage=3 only), x=cp with ring=8x6 / 16x3 (y=bulk):
// y=tile (x=cp, ring 8x4, ystage 2: one 2-D tensor-map store per full tile); those rings / ystage / tile
// are 16-bit W = 4 instances (conv_fwd_tma_knobs2.cu). order= / ystage= imply tma.
// v10 (conv_fwd_v10.cu; convfwd9): phase=8..64, a multiple of 8 (rows per phase: a block's reads and writes batched
// in phases), pbuf=1|2|3 (phase buffers: 1 = strict read / compute / write phases), pst=bulk|st16|cs (y
// stores); every dtype and W 2-4; with blocks= / waves= only (no tma or v7 keys).
// v11 (conv_fwd_reg.cu; convfwd11): reg or reg=4|8|16 (register streaming: 16-byte loads straight into registers, 8 / 4
// rows in flight per thread; "reg" = 8), rx=ld|cp (cp: the rows in flight in the thread's own shared-memory slots,
// filled by cp.async, reg 8 or 16), yst=cs|plain (16-byte y stores st.global.cs or plain); rx= / yst= need reg; with
// blocks= / waves= only (default waves=2).
struct FwdVariant {
  bool on = false;
  int ring = 0;          // 0: 8 x 4, 1: 8 x 6, 2: 16 x 3, 3: 16 x 4, 4: 32 x 3, 5: 8 x 3 (tma only)
  bool hint = false;     // the hinted instance (a ring or a policy was named)
  int ld = 0, st = 0;    // 0: evict_normal, 1: evict_first, 2: evict_last
  bool pf256 = false;
  int64_t blocks = 0;    // 0: v6's rule (~2048 blocks, >= 64 rows per group)
  int64_t waves = 0;
  bool tma = false;      // v8 bulk-copy kernel
  int tma_x = 0;         // 0: cp.async.bulk, 1: 16-byte cp.async
  int tma_y = 0;         // 0: bulk row stores, 1: 16-byte st.global from shared, 2: direct 4-byte, 3: tile
  int order = 0;         // tma: 0 span-fastest (v6), 1 group-fastest, 2 spread (groups strided)
  int ystage = 2;        // tma: y staging tiles
  int phase = 0;         // v10 (conv_fwd_v10.cu): rows per phase (0: not v10); phase= / pbuf= / pst=
  int pbuf = 2;          // v10: phase buffers 1..3
  int pst = 0;           // v10: y stores 0 bulk, 1 st16, 2 st16 .cs
  int reg = 0;           // v11 (conv_fwd_reg.cu): rows in flight per thread, 4 or 8 (0: not v11)
  bool reg_cs = true;    // v11: y stores st.global.cs (false: plain st.global)
  bool reg_cp = false;   // v11: x rows by cp.async into per-thread shared-memory slots (rx=cp), not registers
};
FwdVariant fwd_variant();  // parses the variable (LINATTN_CHECK on unknown keys / values), cached per value
// What runs without the variable on aligned flat no-residual layouts where v6 would (conv_fwd_run.cu:
// kFwdDefault; on = false: v6).
FwdVariant fwd_default_variant();

// Rows per group of a variant launch: v6's rule, or v.blocks / v.waves (occ = resident blocks per SM
// of the instance), rounded up to a multiple of kR, at most 65535 groups.
int64_t variant_group_rows(const ConvParams& p, const FwdVariant& v, int64_t span, int kR, int occ);

// Launch of the forward / backward long-run kernels (the callers checked eligibility).
template <class E>
void fwd_run(const ConvParams& p, cudaStream_t stream, int64_t group_rows, int64_t groups);
template <class E>
void fwd_run_variant(const ConvParams& p, cudaStream_t stream, const FwdVariant& v);
template <class E>
void fwd_tma(const ConvParams& p, cudaStream_t stream, const FwdVariant& v);  // conv_fwd_tma.cu (sm_90)
template <class E>
void fwd_phase(const ConvParams& p, cudaStream_t stream, const FwdVariant& v);  // conv_fwd_v10.cu (v10)
template <class E>
void fwd_reg(const ConvParams& p, cudaStream_t stream, const FwdVariant& v);  // conv_fwd_reg.cu (v11)
template <class E>
void bwd_run(const ConvParams& p, cudaStream_t stream, int64_t group_rows, int64_t groups);

}  // namespace linattn::cuda::conv
