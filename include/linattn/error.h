// The one error type of linattn. Library code never prints, exits or aborts: it throws
// linattn::Error carrying a code (what kind of mistake), a failure category (GRAPH_CONTRACT.md
// section 7, or kNone) and where it was raised.
#pragma once
#include <stdexcept>
#include <string>

namespace linattn {

enum class ErrorCode {
  kInvalidArgument,  // wrong shape, dtype, device, value (Python: ValueError)
  kUnsupported,      // valid but not implemented here (Python: NotImplementedError)
  kCaptureViolation, // forbidden work while a graph capture is active
  kBackend,          // a CUDA / runtime call failed
  kInternal,         // a broken invariant inside linattn
};

enum class FailureCategory {
  kNone,
  kUnsupportedOp,             // "unsupported-op"
  kAddressOrLifetime,         // "address-or-lifetime"
  kStaleOrDynamicMetadata,    // "stale-or-dynamic-metadata"
  kSentinelOffsetOrPadding,   // "sentinel-offset-or-padding"
  kEagerBackend,              // "eager-backend"
  kDistributed,               // "distributed"
};

const char* error_code_name(ErrorCode c);
const char* failure_category_name(FailureCategory c);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, FailureCategory category, const char* file, int line, std::string message);
  ErrorCode code() const { return code_; }
  FailureCategory category() const { return category_; }
  const std::string& file() const { return file_; }
  int line() const { return line_; }
  const std::string& message() const { return message_; }  // without the location prefix

 private:
  ErrorCode code_;
  FailureCategory category_;
  std::string file_;
  int line_;
  std::string message_;
};

}  // namespace linattn
