// Library version.
#include "linattn/ops.h"

namespace linattn {
const char* version() { return "0.1.0"; }
}  // namespace linattn
