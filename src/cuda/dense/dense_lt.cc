// The layers' GEMMs through cublasLt with one algorithm per GEMM class and M bucket.
// Why: cublasGemmEx picks its kernel per exact shape, so every new token count T of an eager
// layer call ran cuBLAS's heuristic and loaded new kernels (H200 layer-demo: a first call with a
// new layout 3.6 ms vs 0.43 ms for the same call again; bench/results/h200-layer-demo-20261201-
// af8d9df.txt). Here the heuristic runs once per class (dtypes, transposes, N, leading dimensions,
// alignment) and bucket of M and of K (powers of 4 from 256 up: the token count is M in the
// forward and dx GEMMs and K in the weight-gradient ones), asked for the buckets' largest sizes
// where the layouts allow it, and every problem of the class reuses that algorithm after one
// cheap cublasLtMatmulAlgoCheck per new (M, K) (a failed check takes the heuristic for that size,
// once: the choice per size is kept, with that size's descriptors, so a repeated size creates
// nothing; a class or size without any algorithm is remembered too and goes to cublasGemmEx at once).
// Same math as before: C = alpha op(A) op(B) + beta C, fp32 accumulation (CUBLAS_COMPUTE_32F, no
// TF32), row-major operands swapped into the column-major view (c^T = op(b)^T op(a)^T).
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "cuda/dense/dense_lt.h"

namespace linattn::cuda::dense {
namespace {

// One GEMM class: dtypes, transposes, N, lda, ldb, ldc, alignment, bucket of M, bucket of K.
using ClassKey = std::tuple<int, int, int, int, int64_t, int64_t, int64_t, int64_t, int, int64_t, int64_t>;

int64_t bucket_of(int64_t M) {
  int64_t b = 256;
  while (b < M) b *= 4;
  return b;
}

int alignment_bits(const void* p) {
  const auto v = reinterpret_cast<uintptr_t>(p);
  return (v % 16 == 0) ? 16 : (v % 8 == 0) ? 8 : (v % 4 == 0) ? 4 : 2;
}

// Rows of each operand's column-major layout; valid() = every leading dimension covers its rows.
struct Rows {
  uint64_t a, b, c;
  Rows(const GemmArgs& g, int64_t M, int64_t K)
      : a(g.trans_a ? M : K), b(g.trans_b ? K : g.N), c(g.N) {}
  bool valid(const GemmArgs& g) const {
    return uint64_t(g.lda) >= a && uint64_t(g.ldb) >= b && uint64_t(g.ldc) >= c;
  }
};

// Descriptors of one problem (column-major view): C^T [N x M] = op(B)^T [N x K] op(A)^T [K x M].
struct Problem {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  Problem(const GemmArgs& g, const LtTarget& t, int64_t M, int64_t K) {
    const cublasOperation_t tb = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, ta = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    LINATTN_CUBLAS_CHECK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    LINATTN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &tb, sizeof(tb)));
    LINATTN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &ta, sizeof(ta)));
    // cuBLAS's "A" is our b: [N x K] column-major view when not transposed (rows N of ld ldb).
    const uint64_t b_rows = g.trans_b ? K : g.N, b_cols = g.trans_b ? g.N : K;
    const uint64_t a_rows = g.trans_a ? M : K, a_cols = g.trans_a ? K : M;
    LINATTN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&b, t.ab, b_rows, b_cols, g.ldb));
    LINATTN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&a, t.ab, a_rows, a_cols, g.lda));
    LINATTN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&c, t.ct, g.N, M, g.ldc));
  }
  ~Problem() {
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (op) cublasLtMatmulDescDestroy(op);
  }
  Problem(const Problem&) = delete;
  Problem& operator=(const Problem&) = delete;
};

// What one exact size of a class runs: the class's algorithm when cublasLtMatmulAlgoCheck accepts
// it, else the heuristic's choice for that size; usable = false when there is none (cublasGemmEx).
// pr: the size's descriptors, created once and reused by every later call of that size.
struct SizeChoice {
  bool usable = false;
  cublasLtMatmulAlgo_t algo{};
  std::unique_ptr<Problem> pr;
};

