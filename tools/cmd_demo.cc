// `linattn demo`: placeholder until the CPU backend lands; prints the version and exits 0.
#include <cstdio>

#include "cli.h"
#include "linattn/ops.h"

namespace linattn::cli {
static int cmd_demo(const Args& args) {
  std::printf("linattn %s demo (backend %s): fast paths not built yet\n", version(),
              flag(args, "backend", "cpu").c_str());
  return 0;
}
LINATTN_SUBCOMMAND("demo", "run the reference and the fastest path on a sample varlen batch", cmd_demo);
}  // namespace linattn::cli
