// The linattn CLI's subcommand registry: each tools/cmd_*.cc registers one subcommand with
// LINATTN_SUBCOMMAND, so subcommands live in their own files.
#pragma once
#include <string>
#include <vector>

namespace linattn::cli {

using Args = std::vector<std::string>;
using CommandFn = int (*)(const Args& args);

struct Registrar {
  Registrar(const char* name, const char* help, CommandFn fn);
};

// Value of "--name V" or "--name=V" in args, or fallback.
std::string flag(const Args& args, const std::string& name, const std::string& fallback);
bool has_flag(const Args& args, const std::string& name);

}  // namespace linattn::cli

#define LINATTN_SUBCOMMAND(name, help, fn) \
  static ::linattn::cli::Registrar linattn_registrar_##fn(name, help, fn)
