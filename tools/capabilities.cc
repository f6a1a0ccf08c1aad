// The capability matrix driver (see capabilities.h): the axes, one probe per cell with every
// error turned into a status, JSON lines and the console table.
#include "capabilities.h"

#include <chrono>
#include <cstdio>
#include <map>
#include <sstream>

#include "capabilities_util.h"
#include "linattn/error.h"

namespace linattn::caps {
namespace {

std::string escape(const std::string& s) {
  std::string r;
  for (char c : s) {
    if (c == '"' || c == '\\') r += '\\';
    if (c == '\n') {
      r += "\\n";
      continue;
    }
    r += c;
  }
  return r;
}

std::string base_name(const std::string& path) {
  const size_t s = path.find_last_of('/');
  return s == std::string::npos ? path : path.substr(s + 1);
}

// Cells with no meaning: the chunk tables have no backward, and their eager builder reads a host
// cu_seqlens by definition (the eager ops of every backend use it on the host).
std::string not_applicable(const CellKey& k) {
  if (k.op != "metadata") return "";
  if (k.pass == "fwdbwd") return "the chunk tables have no backward";
  if (k.mode == "eager" && k.backend != "cpu") return "the eager chunk tables are built on the host";
  return "";
}

bool selected(const std::vector<std::string>& list, const std::string& v) {
  if (list.empty()) return true;
  for (const auto& x : list)
    if (x == v) return true;
  return false;
}

struct Column {
  std::string mode, pass;
};
std::vector<Column> columns() {
  std::vector<Column> c;
  for (const auto& p : all_passes())
    for (const auto& m : all_modes()) c.push_back({m, p});
  return c;
}

// Rows in probe order, each with its cells by column.
struct Table {
  std::vector<std::string> row_names;
  std::vector<std::vector<const Cell*>> rows;
  std::vector<std::string> reasons;  // footnotes of unsupported / failed cells
};

Table tabulate(const std::vector<Cell>& cells) {
  Table t;
  const std::vector<Column> cols = columns();
  std::map<std::string, size_t> row_of, reason_of;
  for (const Cell& c : cells) {
    const std::string rn = c.key.op + " " + c.key.backend + " " + c.key.dtype;
    if (!row_of.count(rn)) {
      row_of[rn] = t.rows.size();
      t.row_names.push_back(rn);
      t.rows.emplace_back(cols.size(), nullptr);
    }
    for (size_t j = 0; j < cols.size(); ++j)
      if (cols[j].mode == c.key.mode && cols[j].pass == c.key.pass) t.rows[row_of[rn]][j] = &c;
    if ((c.status == Status::kUnsupported || c.status == Status::kFailed) && !reason_of.count(c.reason)) {
      reason_of[c.reason] = t.reasons.size();
      t.reasons.push_back(c.reason);
    }
  }
  return t;
}

std::string cell_text(const Cell* c, const Table& t) {
  if (!c) return "";
  size_t note = 0;
  for (size_t i = 0; i < t.reasons.size(); ++i)
    if (t.reasons[i] == c->reason) note = i + 1;
  switch (c->status) {
    case Status::kSupported: return "ok";
    case Status::kNotApplicable: return "n/a";
    case Status::kUnsupported: return "no [" + std::to_string(note) + "]";
    case Status::kFailed: return "FAIL " + c->category + " [" + std::to_string(note) + "]";
  }
  return "?";
}

}  // namespace

const char* status_name(Status s) {
  switch (s) {
    case Status::kSupported: return "supported";
    case Status::kFailed: return "failed";
    case Status::kUnsupported: return "unsupported";
    case Status::kNotApplicable: return "n/a";
  }
  return "?";
}

std::string CellKey::str() const { return op + "/" + backend + "/" + dtype + "/" + mode + "/" + pass; }

const std::vector<std::string>& all_ops() {
  static const std::vector<std::string> v = {"gdn", "kda", "conv", "gdn_layer", "kda_layer", "metadata"};
  return v;
}
const std::vector<std::string>& all_backends() {
  static const std::vector<std::string> v = {"cpu", "cuda"};
  return v;
}
const std::vector<std::string>& all_modes() {
  static const std::vector<std::string> v = {"eager", "fixed", "graph"};
  return v;
}
const std::vector<std::string>& all_passes() {
  static const std::vector<std::string> v = {"fwd", "fwdbwd"};
  return v;
}
std::vector<std::string> dtypes_of(const std::string& op) {
  if (op == "metadata") return {"i32", "i64"};
  return {"fp32", "bf16", "fp16"};
}

Cell probe_cell(const CellKey& key, int variant) {
  Cell c;
  c.key = key;
  const auto t0 = std::chrono::steady_clock::now();
  const std::string na = not_applicable(key);
  const std::string unavailable = backend_unavailable(key.backend);
  if (!na.empty()) {
    c.status = Status::kNotApplicable;
    c.reason = na;
  } else if (!unavailable.empty()) {
    c.status = Status::kUnsupported;
    c.reason = unavailable;
  } else {
    try {
      Checker chk;
      if (key.op == "gdn" || key.op == "kda") probe_chunk(key, variant, chk);
      else if (key.op == "conv") probe_conv(key, variant, chk);
      else if (key.op == "gdn_layer" || key.op == "kda_layer") probe_layer(key, variant, chk);
      else if (key.op == "metadata") probe_metadata(key, variant, chk);
      else throw std::runtime_error("unknown op '" + key.op + "'");
      chk.fill(c);
    } catch (const Error& e) {
      if (e.code() == ErrorCode::kUnsupported) {
        c.status = Status::kUnsupported;
        c.reason = e.message();
      } else {
        c.status = Status::kFailed;
        c.category = e.category() != FailureCategory::kNone ? failure_category_name(e.category())
                                                             : error_code_name(e.code());
        c.reason = e.message() + " (" + base_name(e.file()) + ":" + std::to_string(e.line()) + ")";
      }
    } catch (const std::exception& e) {
      c.status = Status::kFailed;
      c.category = "exception";
      c.reason = e.what();
    }
  }
  c.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return c;
}

std::vector<Cell> probe_all(const ProbeOptions& opt, void (*progress)(const Cell&, int, int)) {
  std::vector<CellKey> keys;
  for (const auto& op : all_ops()) {
    if (!selected(opt.ops, op)) continue;
    for (const auto& be : all_backends()) {
      if (!selected(opt.backends, be)) continue;
      for (const auto& dt : dtypes_of(op)) {
        if (!selected(opt.dtypes, dt)) continue;
        for (const auto& pass : all_passes()) {
          if (!selected(opt.passes, pass)) continue;
          for (const auto& mode : all_modes())
            if (selected(opt.modes, mode)) keys.push_back({op, be, dt, mode, pass});
        }
      }
    }
  }
  std::vector<Cell> cells;
  for (const auto& k : keys) {
    cells.push_back(probe_cell(k, opt.variant));
    if (progress) progress(cells.back(), static_cast<int>(cells.size()), static_cast<int>(keys.size()));
  }
  return cells;
}

std::string cell_json(const Cell& c) {
  std::ostringstream os;
  char num[160];
  os << "{\"kind\":\"capability\",\"op\":\"" << c.key.op << "\",\"backend\":\"" << c.key.backend << "\",\"dtype\":\""
     << c.key.dtype << "\",\"mode\":\"" << c.key.mode << "\",\"pass\":\"" << c.key.pass << "\",\"status\":\""
     << status_name(c.status) << "\"";
  if (!c.category.empty()) os << ",\"category\":\"" << escape(c.category) << "\"";
  if (!c.reason.empty()) os << ",\"reason\":\"" << escape(c.reason) << "\"";
  if (c.num_checked > 0) {
    std::snprintf(num, sizeof num, ",\"worst\":\"%s\",\"rel_rms_err\":%.3g,\"max_abs_err\":%.3g,\"bar\":%.3g,\"checked\":%d",
                  escape(c.worst).c_str(), c.rel_rms_err, c.max_abs_err, c.bar, c.num_checked);
    os << num;
  }
  std::snprintf(num, sizeof num, ",\"ms\":%.1f}", c.ms);
  os << num;
  return os.str();
}

std::string matrix_text(const std::vector<Cell>& cells) {
  const Table t = tabulate(cells);
  std::ostringstream os;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%-22s", "op backend dtype");
  os << buf;
  for (const auto& c : columns()) {
    std::snprintf(buf, sizeof buf, " %-15s", (c.mode + " " + c.pass).c_str());
    os << buf;
  }
  os << "\n";
  for (size_t i = 0; i < t.rows.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%-22s", t.row_names[i].c_str());
    os << buf;
    for (const Cell* c : t.rows[i]) {
      std::snprintf(buf, sizeof buf, " %-15s", cell_text(c, t).c_str());
      os << buf;
    }
    os << "\n";
  }
  for (size_t i = 0; i < t.reasons.size(); ++i) os << "[" << i + 1 << "] " << t.reasons[i] << "\n";
  return os.str();
}

}  // namespace linattn::caps
