// colikv: the command-line tool. Imports, exports, inspects and verifies
// .coli_kv files and manages the conversations of a store.
//
// The tool holds no storage logic: it parses arguments, calls the library
// (colikv/store.h, colikv/coli_kv.h) and formats what it returns.
//
//   exit 0  success
//   exit 1  failure, including problems found by `verify` or `inspect`
//   exit 2  wrong usage: unknown command or option, missing or extra
//           arguments, a bad number
//
// Errors go to stderr as one line: "colikv: <command>: <message>".
// `--json` output is one JSON document on stdout, pretty-printed with a
// two-space indent; its keys are listed in each command's --help text and
// are stable: new keys may be added, existing ones keep name and meaning.
//
// This file holds only the dispatch and the handling of errors; each command
// is in tools/cli/cmd_NAME.cpp, the argument parser in tools/cli/args.h, the
// JSON writer in tools/cli/json.h.
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "colikv/error.h"
#include "cli/args.h"
#include "cli/cli_output.h"
#include "cli/commands.h"
#include "cli/disk_full.h"

namespace {

using colikv_cli::CommandSpec;
using colikv_cli::kExitFailure;
using colikv_cli::kExitOk;
using colikv_cli::kExitUsage;

void error_line(const std::string& command, const std::string& message) {
  std::fflush(stdout);
  std::string line = "colikv: " + (command.empty() ? "" : command + ": ") + message;
  // One line: a message with newlines (e.g. from SQLite) is joined; and the
  // ids, titles and paths it quotes must not drive the terminal.
  for (char& ch : line)
    if (ch == '\n' || ch == '\r') ch = ' ';
  std::fprintf(stderr, "%s\n", colikv_cli::shown(line).c_str());
}

// " (did you mean NAME?)" for the command nearest a mistyped one, or "".
std::string command_hint(const std::string& typed) {
  std::vector<std::string> names;
  for (const auto& c : colikv_cli::commands()) names.push_back(c.name);
  if (!typed.empty() && typed[0] == '-') names = {"--help", "--version"};
  const std::string near = colikv_cli::nearest(typed, names);
  return near.empty() ? "" : " (did you mean " + near + "?)";
}

int unknown_command(const std::string& typed) {
  const char* what = !typed.empty() && typed[0] == '-' ? "unknown option '" : "unknown command '";
  error_line("", what + typed + "'" + command_hint(typed) + " (see colikv --help)");
  return kExitUsage;
}

// `colikv help --commands`, `--options NAME`, `--man`: what the completion
// script and the build's man page read, from the same tables as --help.
int run_help_listing(const std::vector<std::string>& args) {
  const std::string& what = args[1];
  if (what == "--commands" && args.size() == 2) {
    colikv_cli::print(colikv_cli::command_names());
  } else if (what == "--man" && args.size() == 2) {
    colikv_cli::print(colikv_cli::man_page());
  } else if (what == "--options" && args.size() == 3) {
    const CommandSpec* c = colikv_cli::find_command(args[2]);
    if (!c) return unknown_command(args[2]);
    colikv_cli::print(colikv_cli::option_names(*c));
  } else {
    error_line("help", "expected 'colikv help [COMMAND]', 'colikv help --commands', 'colikv help --options COMMAND' "
                       "or 'colikv help --man'");
    return kExitUsage;
  }
  return kExitOk;
}

// `colikv`, `colikv --help`, `colikv help [COMMAND]`.
int run_help(const std::vector<std::string>& args) {
  if (args.empty()) {
    std::fputs(colikv_cli::main_help().c_str(), stderr);
    return kExitUsage;
  }
  if (args.size() > 1 && args[0] == "help" && args[1].size() > 2 && args[1].compare(0, 2, "--") == 0)
    return run_help_listing(args);
  if (args.size() > 1 && args[0] == "help") {
    const CommandSpec* c = colikv_cli::find_command(args[1]);
    if (!c) return unknown_command(args[1]);
    colikv_cli::print(colikv_cli::command_help(*c));
  } else {
    colikv_cli::print(colikv_cli::main_help());
  }
  return kExitOk;
}

bool is_help_request(const std::vector<std::string>& args) {
  return args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help";
}

// Output that could not be written is a failure, whatever the command did.
int checked_output(const CommandSpec& c, int code) {
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    error_line(c.name, std::string("cannot write the output: ") + std::strerror(errno));
    return kExitFailure;
  }
  return code;
}

// Runs the command with the arguments that follow its name; every error is
// reported as one line and turned into its exit status.
int run_command(const CommandSpec& c, const std::vector<std::string>& argv) {
  int code;
  colikv_cli::Args a;
  try {
    if (colikv_cli::asks_for_help(argv)) {
      colikv_cli::print(colikv_cli::command_help(c));
      code = kExitOk;
    } else {
      a = colikv_cli::parse_command_args(c, argv);
      code = c.handler(a);
    }
  } catch (const colikv_cli::UsageError& e) {
    error_line(c.name, e.message + " (see colikv " + c.name + " --help)");
    return kExitUsage;
  } catch (const colikv_cli::Failure& e) {
    error_line(c.name, e.message);
    return kExitFailure;
  } catch (const colikv::Error& e) {
    std::string message = e.what();
    if (e.code() == colikv::ErrorCode::kDiskFull && c.store_first && !a.positional.empty())
      message += colikv_cli::disk_full_advice(a.positional[0]);
    if (e.code() == colikv::ErrorCode::kDiskFull || e.code() == colikv::ErrorCode::kIO)
      message += colikv_cli::file_size_limit_note();
    error_line(c.name, message);
    return kExitFailure;
  } catch (const std::bad_alloc&) {
    error_line(c.name, "out of memory");
    return kExitFailure;
  } catch (const std::exception& e) {
    error_line(c.name, e.what());
    return kExitFailure;
  }
  return checked_output(c, code);
}

int run(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (is_help_request(args)) return run_help(args);
  const std::string& first = args[0];
  if (first == "--version" || first == "-V") {
    if (args.size() > 1) {
      error_line("", "unexpected argument '" + args[1] + "' after " + first + " (colikv version --json gives JSON)");
      return kExitUsage;
    }
    colikv_cli::print(colikv_cli::version_line());
    return std::fflush(stdout) == 0 ? kExitOk : kExitFailure;
  }
  const CommandSpec* c = colikv_cli::find_command(first);
  if (!c) return unknown_command(first);
  return run_command(*c, std::vector<std::string>(args.begin() + 1, args.end()));
}

}  // namespace

int main(int argc, char** argv) {
  // Past a file-size limit (ulimit -f) a write should fail with EFBIG and be
  // reported, not kill the tool between a commit and its output.
  std::signal(SIGXFSZ, SIG_IGN);
  return run(argc, argv);
}
