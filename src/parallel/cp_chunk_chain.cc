// Chained context-parallel GDN / KDA on the CPU (the default exchange; cp_chunk_cpu.h). Only what
// the rank chain needs is computed, and the exchange runs after each rank's own big pass, so the
// ranks work concurrently (docs/perf-notes.md "Sequence parallelism", "Chained exchange").
// Forward, one all-gather:
//  - rank 0 (no head) runs its forward at once; its tail's record is its true final state
//    (absolute, no transition).
//  - ranks > 0 run the forward on an augmented value width V + K: v_aug = [v | 0], the head's
//    initial state [0 | I], every other sequence's [h0 | 0]. Because the state map is affine, the
//    head's outputs split as o = o0 + Qt S_init with o0 = o_aug[:, :V] (from a zero state) and
//    Qt = o_aug[:, V:] (its map from the true initial state), and its final state as
//    M S_init + S_loc with [S_loc | M] = ht_aug; every other sequence is exact in the first V
//    columns (its extra columns stay 0). Records: the tail's true final state when it starts on
//    this rank (absolute), else (M, S_loc) (the sequence crosses the whole rank).
//  - after the exchange: S_init of the head = the start rank's absolute state chained over the
//    crossed ranks (S <- M S + S_loc), then o += Qt S_init over the head's rows.
// Backward, one all-gather of two records per rank, both computed before it so the ranks'
// passes overlap: the first version's forward record (the tail's (M, S_loc) from zero) and the
// head's state gradient: dS at its first row with its true terminal gradient when the head ends
// here (absolute), else from a zero terminal gradient (dS_loc). The tail's terminal gradient is
// then the end rank's record chained back over the crossed ranks (d <- M^T d + D, M from their
// forward records), and the ordinary backward runs with both chained.
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "cpu/bwd_blas.h"
#include "cpu/convert.h"
#include "parallel/cp_chunk_cpu.h"

namespace linattn::parallel::cpucp {
namespace {

// [1, T, HV, V] -> [1, T, HV, V + K] with zero extra columns (same dtype).
Tensor augment_v(const TensorView& v, int64_t K) {
  const int64_t T = v.shape[1], HV = v.shape[2], V = v.shape[3];
  Tensor out(v.dtype, {1, T, HV, V + K});
  const size_t es = dtype_size(v.dtype);
  std::memset(out.view().data, 0, out.view().nbytes());
  const char* src = static_cast<const char*>(v.data);
  char* dst = static_cast<char*>(out.view().data);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < HV; ++j)
      std::memcpy(dst + ((t * HV + j) * (V + K)) * es, src + (t * v.strides[1] + j * v.strides[2]) * es, V * es);
  return out;
}

}  // namespace

