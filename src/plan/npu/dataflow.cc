// Builder of the per-task chunked GDN / KDA dataflow (see dataflow.h).
#include "plan/npu/dataflow.h"

#include <algorithm>

#include "core/check.h"
#include "core/util.h"

namespace linattn::plan::npu {
namespace {

struct Builder {
  Dataflow df;
  int chunk = 0;

  int tensor(const std::string& base, int64_t rows, int64_t cols, int elem_bytes, bool external = false) {
    TensorNode t;
    t.name = base + "[" + std::to_string(chunk) + "]";
    t.rows = rows;
    t.cols = cols;
    t.bytes = rows * cols * elem_bytes;
    t.chunk = chunk;
    t.external = external;
    df.tensors.push_back(t);
    return static_cast<int>(df.tensors.size()) - 1;
  }
  int op(const std::string& base, Unit u, VecKind k, double flops, std::vector<int> in, int out, int phase) {
    OpNode o;
    o.base = base;
    o.name = base + "[" + std::to_string(chunk) + "]";
    o.unit = u;
    o.kind = u == Unit::kVector ? k : VecKind::kNone;
    o.flops = flops;
    o.inputs = std::move(in);
    if (out >= 0) o.outputs = {out};
    o.chunk = chunk;
    o.phase = phase;
    df.ops.push_back(o);
    return static_cast<int>(df.ops.size()) - 1;
  }
};

}  // namespace

const char* family_name(Family f) { return f == Family::kGdn ? "gdn" : "kda"; }
const char* unit_name(Unit u) {
  return u == Unit::kMatrix ? "matrix" : (u == Unit::kVector ? "vector" : "load");
}

Dataflow build_dataflow(const DataflowSpec& s) {
  LINATTN_CHECK(s.T >= 1 && s.C >= 1 && s.K >= 1 && s.V >= 1, "dataflow: T, C, K, V must be >= 1, got T ", s.T,
                " C ", s.C, " K ", s.K, " V ", s.V);
  LINATTN_CHECK(s.in_bytes >= 1 && s.acc_bytes >= 1, "dataflow: element sizes must be >= 1");
  Builder b;
  b.df.spec = s;
  const bool kda = s.family == Family::kKda;
  const int64_t K = s.K, V = s.V, ab = s.acc_bytes;
  b.df.num_chunks = static_cast<int>(ceil_div(s.T, s.C));
  b.chunk = -1;
  int S = b.tensor("S", K, V, static_cast<int>(ab), true);
  b.df.tensors[S].state = true;
  for (int c = 0; c < b.df.num_chunks; ++c) {
    b.chunk = c;
    const int64_t n = std::min<int64_t>(s.C, s.T - static_cast<int64_t>(c) * s.C);
    const double n2 = static_cast<double>(n * n), nK = static_cast<double>(n * K), nV = static_cast<double>(n * V);
    const int q = b.tensor("q", n, K, s.in_bytes, true), k = b.tensor("k", n, K, s.in_bytes, true);
    const int v = b.tensor("v", n, V, s.in_bytes, true), beta = b.tensor("beta", n, 1, s.in_bytes, true);
    const int g = b.tensor("g", n, kda ? K : 1, 4, true);
    std::vector<int> loads = {k, v, g, beta};
    if (kda) loads.push_back(q);  // KDA gates q on the Vector unit; GDN's q feeds only the Matrix unit
    if (c == 0) loads.push_back(S);
    b.op("ld", Unit::kLoad, VecKind::kNone, 0.0, loads, -1, 0);
    const int gc = b.tensor("gc", n, kda ? K : 1, static_cast<int>(ab));
    b.op("gcum", Unit::kVector, VecKind::kScan, kda ? nK : static_cast<double>(n), {g}, gc, 0);
    const int kb = b.tensor("kb", n, K, static_cast<int>(ab));  // beta e^g k
    b.op("kbeta", Unit::kVector, VecKind::kRowBroadcast, 3 * nK, {k, gc, beta}, kb, 0);
    int vb = -1;  // beta v (the factored form folds it into diff)
    if (!s.factored) {
      vb = b.tensor("vb", n, V, static_cast<int>(ab));
      b.op("vbeta", Unit::kVector, VecKind::kRowBroadcast, nV, {v, beta}, vb, 0);
    }
    int kn = -1, qg = -1;
    if (kda) {  // channelwise decay enters the products through gated copies of k and q
      kn = b.tensor("kn", n, K, static_cast<int>(ab));
      b.op("kgate", Unit::kVector, VecKind::kRowBroadcast, 2 * nK, {k, gc}, kn, 0);
      qg = b.tensor("qg", n, K, static_cast<int>(ab));
      b.op("qgate", Unit::kVector, VecKind::kRowBroadcast, 2 * nK, {q, gc}, qg, 0);
    }
    const int qside = kda ? qg : q;
    const int kkt = b.tensor("KKT", n, n, static_cast<int>(ab));
    b.op("kkt", Unit::kMatrix, VecKind::kNone, 2 * n2 * K, kda ? std::vector<int>{kb, kn} : std::vector<int>{k, k},
         kkt, 0);
    const int L = b.tensor("L", n, n, static_cast<int>(ab));
    b.op("lmask", Unit::kVector, VecKind::kMaskedGate, 4 * n2, kda ? std::vector<int>{kkt} : std::vector<int>{kkt, gc, beta},
         L, 0);
    const int Ai = b.tensor("Ainv", n, n, static_cast<int>(ab));
    b.op("solve", Unit::kVector, VecKind::kSolve, 2.0 * n2 * static_cast<double>(n) / 3.0, {L}, Ai, 0);
    const int qkt = b.tensor("QKT", n, n, static_cast<int>(ab));
    b.op("qkt", Unit::kMatrix, VecKind::kNone, 2 * n2 * K, kda ? std::vector<int>{qg, kn} : std::vector<int>{q, k},
         qkt, kda ? 0 : 2);
    const int P = b.tensor("P", n, n, static_cast<int>(ab));
    b.op("pmask", Unit::kVector, VecKind::kMaskedGate, 4 * n2, kda ? std::vector<int>{qkt} : std::vector<int>{qkt, gc},
         P, kda ? 0 : 2);
    const int kd = b.tensor("kd", n, K, static_cast<int>(ab));  // e^{g_L - g} k
    b.op("kdec", Unit::kVector, VecKind::kRowBroadcast, 3 * nK, {k, gc}, kd, kda ? 0 : 1);
    int VN = -1;
    if (!s.factored) {
      const int W = b.tensor("W", n, K, static_cast<int>(ab));
      b.op("wmat", Unit::kMatrix, VecKind::kNone, 2 * n2 * K, {Ai, kb}, W, 0);
      const int U = b.tensor("U", n, V, static_cast<int>(ab));
      b.op("umat", Unit::kMatrix, VecKind::kNone, 2 * n2 * V, {Ai, vb}, U, 0);
      const int WS = b.tensor("WS", n, V, static_cast<int>(ab));
      b.op("ws", Unit::kMatrix, VecKind::kNone, 2 * nK * V, {W, S}, WS, 1);
      VN = b.tensor("VN", n, V, static_cast<int>(ab));
      b.op("vnew", Unit::kVector, VecKind::kElementwise, nV, {U, WS}, VN, 1);
    } else {
      const int KS = b.tensor("KS", n, V, static_cast<int>(ab));
      b.op("ks", Unit::kMatrix, VecKind::kNone, 2 * nK * V, {kb, S}, KS, 1);
      const int DF = b.tensor("DF", n, V, static_cast<int>(ab));
      b.op("diff", Unit::kVector, VecKind::kRowBroadcast, 2 * nV, {KS, v, beta}, DF, 1);
      VN = b.tensor("VN", n, V, static_cast<int>(ab));
      b.op("vnm", Unit::kMatrix, VecKind::kNone, 2 * n2 * V, {Ai, DF}, VN, 1);
    }
    const int KV = b.tensor("KV", K, V, static_cast<int>(ab));
    b.op("kv", Unit::kMatrix, VecKind::kNone, 2 * nK * V, {kd, VN}, KV, 1);
    const int QS = b.tensor("QS", n, V, static_cast<int>(ab));
    b.op("qs", Unit::kMatrix, VecKind::kNone, 2 * nK * V, {qside, S}, QS, 2);
    const int OI = b.tensor("OI", n, V, static_cast<int>(ab));
    b.op("ointra", Unit::kMatrix, VecKind::kNone, 2 * n2 * V, {P, VN}, OI, 2);
    const int o = b.tensor("o", n, V, s.in_bytes);
    b.df.tensors[o].output = true;
    b.op("out", Unit::kVector, kda ? VecKind::kElementwise : VecKind::kRowBroadcast, 3 * nV,
         kda ? std::vector<int>{QS, OI} : std::vector<int>{QS, OI, gc}, o, 2);
    const int Sn = b.tensor("S", K, V, static_cast<int>(ab));
    b.df.tensors[Sn].state = true;
    const int up = b.op("supd", Unit::kVector, kda ? VecKind::kRowBroadcast : VecKind::kElementwise,
                        2.0 * static_cast<double>(K * V), {S, gc, KV}, Sn, 1);
    b.df.ops[up].in_place = S;
    b.df.state_update.push_back(up);
    S = Sn;
  }
  b.df.tensors[S].output = true;
  // FLA order inside a chunk: by phase, then the builder's order (stable).
  Dataflow& df = b.df;
  std::stable_sort(df.ops.begin(), df.ops.end(), [](const OpNode& a, const OpNode& o) {
    return a.chunk != o.chunk ? a.chunk < o.chunk : a.phase < o.phase;
  });
  df.state_update.clear();
  df.producer.assign(df.tensors.size(), -1);
  df.consumers.assign(df.tensors.size(), {});
  for (int i = 0; i < static_cast<int>(df.ops.size()); ++i) {
    for (int t : df.ops[i].outputs) df.producer[t] = i;
    for (int t : df.ops[i].inputs) {
      auto& cs = df.consumers[t];
      if (cs.empty() || cs.back() != i) cs.push_back(i);
    }
    if (df.ops[i].base == "supd") df.state_update.push_back(i);
  }
  // Vector ops may write over an input of the result's size that dies with them (U - WS into U,
  // the solve into L, masks into their product); the simulator checks the input is dead.
  for (auto& o : df.ops) {
    if (o.unit != Unit::kVector || o.in_place >= 0 || o.outputs.empty() || !s.in_place_vector) continue;
    for (int t : o.inputs)
      if (!df.tensors[t].external && df.tensors[t].bytes == df.tensors[o.outputs[0]].bytes) {
        o.in_place = t;
        break;
      }
  }
  if (s.narrow_operands) {
    for (int t = 0; t < static_cast<int>(df.tensors.size()); ++t) {
      const int p = df.producer[t];
      if (p < 0 || df.ops[p].unit != Unit::kVector || df.consumers[t].empty()) continue;
      bool matrix_only = true;
      for (int u : df.consumers[t]) matrix_only &= df.ops[u].unit == Unit::kMatrix;
      if (matrix_only) df.tensors[t].bytes = df.tensors[t].rows * df.tensors[t].cols * s.in_bytes;
    }
  }
  return df;
}

int Dataflow::find_op(const std::string& base, int chunk) const {
  for (int i = 0; i < static_cast<int>(ops.size()); ++i)
    if (ops[i].chunk == chunk && ops[i].base == base) return i;
  return -1;
}

int64_t Dataflow::external_input_bytes() const {
  int64_t b = 0;
  for (const auto& t : tensors) b += t.external ? t.bytes : 0;
  return b;
}

int64_t Dataflow::output_bytes() const {
  int64_t b = 0;
  for (const auto& t : tensors) b += t.output ? t.bytes : 0;
  return b;
}

double Dataflow::flops(Unit u) const {
  double f = 0.0;
  for (const auto& o : ops) f += o.unit == u ? o.flops : 0.0;
  return f;
}

}  // namespace linattn::plan::npu
