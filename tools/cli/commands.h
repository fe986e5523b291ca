// The commands of the colikv tool: each is a function of its parsed
// arguments, defined with its help text in its own cmd_NAME.cpp.
#ifndef COLIKV_TOOLS_CLI_COMMANDS_H
#define COLIKV_TOOLS_CLI_COMMANDS_H

#include <cstddef>
#include <string>
#include <vector>

#include "args.h"

namespace colikv_cli {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

using Handler = int (*)(const Args&);

struct CommandSpec {
  const char* name;
  const char* synopsis;     // after "colikv NAME "
  const char* summary;      // one line, for `colikv --help`
  std::string description;  // what it does, for `colikv NAME --help`
  std::string option_help;  // its own options (the shared ones are added)
  std::string json_help;    // the keys of its --json output; "" if none
  size_t min_positional;
  size_t max_positional;
  std::vector<OptionSpec> options;
  Handler handler;
  // Its first argument is a store (a disk-full error then says how much to free).
  bool store_first = true;
};

// Every command, in the order `colikv --help` lists them.
const std::vector<CommandSpec>& commands();

// nullptr if there is none.
const CommandSpec* find_command(const std::string& name);

// The arguments after the command name, checked against the command's syntax.
Args parse_command_args(const CommandSpec& c, const std::vector<std::string>& argv);

// `colikv --help`, and `colikv NAME --help`.
std::string main_help();
std::string command_help(const CommandSpec& c);

// One per cmd_NAME.cpp.
CommandSpec import_command();
CommandSpec export_command();
CommandSpec inspect_command();
CommandSpec ls_command();
CommandSpec info_command();
CommandSpec rm_command();
CommandSpec rename_command();
CommandSpec fork_command();
CommandSpec truncate_command();
CommandSpec verify_command();
CommandSpec stats_command();
CommandSpec match_command();
CommandSpec gc_command();
CommandSpec vacuum_command();
CommandSpec copy_command();
CommandSpec tenants_command();
CommandSpec tenant_command();
CommandSpec version_command();

// "colikv 0.1.0 (library 0.1.0, SQLite schema N)\n": colikv --version.
std::string version_line();

// Names for a completion script: every command, one a line; a command's
// options, one a line (colikv help --commands, colikv help --options NAME).
std::string command_names();
std::string option_names(const CommandSpec& c);

// The man page colikv(1) in roff, made of main_help() and every
// command_help() (man_page.cpp): generated at build time, it cannot drift.
std::string man_page();

}  // namespace colikv_cli

#endif  // COLIKV_TOOLS_CLI_COMMANDS_H
