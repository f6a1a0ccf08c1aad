// linattn::Error construction and the names of codes and failure categories.
#include "linattn/error.h"

#include "core/check.h"

#include <sstream>

namespace linattn {

const char* error_code_name(ErrorCode c) {
  switch (c) {
    case ErrorCode::kInvalidArgument: return "invalid-argument";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kCaptureViolation: return "capture-violation";
    case ErrorCode::kBackend: return "backend";
    case ErrorCode::kInternal: return "internal";
  }
  return "?";
}

const char* failure_category_name(FailureCategory c) {
  switch (c) {
    case FailureCategory::kNone: return "none";
    case FailureCategory::kUnsupportedOp: return "unsupported-op";
    case FailureCategory::kAddressOrLifetime: return "address-or-lifetime";
    case FailureCategory::kStaleOrDynamicMetadata: return "stale-or-dynamic-metadata";
    case FailureCategory::kSentinelOffsetOrPadding: return "sentinel-offset-or-padding";
    case FailureCategory::kEagerBackend: return "eager-backend";
    case FailureCategory::kDistributed: return "distributed";
  }
  return "?";
}

static std::string format_what(ErrorCode code, FailureCategory cat, const char* file, int line,
                               const std::string& msg) {
  // ostringstream rather than string += chains: GCC 12 warns falsely (-Wrestrict) on the latter.
  std::ostringstream os;
  os << "linattn " << error_code_name(code);
  if (cat != FailureCategory::kNone) os << " [" << failure_category_name(cat) << "]";
  os << " at " << file << ":" << line << ": " << msg;
  return os.str();
}

Error::Error(ErrorCode code, FailureCategory category, const char* file, int line,
             std::string message)
    : std::runtime_error(format_what(code, category, file, line, message)),
      code_(code), category_(category), file_(file), line_(line), message_(std::move(message)) {}

namespace detail {
void throw_error(ErrorCode code, FailureCategory cat, const char* file, int line, std::string msg) {
  throw Error(code, cat, file, line, std::move(msg));
}
}  // namespace detail

}  // namespace linattn