void chain_fwd(const CpContext& cp, const ChunkAttnInputs& in, const ChunkAttnOutputs& out,
               const ChunkAttnOptions& opt, const ExecContext& ctx) {
  Local l = prepare(cp, in, opt, ctx);
  const Dims& m = l.m;
  const int64_t K = m.K, V = m.V, A = V + K, HV = m.HV, MK = m.mk(), SK = HV * m.kv();
  const int64_t nv = static_cast<int64_t>(l.shard.seqs.size()), T = l.shard.rows();
  const bool aug = l.shard.rank > 0 && l.active();  // rank 0 never has a head
  std::vector<float> rec(static_cast<size_t>(m.record()), 0.0f);
  rec[0] = T > 0 ? 1.0f : 0.0f;
  rec[1] = -1.0f;
  Tensor o_aug, ht_aug;
  std::vector<float> buf(static_cast<size_t>(SK));
  // State i of ht_aug: S part (or M part) into K-major [HV, K, V] (or [HV, K, K]).
  auto aug_part = [&](int64_t i, bool M, float* dst) {
    const float* src = ht_aug.data<float>() + i * HV * K * A;
    for (int64_t j = 0; j < HV; ++j)
      for (int64_t d = 0; d < K; ++d)
        std::memcpy(dst + (j * K + d) * (M ? K : V), src + (j * K + d) * A + (M ? V : 0), sizeof(float) * (M ? K : V));
  };
  if (l.active()) {
    if (!aug) {
      chunk_attn_fwd(l.vin, ChunkAttnOutputs{out.o, l.ht}, l.vopt, ctx);
    } else {
      Tensor v_aug = augment_v(in.v, K);
      Tensor h0_aug(DType::kF32, {nv, HV, K, A});
      float* h = h0_aug.data<float>();
      std::memset(h, 0, sizeof(float) * h0_aug.numel());
      for (int64_t i = 0; i < nv; ++i) {
        const bool head = i == 0 && l.shard.has_head();
        if (!head) read_state(m, l.h0, i, buf.data());
        for (int64_t j = 0; j < HV; ++j)
          for (int64_t d = 0; d < K; ++d) {
            float* row = h + ((i * HV + j) * K + d) * A;
            if (head) row[V + d] = 1.0f;
            else std::memcpy(row, buf.data() + (j * K + d) * V, sizeof(float) * V);
          }
      }
      o_aug = Tensor(out.o.dtype, {1, T, HV, A});
      ht_aug = Tensor(DType::kF32, {nv, HV, K, A});
      ChunkAttnInputs vin = l.vin;
      vin.v = v_aug;
      vin.initial_state = h0_aug;
      ChunkAttnOptions vopt = l.vopt;
      vopt.state_v_first = false;
      chunk_attn_fwd(vin, ChunkAttnOutputs{o_aug, ht_aug}, vopt, ctx);
    }
    if (l.shard.has_tail()) {
      const CpSeq& t = l.shard.seqs.back();
      rec[1] = static_cast<float>(t.n);
      rec[2] = t.starts_here ? 1.0f : 0.0f;
      if (!aug) {
        read_state(m, l.ht, nv - 1, rec.data() + 4 + MK);
      } else {
        aug_part(nv - 1, false, rec.data() + 4 + MK);
        if (!t.starts_here) aug_part(nv - 1, true, rec.data() + 4);
      }
    }
  }
  const std::vector<float> all = gather_records(cp, rec, ctx);
  if (!l.active()) return;
  if (aug) {
    // o = o_aug[:, :V] (+ Qt S_init over the head's rows).
    std::vector<float> S(static_cast<size_t>(SK)), row(static_cast<size_t>(A)), acc(static_cast<size_t>(V));
    const bool head = l.shard.has_head();
    if (head) chain_head(l, in, all.data(), m.record(), true, S.data());
    const int64_t head_end = head ? l.shard.seqs.front().eos : 0;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t j = 0; j < HV; ++j) {
        cpu::load_row(o_aug.view().data, o_aug.dtype(), (t * HV + j) * A, A, row.data());
        std::copy(row.begin(), row.begin() + V, acc.begin());
        if (t < head_end)
          cpu::bwd::mm(1, static_cast<int>(V), static_cast<int>(K), row.data() + V, K, 1, S.data() + j * m.kv(), V,
                       acc.data(), V, true);
        cpu::store_row(acc.data(), V, out.o.dtype, out.o.data, t * out.o.strides[1] + j * out.o.strides[2]);
      }
    // Final states (K-major fp32 into l.ht): the head's M S_init + S_loc, the others exact.
    std::vector<float> Mh(static_cast<size_t>(MK));
    for (int64_t i = 0; i < nv; ++i) {
      aug_part(i, false, buf.data());
      if (i == 0 && head) {
        aug_part(0, true, Mh.data());
        for (int64_t j = 0; j < HV; ++j)
          cpu::affine_state(K, V, Mh.data() + j * K * K, false, S.data() + j * m.kv(), buf.data() + j * m.kv(),
                            buf.data() + j * m.kv());
      }
      write_state(m, buf.data(), l.ht, i);
    }
  }
  if (!opt.output_final_state) return;
  for (int64_t i = 0; i < nv; ++i) {
    if (!l.shard.seqs[i].ends_here) continue;
    read_state(m, l.ht, i, buf.data());
    write_state(m, buf.data(), out.final_state, l.shard.seqs[i].n);
  }
}

