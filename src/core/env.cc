// Checked environment switches (env.h).
#include "core/env.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "core/check.h"

namespace linattn {
namespace {

// "a (the default, also when unset or empty), b, c or d"; no mark when default_index names no value.
std::string list_accepted(std::initializer_list<std::string_view> accepted, int default_index) {
  std::string s;
  int i = 0;
  const int n = static_cast<int>(accepted.size());
  for (std::string_view a : accepted) {
    if (i > 0) s += i + 1 == n ? " or " : ", ";
    s += a;
    if (i == default_index) s += " (the default, also when unset or empty)";
    ++i;
  }
  return s;
}

// LINATTN_CHECK's error (kInvalidArgument), thrown unconditionally.
[[noreturn]] void reject(const char* name, std::string_view value, const std::string& expected,
                         std::string_view note) {
  detail::throw_error(ErrorCode::kInvalidArgument, FailureCategory::kNone, __FILE__, __LINE__,
                      detail::str_cat(name, "=", value, ": expected ", expected, note.empty() ? "" : "; ", note));
}

}  // namespace

int choice_index(const char* name, std::string_view value, std::initializer_list<std::string_view> accepted,
                 int default_index, std::string_view note) {
  if (value.empty()) return default_index;
  int i = 0;
  for (std::string_view a : accepted) {
    if (value == a) return i;
    ++i;
  }
  const bool named = default_index >= 0 && default_index < i;
  reject(name, value, list_accepted(accepted, default_index) + (named ? "" : " (or unset or empty: the default)"),
         note);
}

int env_choice(const char* name, std::initializer_list<std::string_view> accepted, int default_index,
               std::string_view note) {
  const char* v = std::getenv(name);
  return choice_index(name, v ? std::string_view(v) : std::string_view(), accepted, default_index, note);
}

bool env_flag(const char* name, bool fallback, std::string_view note) {
  return env_choice(name, {"0", "1"}, fallback ? 1 : 0, note) == 1;
}

uint64_t choice_tokens(const char* name, std::string_view value, std::initializer_list<std::string_view> accepted,
                       std::string_view note) {
  LINATTN_ASSERT(accepted.size() <= 64, "choice_tokens: at most 64 tokens, got ", accepted.size());
  uint64_t mask = 0;
  size_t b = 0;
  while (b <= value.size()) {
    const size_t e = std::min(value.find('+', b), value.size());
    const std::string_view tok = value.substr(b, e - b);
    int i = 0;
    bool found = false;
    for (std::string_view a : accepted) {
      if (!tok.empty() && tok == a) {
        mask |= uint64_t(1) << i;
        found = true;
        break;
      }
      ++i;
    }
    if (!found) reject(name, value, "'+'-joined " + list_accepted(accepted, -1), note);
    b = e + 1;
  }
  return mask;
}

}  // namespace linattn
