// Small integer helpers and environment access.
#pragma once
#include <cstdint>
#include <string>

namespace linattn {

constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
constexpr int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

// Value of an environment variable, or `fallback` when unset.
std::string env_or(const char* name, const std::string& fallback);

}  // namespace linattn
