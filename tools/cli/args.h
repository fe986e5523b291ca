// The argument parser every command shares: options, positionals, and the
// options common to several commands (--sync, --busy-timeout, --progress).
// Wrong usage is reported by throwing UsageError (exit 2).
//
// Why an own parser rather than CLI11 or cxxopts (both in Debian): the tool's
// contract is in CommandSpec (commands.h): one table per command gives the
// parser its options, the help text, the man page (tools/cli/man_page.cpp)
// and the bash completion (tools/colikv.bash reads `colikv help --options`)
// from the same place. Those libraries generate their own help and error
// wording, which would have to be kept apart from the man page and from the
// one-line "colikv: CMD: message" errors scripts and the tests rely on, and
// they add a build dependency to a tool whose whole syntax (long options,
// --opt=value, "--", help winning over errors) fits in this file.
#ifndef COLIKV_TOOLS_CLI_ARGS_H
#define COLIKV_TOOLS_CLI_ARGS_H

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "colikv/options.h"
#include "progress.h"

namespace colikv_cli {

struct OptionSpec {
  const char* name;  // "--json"
  bool takes_value;
};

// A usage error: exit 2.
struct UsageError {
  std::string message;
};

// A failure the tool itself detects (not a colikv::Error): exit 1.
struct Failure {
  std::string message;
};

// What a command accepts.
struct Syntax {
  std::string usage;  // "colikv NAME SYNOPSIS", quoted when arguments are missing
  const std::vector<OptionSpec>& options;
  size_t min_positional;
  size_t max_positional;
};

struct Args {
  std::vector<std::string> positional;
  std::map<std::string, std::string> options;  // "--json" -> "" ; "--id" -> "x"

  bool has(const std::string& name) const { return options.count(name) != 0; }
  std::string value(const std::string& name, const std::string& fallback = "") const {
    auto it = options.find(name);
    return it == options.end() ? fallback : it->second;
  }
};

// True when -h or --help comes before any "--": help wins over every other
// argument, even a wrong one.
bool asks_for_help(const std::vector<std::string>& argv);

// The arguments after the command name, checked against syntax.
Args parse_args(const Syntax& syntax, const std::vector<std::string>& argv);

// A non-negative decimal integer that fits int64; anything else is a usage error.
int64_t parse_count(const std::string& text, const std::string& what);

// A byte count: a non-negative whole number, optionally followed by a unit:
// k, M, G, T (powers of 1000: 1G = 10^9) or KiB, MiB, GiB, TiB (powers of
// 1024: 1GiB = 2^30); "B" may follow k/M/G/T ("1GB") and the case of k/K is
// free. A sign, a fraction, an unknown unit or a value over INT64_MAX is a
// usage error naming `what`.
int64_t parse_size(const std::string& text, const std::string& what);

// The text --help shows for what parse_size accepts.
extern const char* const kSizeUnitsHelp;

// Among candidates, the one nearest to `typed` (edit distance, a swap of two
// neighbours counting as one edit), if it is near enough to be a typo;
// "" otherwise.
std::string nearest(const std::string& typed, const std::vector<std::string>& candidates);

// A duration as milliseconds: a non-negative integer and one unit, "90s",
// "15m", "12h", "30d"; anything else (no unit, a sign, a fraction, an
// overflow) is a usage error naming `what`.
int64_t parse_duration_ms(const std::string& text, const std::string& what);

// A limit of `colikv tenant`: "none" (no limit: returns none), or what parse
// (parse_count or parse_duration_ms) accepts.
std::optional<int64_t> parse_limit(const std::string& text, const std::string& what,
                                   int64_t (*parse)(const std::string&, const std::string&));

ProgressMode progress_mode(const Args& a);

// --busy-timeout, --file-mode, --tenant and --sync.
colikv::Options base_options(const Args& a);
// Stores of read-only commands: never created, never written.
colikv::Options read_options(const Args& a);
// Stores of write commands other than import and copy: must exist, and so
// must the tenant.
colikv::Options write_options(const Args& a);

// True when `store` is a file store whose file does not exist: import and
// copy create it with Options::create_staged (a server's store, created by
// its first transaction, has no file to build aside).
bool is_new_store_file(const std::string& store);

// The size of a file store's database file, for whether progress is shown by
// default; 0 for a server's store or a file that cannot be read.
int64_t store_file_bytes(const std::string& store);

}  // namespace colikv_cli

#endif  // COLIKV_TOOLS_CLI_ARGS_H
