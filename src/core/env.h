// Checked environment switches: a LINATTN_* variable that takes one value of a fixed set (env_or in util.h
// reads a raw value). Unset or empty means the switch's default; any other value not in the set throws
// kInvalidArgument naming the variable, the value given and every accepted value, never a silent default.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string_view>

namespace linattn {

// Index in `accepted` of `value`; `default_index` when `value` is empty. `default_index` may lie outside the
// list (e.g. -1): a default that no value names (a shape rule, a planner). Otherwise throws
//   NAME=value: expected a (the default, also when unset or empty), b, c or d[; note]
// ("(or unset or empty: the default)" after the list when no value is the default). Exact, case-sensitive.
int choice_index(const char* name, std::string_view value, std::initializer_list<std::string_view> accepted,
                 int default_index, std::string_view note = {});

// choice_index on the environment variable `name` (unset reads as empty); read on every call.
int env_choice(const char* name, std::initializer_list<std::string_view> accepted, int default_index,
               std::string_view note = {});

// A 0 / 1 switch: true for "1", false for "0", `fallback` when unset or empty; anything else throws.
bool env_flag(const char* name, bool fallback, std::string_view note = {});

// A '+'-joined list of tokens from `accepted` (at most 64): bit i of the result is set when accepted[i] is
// named. Empty tokens ("a+", "+a") and unknown ones throw
//   NAME=value: expected '+'-joined a, b, c or d[; note]
// The caller handles an empty `value` (its default) before asking.
uint64_t choice_tokens(const char* name, std::string_view value, std::initializer_list<std::string_view> accepted,
                       std::string_view note = {});

}  // namespace linattn