void chain_bwd(const CpContext& cp, const ChunkAttnInputs& in, const TensorView& d_o,
               const TensorView& d_final_state, const ChunkAttnGrads& grads, const ChunkAttnOptions& opt,
               const ExecContext& ctx) {
  Local l = prepare(cp, in, opt, ctx);
  const Dims& m = l.m;
  const int64_t R = m.record(), MK = m.mk(), SK = m.HV * m.kv(), R2 = 2 * R;
  const bool with_dht = opt.output_final_state && d_final_state.defined();
  std::vector<float> rec(static_cast<size_t>(R2), 0.0f);
  tail_record(l, rec.data());
  float* b = rec.data() + R;  // the head's state-gradient record
  b[0] = l.shard.rows() > 0 ? 1.0f : 0.0f;
  b[1] = -1.0f;
  std::vector<float> dS(static_cast<size_t>(SK));
  if (l.shard.has_head()) {
    const CpSeq& h = l.shard.seqs.front();
    b[1] = static_cast<float>(h.n);
    b[2] = h.ends_here ? 1.0f : 0.0f;
    const bool term = h.ends_here && with_dht;
    if (term) read_state(m, d_final_state, h.n, dS.data());
    cpu::seg_dstate_pass(l.p, cpu::BwdBuf{d_o.data, d_o.dtype}, l.one(h), b + 4 + MK, l.threads, l.ws.data(),
                         term ? dS.data() : nullptr);
  }
  const std::vector<float> all = gather_records(cp, rec, ctx);
  if (l.shard.has_head()) {
    chain_head(l, in, all.data(), R2, false, dS.data());
    write_state(m, dS.data(), l.h0, 0);
  }
  const int64_t nv = static_cast<int64_t>(l.shard.seqs.size());
  Tensor dht(DType::kF32, m.state_shape(nv));
  std::vector<float> next(static_cast<size_t>(SK));
  for (int64_t i = 0; i < nv; ++i) {
    const CpSeq& s = l.shard.seqs[i];
    read_state(m, with_dht ? d_final_state : TensorView{}, s.n, dS.data());  // ends here: d_ht
    if (!s.ends_here) {  // the tail: from the end rank's absolute record back over the crossed ranks
      std::vector<int> chain;
      for (int r = l.shard.rank + 1; r < l.shard.world; ++r) {
        const float* x = all.data() + r * R2 + R;
        if (x[0] == 0.0f) continue;
        LINATTN_ASSERT(x[1] == static_cast<float>(s.n), "rank ", r, " head: expected sequence ", s.n, ", got ", x[1]);
        chain.push_back(r);
        if (x[2] != 0.0f) break;
      }
      LINATTN_ASSERT(!chain.empty() && all[chain.back() * R2 + R + 2] != 0.0f, "sequence ", s.n, ": no end rank");
      const float* e = all.data() + chain.back() * R2 + R + 4 + MK;
      std::copy(e, e + SK, dS.begin());
      for (auto it = chain.rbegin() + 1; it != chain.rend(); ++it) {
        const float* Mr = all.data() + *it * R2 + 4;  // the crossed rank's forward record: its M
        const float* Dr = all.data() + *it * R2 + R + 4 + MK;
        for (int64_t j = 0; j < m.HV; ++j)
          cpu::affine_state(m.K, m.V, Mr + j * m.K * m.K, true, dS.data() + j * m.kv(), Dr + j * m.kv(),
                            next.data() + j * m.kv());
        dS.swap(next);
      }
    }
    write_state(m, dS.data(), dht, i);
  }
  finish_bwd(cp, l, grads, ctx, d_o, dht);
}

}  // namespace linattn::parallel::cpucp
