// env_choice / choice_index / env_flag / choice_tokens (core/env.h): unset and empty give the default, each
// accepted value its index, anything else an invalid-argument error naming the variable, the value and every
// accepted value.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "core/env.h"
#include "linattn/error.h"

namespace linattn {
namespace {

constexpr const char* kVar = "LINATTN_TEST_ENV_CHOICE";

// Sets kVar for a scope (unset when null) and unsets it at the end (no caller exports it).
struct SetVar {
  explicit SetVar(const char* v) { v ? setenv(kVar, v, 1) : unsetenv(kVar); }
  ~SetVar() { unsetenv(kVar); }
};

// The error of `f` (which must throw linattn::Error), as what() and code.
template <class F>
std::string error_of(const F& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    return e.message();
  }
  ADD_FAILURE() << "no error";
  return "";
}

int pick() { return env_choice(kVar, {"auto", "ring2", "tc", "tc8"}, 0, "ring3 was removed"); }

TEST(EnvChoice, UnsetAndEmptyGiveTheDefault) {
  {
    SetVar s(nullptr);
    EXPECT_EQ(pick(), 0);
    EXPECT_EQ(env_choice(kVar, {"a", "b"}, -1), -1);  // a default no value names
    EXPECT_EQ(env_choice(kVar, {"a", "b"}, 1), 1);
  }
  SetVar s("");
  EXPECT_EQ(pick(), 0);
  EXPECT_EQ(env_choice(kVar, {"a", "b"}, -1), -1);
}

TEST(EnvChoice, EachAcceptedValueGivesItsIndex) {
  const char* values[] = {"auto", "ring2", "tc", "tc8"};
  for (int i = 0; i < 4; ++i) {
    SetVar s(values[i]);
    EXPECT_EQ(pick(), i) << values[i];
  }
}

TEST(EnvChoice, UnknownValueNamesVariableValueAndEveryAcceptedValue) {
  for (const char* bad : {"ring3", "RING2", "tc ", " tc", "tc88", "0"}) {
    SetVar s(bad);
    const std::string m = error_of(pick);
    EXPECT_EQ(m, std::string(kVar) + "=" + bad +
                     ": expected auto (the default, also when unset or empty), ring2, tc or tc8; ring3 was removed");
  }
  SetVar s("c");
  EXPECT_EQ(error_of([] { env_choice(kVar, {"a", "b"}, -1); }),
            std::string(kVar) + "=c: expected a or b (or unset or empty: the default)");
  EXPECT_EQ(error_of([] { env_choice(kVar, {"a"}, -1); }),
            std::string(kVar) + "=c: expected a (or unset or empty: the default)");
  EXPECT_EQ(error_of([] { env_choice(kVar, {"a", "b", "d"}, 2); }),
            std::string(kVar) + "=c: expected a, b or d (the default, also when unset or empty)");
}

TEST(EnvChoice, ChoiceIndexChecksAValueReadAlready) {
  EXPECT_EQ(choice_index(kVar, "", {"x", "y"}, 1), 1);
  EXPECT_EQ(choice_index(kVar, "x", {"x", "y"}, 1), 0);
  EXPECT_EQ(error_of([] { choice_index(kVar, "z", {"x", "y"}, 0); }),
            std::string(kVar) + "=z: expected x (the default, also when unset or empty) or y");
}

TEST(EnvFlag, ZeroOneOrTheFallback) {
  {
    SetVar s(nullptr);
    EXPECT_TRUE(env_flag(kVar, true));
    EXPECT_FALSE(env_flag(kVar, false));
  }
  {
    SetVar s("");
    EXPECT_TRUE(env_flag(kVar, true));
  }
  {
    SetVar s("1");
    EXPECT_TRUE(env_flag(kVar, false));
  }
  {
    SetVar s("0");
    EXPECT_FALSE(env_flag(kVar, true));
  }
  for (const char* bad : {"2", "true", "on", "01", "10"}) {
    SetVar s(bad);
    EXPECT_EQ(error_of([] { env_flag(kVar, true); }),
              std::string(kVar) + "=" + bad + ": expected 0 or 1 (the default, also when unset or empty)");
  }
}

TEST(ChoiceTokens, PlusJoinedTokensGiveTheirBits) {
  const auto t = [](const char* v) { return choice_tokens(kVar, v, {"il", "tma", "tma2", "split"}); };
  EXPECT_EQ(t("il"), 1u);
  EXPECT_EQ(t("tma2"), 4u);
  EXPECT_EQ(t("tma2+il"), 5u);
  EXPECT_EQ(t("il+tma+tma2+split"), 15u);
  EXPECT_EQ(t("split+split"), 8u);
  for (const char* bad : {"", "+", "tma3", "tma2+", "+il", "il++tma", "tma2+pers", "IL"})
    EXPECT_EQ(error_of([&] { choice_tokens(kVar, bad, {"il", "tma", "tma2", "split"}, "pers was removed"); }),
              std::string(kVar) + "=" + bad + ": expected '+'-joined il, tma, tma2 or split; pers was removed")
        << bad;
}

}  // namespace
}  // namespace linattn
