// The device metadata kernel (GRAPH_CONTRACT.md section 2) against host-built eager tables on
// random layouts: int32 and int64 cu_seqlens, BT 16/32/64, zero-length sequences (also as a tail
// repeating the last offset), actual T below T_max, one sequence filling the bucket. Checks every
// row: the first NT rows equal the eager (n, c) list, the rest are (-1, 0) sentinels, and the
// offsets are the exclusive prefix sum of chunk counts. Tables are poisoned before every launch.
// Every other layout also asks for seq_order: a permutation of the sequences whose chunk counts
// (clamped at 1023, the kernel's last bin) never increase.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <vector>

#include "cuda/meta/chunk_meta.h"
#include "cuda_test_util.h"

namespace linattn::test {
namespace {

struct HostMeta {
  std::vector<int32_t> indices;  // [NT, 2]
  std::vector<int32_t> offsets;  // [N + 1]
};

HostMeta eager_meta(const std::vector<int64_t>& cu, int bt) {
  HostMeta m;
  m.offsets.push_back(0);
  for (size_t n = 0; n + 1 < cu.size(); ++n) {
    const int64_t chunks = (cu[n + 1] - cu[n] + bt - 1) / bt;
    for (int64_t c = 0; c < chunks; ++c) {
      m.indices.push_back(static_cast<int32_t>(n));
      m.indices.push_back(static_cast<int32_t>(c));
    }
    m.offsets.push_back(m.offsets.back() + static_cast<int32_t>(chunks));
  }
  return m;
}

void check_layout(const std::vector<int64_t>& lens, int64_t t_max, int bt, DType cu_dtype, uint64_t seed) {
  const int64_t n_max = static_cast<int64_t>(lens.size());
  Tensor cu = cu_seqlens_tensor(lens, cu_dtype);
  std::vector<int64_t> cu_host(n_max + 1);
  for (int64_t i = 0; i <= n_max; ++i) cu_host[i] = static_cast<int64_t>(cu.get(i));
  ASSERT_LE(cu_host.back(), t_max);
  const int64_t nt_max = (t_max + bt - 1) / bt + n_max - 1;
  DevArena arena;
  TensorView dcu = arena.upload(cu);
  Tensor poison_i = full(DType::kI32, {nt_max, 2}, 12345);
  Tensor poison_o = full(DType::kI32, {n_max + 1}, 54321);
  TensorView di = arena.alloc_like(poison_i), dof = arena.alloc_like(poison_o);
  const bool order = seed % 2 == 0;
  TensorView dord = arena.alloc_like(full(DType::kI32, {n_max}, -7));
  cuda::build_chunk_meta(dcu.data, cu_dtype == DType::kI64, n_max, t_max, bt, nt_max, di.ptr<int32_t>(),
                         dof.ptr<int32_t>(), nullptr, order ? dord.ptr<int32_t>() : nullptr);
  const Tensor gi = download(di), go = download(dof), gord = download(dord);
  const HostMeta want = eager_meta(cu_host, bt);
  if (order) {
    std::vector<int> seen(n_max, 0);
    int32_t prev = INT32_MAX;
    for (int64_t i = 0; i < n_max; ++i) {
      const int32_t n = gord.data<int32_t>()[i];
      ASSERT_TRUE(n >= 0 && n < n_max && !seen[n]++) << "seq_order[" << i << "] = " << n << " seed " << seed;
      const int32_t cnt = std::min(want.offsets[n + 1] - want.offsets[n], 1023);
      ASSERT_LE(cnt, prev) << "seq_order[" << i << "] = " << n << " has more chunks than its predecessor, seed " << seed;
      prev = cnt;
    }
  }
  const int64_t nt = static_cast<int64_t>(want.indices.size()) / 2;
  ASSERT_LE(nt, nt_max) << "capacity formula violated";
  for (int64_t i = 0; i <= n_max; ++i)
    ASSERT_EQ(go.data<int32_t>()[i], want.offsets[i]) << "offsets[" << i << "] seed " << seed;
  for (int64_t r = 0; r < nt_max; ++r) {
    const int32_t n = gi.data<int32_t>()[2 * r], c = gi.data<int32_t>()[2 * r + 1];
    if (r < nt) {
      ASSERT_EQ(n, want.indices[2 * r]) << "row " << r << " seed " << seed;
      ASSERT_EQ(c, want.indices[2 * r + 1]) << "row " << r << " seed " << seed;
    } else {
      ASSERT_EQ(n, -1) << "sentinel row " << r << " seed " << seed;
      ASSERT_EQ(c, 0) << "sentinel row " << r << " seed " << seed;
    }
  }
}

TEST(CudaChunkMeta, RandomLayoutsMatchEagerTables) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  Rng rng(7);
  for (int it = 0; it < 300; ++it) {
    const int bt = std::vector<int>{16, 32, 64}[it % 3];
    const DType cu_dtype = it % 2 ? DType::kI64 : DType::kI32;
    const int64_t n_max = rng.integer(1, it % 10 == 0 ? 3000 : 40);
    const int64_t t_max = rng.integer(0, 5000);
    const int64_t total = it % 4 == 0 ? t_max : rng.integer(0, t_max);
    std::vector<int64_t> lens = random_seqlens(rng, n_max, total, it % 5 == 0 ? 0.5 : 0.1);
    if (it % 7 == 0 && n_max > 1) {  // zero-length tail: the last offsets repeat
      for (int64_t i = n_max / 2; i < n_max; ++i) {
        lens[n_max / 2 - 1] += lens[i];
        lens[i] = 0;
      }
    }
    check_layout(lens, t_max, bt, cu_dtype, it);
    if (HasFatalFailure()) return;
  }
}

TEST(CudaChunkMeta, SingleSequenceFillsTheBucket) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  check_layout({4096}, 4096, 64, DType::kI32, 0);
  check_layout({4095, 0, 0}, 4095, 32, DType::kI64, 1);
  check_layout({0, 0, 0, 0}, 100, 64, DType::kI32, 2);
  check_layout({70000, 1, 0, 66000, 5}, 136006, 64, DType::kI32, 4);  // counts over the last bin tie
}

}  // namespace
}  // namespace linattn::test
