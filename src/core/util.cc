// Environment access.
#include "core/util.h"

#include <cstdlib>

namespace linattn {
std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : fallback;
}
}  // namespace linattn
