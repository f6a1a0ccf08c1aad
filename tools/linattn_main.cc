// linattn: one CLI binary with subcommands (demo, version, and those registered by cmd_*.cc).
#include <cstdio>
#include <exception>
#include <map>
#include <string>

#include "cli.h"
#include "linattn/error.h"
#include "linattn/ops.h"

namespace linattn::cli {
namespace {
struct Entry { const char* help; CommandFn fn; };
std::map<std::string, Entry>& registry() {
  static std::map<std::string, Entry> r;
  return r;
}
}  // namespace

Registrar::Registrar(const char* name, const char* help, CommandFn fn) { registry()[name] = {help, fn}; }

std::string flag(const Args& args, const std::string& name, const std::string& fallback) {
  const std::string key = "--" + name;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == key && i + 1 < args.size()) return args[i + 1];
    if (args[i].rfind(key + "=", 0) == 0) return args[i].substr(key.size() + 1);
  }
  return fallback;
}

bool has_flag(const Args& args, const std::string& name) {
  for (const auto& a : args)
    if (a == "--" + name) return true;
  return false;
}

static int cmd_version(const Args&) {
  std::printf("linattn %s\n", version());
  return 0;
}
LINATTN_SUBCOMMAND("version", "print the library version", cmd_version);

}  // namespace linattn::cli

int main(int argc, char** argv) {
  using namespace linattn::cli;
  auto& reg = registry();
  if (argc < 2 || reg.find(argv[1]) == reg.end()) {
    std::fprintf(stderr, "usage: linattn <command> [options]\ncommands:\n");
    for (auto& [name, e] : reg) std::fprintf(stderr, "  %-14s %s\n", name.c_str(), e.help);
    return argc < 2 ? 1 : 2;
  }
  Args args(argv + 2, argv + argc);
  try {
    return reg[argv[1]].fn(args);
  } catch (const linattn::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 3;
  }
}
