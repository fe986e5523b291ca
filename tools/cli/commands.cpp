#include "commands.h"

#include <algorithm>
#include <cstring>

namespace colikv_cli {
namespace {

// The help of the options several commands share, added to a command's own.
const char* const kSyncHelp =
    "  --sync full|normal  durability of the commit: full (default) survives a power\n"
    "                      loss; normal survives a process crash\n";
const char* const kProgressHelp =
    "  --progress          show progress on stderr even when it is not a terminal\n"
    "  --quiet             never show progress (default: shown when stderr is a\n"
    "                      terminal and the data is over 64 MiB)\n";
const char* const kBusyHelp =
    "  --busy-timeout MS   wait up to MS milliseconds for another process's lock\n"
    "                      (default 5000)\n";

const char* const kTenantHelp =
    "  --tenant NAME       the tenant (sharing domain) whose conversations to see\n"
    "                      (default: the default tenant, \"\"); a read-only command\n"
    "                      fails on a tenant the store does not hold\n";

bool has_option(const CommandSpec& c, const char* name) {
  return std::any_of(c.options.begin(), c.options.end(),
                     [&](const OptionSpec& o) { return std::strcmp(o.name, name) == 0; });
}

}  // namespace

const std::vector<CommandSpec>& commands() {
  static const std::vector<CommandSpec> all = {
      import_command(), export_command(), inspect_command(), ls_command(),       info_command(),
      rm_command(),     rename_command(), fork_command(),    truncate_command(), verify_command(),
      stats_command(),  match_command(),  gc_command(),      vacuum_command(),   copy_command(),
      tenants_command(),
      tenant_command(),
      version_command(),
  };
  return all;
}

const CommandSpec* find_command(const std::string& name) {
  for (const auto& c : commands())
    if (name == c.name) return &c;
  return nullptr;
}

Args parse_command_args(const CommandSpec& c, const std::vector<std::string>& argv) {
  const Syntax syntax{std::string("colikv ") + c.name + " " + c.synopsis, c.options, c.min_positional,
                      c.max_positional};
  return parse_args(syntax, argv);
}

std::string command_help(const CommandSpec& c) {
  std::string h = std::string("usage: colikv ") + c.name + " " + c.synopsis + "\n\n" + c.summary + ".\n\n" +
                  c.description + "\noptions:\n" + c.option_help;
  if (has_option(c, "--sync")) h += kSyncHelp;
  if (has_option(c, "--progress")) h += kProgressHelp;
  if (has_option(c, "--busy-timeout")) h += kBusyHelp;
  if (has_option(c, "--tenant")) h += kTenantHelp;
  h += "  -h, --help          show this help\n";
  if (has_option(c, "--max-bytes")) h += std::string("\n") + kSizeUnitsHelp;
  if (!c.json_help.empty()) h += "\n--json keys (stable; new keys may be added):\n" + c.json_help;
  h += "\nexit status: 0 success, 1 failure, 2 wrong usage\n";
  return h;
}

std::string main_help() {
  std::string h =
      "usage: colikv COMMAND ARGS... [OPTIONS]\n"
      "\n"
      "colikv keeps the KV caches of LLM conversations in a store, and imports and\n"
      "exports the engine's .coli_kv files byte for byte.\n"
      "\n"
      "STORE is a SQLite file (a path: created by import or copy when missing) or\n"
      "a PostgreSQL connection URI (postgresql://USER@HOST:PORT/DB or postgres://...;\n"
      "the password from ~/.pgpass or PGPASSWORD, never the command line).\n"
      "\n"
      "commands:\n";
  for (const auto& c : commands())
    h += std::string("  ") + c.name + " " + c.synopsis + "\n      " + c.summary + "\n";
  h +=
      "\n"
      "Run 'colikv COMMAND --help' for a command's options and its --json keys;\n"
      "'colikv --version' for the versions. Sizes (--max-bytes) take units: 1G is\n"
      "10^9 bytes, 1GiB 2^30. 'colikv help --commands' and 'colikv help --options\n"
      "COMMAND' list names one a line, for completion scripts.\n"
      "Exit status: 0 success; 1 failure (including problems found by verify or\n"
      "inspect); 2 wrong usage. Errors are one line on stderr: 'colikv: COMMAND: ...'.\n";
  return h;
}

std::string command_names() {
  std::string out;
  for (const auto& c : commands()) out += std::string(c.name) + "\n";
  return out;
}

std::string option_names(const CommandSpec& c) {
  std::string out;
  for (const auto& o : c.options) out += std::string(o.name) + "\n";
  return out + "--help\n";
}

}  // namespace colikv_cli
