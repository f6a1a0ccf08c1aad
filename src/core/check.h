// LINATTN_CHECK and friends: build a message from any streamable parts and throw linattn::Error
// with the caller's file:line. Library code reports every failure through these.
#pragma once
#include <sstream>
#include <string>

#include "linattn/error.h"

namespace linattn::detail {

template <class... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

[[noreturn]] void throw_error(ErrorCode code, FailureCategory cat, const char* file, int line,
                              std::string msg);

}  // namespace linattn::detail

// Generic: code and category explicit.
#define LINATTN_CHECK_CODE(cond, code, category, ...)                                         \
  do {                                                                                      \
    if (!(cond)) [[unlikely]]                                                               \
      ::linattn::detail::throw_error((code), (category), __FILE__, __LINE__,                \
                                     ::linattn::detail::str_cat(__VA_ARGS__));              \
  } while (0)

// Invalid argument, no graph category.
#define LINATTN_CHECK(cond, ...)                                                            \
  LINATTN_CHECK_CODE(cond, ::linattn::ErrorCode::kInvalidArgument,                          \
                     ::linattn::FailureCategory::kNone, __VA_ARGS__)

// Valid request that this build / backend cannot do.
#define LINATTN_UNSUPPORTED(...)                                                            \
  ::linattn::detail::throw_error(::linattn::ErrorCode::kUnsupported,                        \
                                 ::linattn::FailureCategory::kUnsupportedOp, __FILE__,      \
                                 __LINE__, ::linattn::detail::str_cat(__VA_ARGS__))

// Broken internal invariant.
#define LINATTN_ASSERT(cond, ...)                                                           \
  LINATTN_CHECK_CODE(cond, ::linattn::ErrorCode::kInternal,                                 \
                     ::linattn::FailureCategory::kNone, "internal: ", __VA_ARGS__)