// found = false: the heuristic had nothing for the class's bucket (each size then asks for its own).
struct Plan {
  bool found = false;
  cublasLtMatmulAlgo_t algo{};
  std::map<std::pair<int64_t, int64_t>, SizeChoice> sizes;  // (M, K) -> decided once, never erased
};

// The heuristic's first choice for the problem pr within the workspace; false when it has none.
bool heuristic(cublasLtHandle_t lt, const Problem& pr, const LtTarget& t, cublasLtMatmulAlgo_t& algo) {
  cublasLtMatmulPreference_t pref = nullptr;
  LINATTN_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws = t.workspace_bytes;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  // Split-K reductions only through the workspace, never in place in C: fixed order, so a call
  // repeats bitwise (graph replay == eager fixed-capacity).
  const uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE |
                           CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes, sizeof(schemes));
  cublasLtMatmulHeuristicResult_t res{};
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(lt, pr.op, pr.b, pr.a, pr.c, pr.c, pref, 1, &res, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0 || res.state != CUBLAS_STATUS_SUCCESS) return false;
  algo = res.algo;
  return true;
}

// The class's algorithm, asked for the buckets' big end (an algorithm for it serves the smaller
// sizes) unless the leading dimensions cannot hold those sizes: then for this problem's own.
Plan plan_class(cublasLtHandle_t lt, const GemmArgs& g, const LtTarget& t) {
  const int64_t Mb = std::max(g.M, bucket_of(g.M)), Kb = std::max(g.K, bucket_of(g.K));
  int64_t M = g.M, K = g.K;
  for (const auto& [m, k] : {std::pair{Mb, Kb}, std::pair{Mb, g.K}, std::pair{g.M, Kb}})
    if (Rows(g, m, k).valid(g)) {
      M = m, K = k;
      break;
    }
  Plan p;
  p.found = heuristic(lt, Problem(g, t, M, K), t, p.algo);
  return p;
}

SizeChoice choose_size(cublasLtHandle_t lt, const GemmArgs& g, const LtTarget& t, const Plan& p) {
  SizeChoice c;
  c.pr = std::make_unique<Problem>(g, t, g.M, g.K);
  const Problem& pr = *c.pr;
  if (p.found) {
    c.algo = p.algo;
    cublasLtMatmulHeuristicResult_t res{};
    c.usable = cublasLtMatmulAlgoCheck(lt, pr.op, pr.b, pr.a, pr.c, pr.c, &c.algo, &res) == CUBLAS_STATUS_SUCCESS &&
               res.workspaceSize <= t.workspace_bytes;
  }
  if (!c.usable) c.usable = heuristic(lt, pr, t, c.algo);
  return c;
}

std::mutex g_mu;
std::map<std::pair<cublasLtHandle_t, ClassKey>, Plan> g_plans;  // entries are never erased

}  // namespace

bool gemm_lt(cublasLtHandle_t lt, const GemmArgs& g, const LtTarget& t) {
  const int align = std::min({alignment_bits(g.a), alignment_bits(g.b), alignment_bits(g.c)});
  const ClassKey key{static_cast<int>(t.ab), static_cast<int>(t.ct), g.trans_a, g.trans_b, g.N, g.lda, g.ldb, g.ldc,
                     align, bucket_of(g.M), bucket_of(g.K)};
  const SizeChoice* choice = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    const auto pk = std::make_pair(lt, key);
    auto it = g_plans.find(pk);
    if (it == g_plans.end()) it = g_plans.emplace(pk, plan_class(lt, g, t)).first;
    Plan& p = it->second;
    auto sz = p.sizes.find({g.M, g.K});
    if (sz == p.sizes.end()) sz = p.sizes.emplace(std::make_pair(g.M, g.K), choose_size(lt, g, t, p)).first;
    choice = &sz->second;  // map nodes are stable and never change once decided: read outside the lock
  }
  if (!choice->usable) return false;
  const Problem& pr = *choice->pr;
  const float alpha = g.alpha, beta = g.beta;
  LINATTN_CUBLAS_CHECK(cublasLtMatmul(lt, pr.op, &alpha, g.b, pr.b, g.a, pr.a, &beta, g.c, pr.c, g.c, pr.c,
                                      &choice->algo, t.workspace, t.workspace_bytes, t.stream));
  return true;
}

}  // namespace linattn::cuda::dense
