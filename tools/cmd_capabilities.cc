// `linattn capabilities [--json] [--op a,b] [--backend cpu,cuda] [--dtype ..]
//   [--mode eager,fixed,graph] [--pass fwd,fwdbwd] [--variant N]`: probes the capability matrix
// (tools/capabilities.h) and prints it: a console table (default), JSON lines (an environment
// line, then one {"kind":"capability",...} line per cell; scripts/update-readme-capabilities
// renders the README's table from them). A progress line goes to stderr when
// it is a terminal. Exit status 1 when any cell failed (unsupported cells are not failures).
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <sstream>
#include <string>

#include "bench.h"
#include "capabilities.h"
#include "cli.h"
#include "core/thread_pool.h"

namespace linattn::cli {
namespace {

#if LINATTN_WITH_CUDA
constexpr bool kCudaBuild = true;
#else
constexpr bool kCudaBuild = false;
#endif

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> r;
  std::stringstream ss(s);
  for (std::string tok; std::getline(ss, tok, ',');)
    if (!tok.empty()) r.push_back(tok);
  return r;
}


std::string env_line() {
  const std::string commit = bench::source_commit();
  std::string cpu = bench::shell_line("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'");
  std::string gpu = bench::shell_line("nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null");
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  std::ostringstream os;
  os << "{\"kind\":\"env\",\"what\":\"capabilities\",\"device\":\"cpu: " << cpu << " ("
     << ThreadPool::global().num_threads() << " threads)" << (gpu.empty() ? "" : "; gpu: " + gpu)
     << "\",\"cuda_build\":" << (kCudaBuild ? "true" : "false") << ",\"commit\":\"" << commit
     << "\",\"date\":\"" << date << "\"}";
  return os.str();
}

void progress(const caps::Cell& c, int done, int total) {
  std::fprintf(stderr, "\r  [%d/%d] %-32s %-11s", done, total, c.key.str().c_str(), caps::status_name(c.status));
  if (done == total) std::fprintf(stderr, "\n");
}

int cmd_capabilities(const Args& args) {
  caps::ProbeOptions opt;
  opt.ops = split(flag(args, "op", ""));
  opt.backends = split(flag(args, "backend", ""));
  opt.dtypes = split(flag(args, "dtype", ""));
  opt.modes = split(flag(args, "mode", ""));
  opt.passes = split(flag(args, "pass", ""));
  opt.variant = std::stoi(flag(args, "variant", "0"));
  const bool json = has_flag(args, "json");
  const std::vector<caps::Cell> cells = caps::probe_all(opt, isatty(2) ? progress : nullptr);
  int failed = 0, supported = 0, unsupported = 0;
  for (const auto& c : cells) {
    failed += c.status == caps::Status::kFailed;
    supported += c.status == caps::Status::kSupported;
    unsupported += c.status == caps::Status::kUnsupported;
  }
  if (json) {
    std::printf("%s\n", env_line().c_str());
    for (const auto& c : cells) std::printf("%s\n", caps::cell_json(c).c_str());
  } else {
    std::printf("%s", caps::matrix_text(cells).c_str());
    std::printf("%d cells: %d supported, %d unsupported, %d failed\n", static_cast<int>(cells.size()), supported,
                unsupported, failed);
  }
  return failed ? 1 : 0;
}

}  // namespace
LINATTN_SUBCOMMAND("capabilities", "probe every op x backend x dtype x mode x pass against the reference",
                   cmd_capabilities);
}  // namespace linattn::cli
