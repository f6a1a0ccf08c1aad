// `linattn capabilities`: the capability matrix, probed rather than written by hand. Every cell
// op x backend x dtype x mode x pass runs a tiny seeded case through the public API and compares
// it with the fp64 reference (src/ref, the conv ref, the layer composition of layer_ref.h, or a
// direct loop for the chunk tables):
//   supported   - it ran and matched the reference within the tolerance table of the tests;
//   failed      - it raised a linattn::Error other than Unsupported (category from the Error), or
//                 ran and did not match (category "mismatch"), or a graph replay differed from
//                 the eager fixed-capacity call on the same data (category "graph-vs-fixed");
//   unsupported - the library raised Unsupported (the reason is its message), or the backend
//                 has no device here ("no CUDA device" / a build without CUDA);
//   n/a         - the combination has no meaning (the chunk tables have no backward).
// Modes: eager (use_graph = false, exact-size tensors), fixed (use_graph = true on static
// buffers with garbage padding, no graph), graph (captured once, replayed with two new layouts).
// Passes: fwd, fwdbwd. The test (tests/capabilities) re-checks every supported cell with other
// seeds and layouts.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace linattn::caps {

enum class Status : uint8_t { kSupported, kFailed, kUnsupported, kNotApplicable };
const char* status_name(Status s);  // "supported" | "failed" | "unsupported" | "n/a"

struct CellKey {
  std::string op;       // gdn | kda | conv | gdn_layer | kda_layer | metadata
  std::string backend;  // cpu | cuda
  std::string dtype;    // fp32 | bf16 | fp16 (metadata: i32 | i64, the cu_seqlens dtype)
  std::string mode;     // eager | fixed | graph
  std::string pass;     // fwd | fwdbwd
  std::string str() const;  // "gdn/cpu/fp32/graph/fwdbwd"
};

struct Cell {
  CellKey key;
  Status status = Status::kFailed;
  std::string category;     // failed: the Error's category (or code), "mismatch", "graph-vs-fixed"
  std::string reason;       // unsupported / failed: the message; supported: empty
  std::string worst;        // the checked quantity closest to (or past) its bar, e.g. "dq"
  double rel_rms_err = 0;   // of `worst`, against the reference
  double max_abs_err = 0;
  double bar = 0;           // the rel RMS bar of `worst`
  int num_checked = 0;      // quantities compared
  double ms = 0;            // wall time of the probe
};

// What to probe; empty lists mean all. variant 0 is the CLI's case; others change the seeds and
// the layouts (the test uses them to re-check supported cells).
struct ProbeOptions {
  std::vector<std::string> ops, backends, dtypes, modes, passes;
  int variant = 0;
};

const std::vector<std::string>& all_ops();
const std::vector<std::string>& all_backends();
const std::vector<std::string>& all_modes();
const std::vector<std::string>& all_passes();
std::vector<std::string> dtypes_of(const std::string& op);

// Probes one cell (never throws: errors become the cell's status).
Cell probe_cell(const CellKey& key, int variant = 0);
// Probes every selected cell in a fixed order; `progress` (may be null) is called after each.
std::vector<Cell> probe_all(const ProbeOptions& opt, void (*progress)(const Cell&, int done, int total) = nullptr);

std::string cell_json(const Cell& c);
// The console matrix: one row per op x backend x dtype, one column per mode x pass, cells "ok" /
// "FAIL <category> [n]" / "no [n]" (unsupported) / "n/a", then the numbered reasons. (The README's
// Markdown table is rendered from --json by scripts/update-readme-capabilities.)
std::string matrix_text(const std::vector<Cell>& cells);

}  // namespace linattn::caps
