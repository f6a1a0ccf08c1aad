// Case files of `linattn bench --cases FILE` (see bench_modes.h): each issue's benchmark is one
// command, e.g. `linattn bench --cases bench/cases/cpu-gdn.txt --json`.
#include <fstream>
#include <sstream>

#include "bench_modes.h"
#include "core/check.h"

namespace linattn::bench {

std::vector<std::vector<std::string>> read_case_file(const std::string& path) {
  std::ifstream f(path);
  LINATTN_CHECK(f.good(), "--cases: cannot read '", path, "'");
  std::vector<std::vector<std::string>> cases;
  std::string line;
  while (std::getline(f, line)) {
    const size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    std::stringstream ss(line);
    std::vector<std::string> args;
    for (std::string tok; ss >> tok;) args.push_back(tok);
    if (!args.empty()) cases.push_back(std::move(args));
  }
  LINATTN_CHECK(!cases.empty(), "--cases: no case in '", path, "'");
  return cases;
}

}  // namespace linattn::bench
