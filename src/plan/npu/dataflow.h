// Backend-neutral dataflow of one (sequence, value head, state-column slice) of the chunked GDN /
// KDA forward (ALGORITHMS.md section 3.1): every chunk-local op, the tensor it writes, the tensors
// it reads (producer / consumer edges) and the unit that runs it. One graph spans all chunks of
// the sequence; chunks share only the recurrent state S_c -> S_{c+1} (chunk isolation). Two forms:
//  - FLA form: W = A^-1 (beta e^g K), U = A^-1 (beta V), V^ = U - W S (FLA's launch structure);
//  - factored form (GEMM-first): KS = (beta e^g K) S shares S with Q S and runs before the solve,
//    then V^ = A^-1 (beta V - KS) (one vector op forms beta V - KS); W and U are never formed.
// Sizes: GM inputs in their storage dtype (q, k, v, beta: `in_bytes`; g: fp32), on-core results
// in fp32 (or narrowed, see narrow_operands). `phase` is the FLA kernel an op belongs to (0 prep, 1 state pass, 2 output), which the
// chunk-head-chunk mapping and the FLA order use.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace linattn::plan::npu {

enum class Family { kGdn, kKda };
enum class Unit { kMatrix, kVector, kLoad };  // kLoad: DMA of GM inputs into the UB
// How a vector op's speed depends on a blocked operand layout (see layout_plan.h).
enum class VecKind { kNone, kElementwise, kRowBroadcast, kMaskedGate, kScan, kSolve };

struct TensorNode {
  std::string name;     // "W[3]"
  int64_t bytes = 0;    // on-core (or GM storage) size
  int chunk = -1;       // chunk that produces it; the initial state has -1
  bool external = false;  // lives in GM before the layer runs (q, k, v, g, beta, S_0)
  bool output = false;    // must reach GM (o, final state)
  bool state = false;     // a recurrent state S_c
  int64_t rows = 0, cols = 0;
};

struct OpNode {
  std::string name;       // "kkt[3]"
  std::string base;       // "kkt": the per-chunk op name orders refer to
  Unit unit = Unit::kVector;
  VecKind kind = VecKind::kNone;
  double flops = 0.0;     // multiply-add = 2
  std::vector<int> inputs, outputs;  // tensor ids
  int chunk = 0;
  int phase = 0;
  int in_place = -1;      // input tensor id whose buffer the output may take over
};

struct DataflowSpec {
  Family family = Family::kGdn;
  int64_t T = 2048;  // tokens of the sequence
  int C = 64;        // chunk
  int K = 128;
  int V = 128;       // state columns of this task (a column split passes its slice width)
  int in_bytes = 2;
  int acc_bytes = 4;
  bool factored = false;  // GEMM-first form
  // Vector results read only by the Matrix unit stored in the operand dtype (`in_bytes`) instead
  // of fp32 (the Vector unit casts on write).
  bool narrow_operands = false;
  bool in_place_vector = true;  // vector ops may overwrite a dying same-size input
};

struct Dataflow {
  DataflowSpec spec;
  int num_chunks = 0;
  std::vector<TensorNode> tensors;
  std::vector<OpNode> ops;                   // topological: chunk by chunk, FLA order inside
  std::vector<int> producer;                 // per tensor, -1 for external
  std::vector<std::vector<int>> consumers;   // per tensor, op ids
  std::vector<int> state_update;             // per chunk: the op that writes S_{c+1}

  int find_op(const std::string& base, int chunk) const;  // -1 when absent
  int64_t external_input_bytes() const;
  int64_t output_bytes() const;
  double flops(Unit u) const;
};

Dataflow build_dataflow(const DataflowSpec& s);
const char* family_name(Family f);
const char* unit_name(Unit u);

}  // namespace linattn::plan::npu
