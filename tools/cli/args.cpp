#include "args.h"

#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstdint>

#include "colikv/store.h"

namespace colikv_cli {
namespace {

const OptionSpec* find_option(const std::vector<OptionSpec>& options, const std::string& name) {
  const OptionSpec* spec = nullptr;
  for (const auto& o : options)
    if (name == o.name) spec = &o;
  return spec;
}

// Reads the option at argv[i] (and its value, advancing i) into out.
void parse_option(const Syntax& syntax, const std::vector<std::string>& argv, size_t& i, Args& out) {
  const std::string& s = argv[i];
  std::string name = s, value;
  bool inline_value = false;
  size_t eq = s.find('=');
  if (s.compare(0, 2, "--") == 0 && eq != std::string::npos) {
    name = s.substr(0, eq);
    value = s.substr(eq + 1);
    inline_value = true;
  }
  const OptionSpec* spec = find_option(syntax.options, name);
  if (!spec) {
    if (s[1] >= '0' && s[1] <= '9') throw UsageError{"bad number '" + s + "' (expected a non-negative integer)"};
    std::vector<std::string> names{"--help"};
    for (const auto& o : syntax.options) names.push_back(o.name);
    const std::string near = nearest(name, names);
    throw UsageError{"unknown option '" + name + "'" + (near.empty() ? "" : " (did you mean " + near + "?)")};
  }
  if (spec->takes_value && !inline_value) {
    if (i + 1 >= argv.size()) throw UsageError{"option " + name + " needs a value"};
    value = argv[++i];
  } else if (!spec->takes_value && inline_value) {
    throw UsageError{"option " + name + " takes no value"};
  }
  out.options[name] = value;
}

void check_positional_count(const Syntax& syntax, const Args& args) {
  if (args.positional.size() < syntax.min_positional)
    throw UsageError{"missing arguments: expected '" + syntax.usage + "'"};
  if (args.positional.size() > syntax.max_positional)
    throw UsageError{"unexpected argument '" + args.positional[syntax.max_positional] + "'"};
}

}  // namespace

bool asks_for_help(const std::vector<std::string>& argv) {
  for (const auto& s : argv) {
    if (s == "--") break;
    if (s == "--help" || s == "-h") return true;
  }
  return false;
}

Args parse_args(const Syntax& syntax, const std::vector<std::string>& argv) {
  Args out;
  bool only_positional = false;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& s = argv[i];
    if (!only_positional && s == "--") {
      only_positional = true;
    } else if (only_positional || s.size() < 2 || s[0] != '-') {
      out.positional.push_back(s);
    } else {
      parse_option(syntax, argv, i, out);
    }
  }
  check_positional_count(syntax, out);
  return out;
}

int64_t parse_count(const std::string& text, const std::string& what) {
  int64_t v = 0;
  const char* b = text.data();
  const char* e = b + text.size();
  auto r = std::from_chars(b, e, v);
  if (text.empty() || text[0] < '0' || text[0] > '9' || r.ec != std::errc() || r.ptr != e)
    throw UsageError{"bad number '" + text + "' for " + what + " (expected a non-negative integer)"};
  return v;
}

const char* const kSizeUnitsHelp =
    "sizes: a whole number of bytes, or with a unit: k, M, G, T are powers of\n"
    "1000 (1G = 10^9 bytes; 1GB the same), KiB, MiB, GiB, TiB powers of 1024\n"
    "(1GiB = 2^30 bytes)\n";

int64_t parse_size(const std::string& text, const std::string& what) {
  const std::string bad = "bad size '" + text + "' for " + what +
                          " (expected a whole number of bytes, optionally with a unit: 512MiB, 1G, 64k)";
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0) throw UsageError{bad};
  int64_t n = 0;
  auto r = std::from_chars(text.data(), text.data() + digits, n);
  if (r.ec == std::errc::result_out_of_range) throw UsageError{"size '" + text + "' for " + what + " is too large"};
  if (r.ec != std::errc()) throw UsageError{bad};
  const std::string unit = text.substr(digits);
  struct Unit {
    const char* name;
    int64_t factor;
  };
  static const Unit kUnits[] = {
      {"", 1},           {"B", 1},
      {"k", 1000},       {"K", 1000},       {"kB", 1000},      {"KB", 1000},
      {"M", 1000000},    {"MB", 1000000},   {"G", 1000000000}, {"GB", 1000000000},
      {"T", 1000000000000}, {"TB", 1000000000000},
      {"KiB", int64_t{1} << 10}, {"MiB", int64_t{1} << 20}, {"GiB", int64_t{1} << 30}, {"TiB", int64_t{1} << 40},
  };
  for (const Unit& u : kUnits) {
    if (unit != u.name) continue;
    if (n > INT64_MAX / u.factor) throw UsageError{"size '" + text + "' for " + what + " is too large"};
    return n * u.factor;
  }
  throw UsageError{bad};
}

namespace {

// Optimal string alignment distance: insertions, deletions, substitutions
// and swaps of two neighbours each cost one.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

}  // namespace

std::string nearest(const std::string& typed, const std::vector<std::string>& candidates) {
  // What a typed word can be compared with without quadratic cost on garbage.
  if (typed.size() > 64) return "";
  std::string best;
  size_t best_distance = SIZE_MAX;
  for (const auto& c : candidates) {
    const size_t d = edit_distance(typed, c);
    if (d < best_distance) {
      best = c;
      best_distance = d;
    }
  }
  // A typo is a couple of edits, fewer in a short word; past that the nearest
  // name would be a guess, not a correction.
  const size_t allowed = std::max<size_t>(1, std::min<size_t>(2, typed.size() / 3));
  return best_distance <= allowed ? best : "";
}

int64_t parse_duration_ms(const std::string& text, const std::string& what) {
  const std::string bad = "bad duration '" + text + "' for " + what + " (expected a whole number and a unit: 90s, 15m, 12h, 30d)";
  if (text.size() < 2) throw UsageError{bad};
  int64_t unit_ms = 0;
  switch (text.back()) {
    case 's': unit_ms = 1000; break;
    case 'm': unit_ms = 60 * 1000; break;
    case 'h': unit_ms = 3600 * 1000; break;
    case 'd': unit_ms = 86400 * 1000; break;
    default: throw UsageError{bad};
  }
  const std::string number = text.substr(0, text.size() - 1);
  int64_t n = 0;
  auto r = std::from_chars(number.data(), number.data() + number.size(), n);
  if (number[0] < '0' || number[0] > '9' || r.ec != std::errc() || r.ptr != number.data() + number.size())
    throw UsageError{bad};
  if (n > INT64_MAX / unit_ms) throw UsageError{"duration '" + text + "' for " + what + " is too long"};
  return n * unit_ms;
}

std::optional<int64_t> parse_limit(const std::string& text, const std::string& what,
                                   int64_t (*parse)(const std::string&, const std::string&)) {
  if (text == "none") return std::nullopt;
  return parse(text, what);
}

ProgressMode progress_mode(const Args& a) {
  if (a.has("--progress") && a.has("--quiet")) throw UsageError{"--progress and --quiet exclude each other"};
  if (a.has("--progress")) return ProgressMode::kOn;
  if (a.has("--quiet")) return ProgressMode::kOff;
  return ProgressMode::kAuto;
}

bool is_new_store_file(const std::string& store) {
  if (colikv::is_postgres_location(store)) return false;
  struct stat st;
  return ::stat(colikv::store_file_of(store).c_str(), &st) != 0;
}

int64_t store_file_bytes(const std::string& store) {
  if (colikv::is_postgres_location(store)) return 0;
  struct stat st;
  return ::stat(colikv::store_file_of(store).c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
}

colikv::Options base_options(const Args& a) {
  colikv::Options o;
  if (a.has("--busy-timeout")) {
    int64_t ms = parse_count(a.value("--busy-timeout"), "--busy-timeout");
    if (ms > 0x7fffffff) throw UsageError{"--busy-timeout " + a.value("--busy-timeout") + " is too large"};
    o.busy_timeout_ms = static_cast<int>(ms);
  }
  if (a.has("--file-mode")) {  // the commands that create a store
    const std::string& m = a.value("--file-mode");
    if (m.empty() || m.size() > 4 || m.find_first_not_of("01234567") != std::string::npos || std::stoi(m, nullptr, 8) > 0777)
      throw UsageError{"bad value '" + m + "' for --file-mode (expected octal permission bits, 0 to 0777, such as 0640)"};
    o.file_mode = std::stoi(m, nullptr, 8);
  }
  // The library refuses a name with a control character or over 255 bytes.
  if (a.has("--tenant")) o.tenant = a.value("--tenant");
  if (a.has("--sync")) {
    std::string s = a.value("--sync");
    if (s == "full") o.synchronous = colikv::Synchronous::kFull;
    else if (s == "normal") o.synchronous = colikv::Synchronous::kNormal;
    else throw UsageError{"bad value '" + s + "' for --sync (expected normal or full)"};
  }
  return o;
}

colikv::Options read_options(const Args& a) {
  colikv::Options o = base_options(a);
  o.read_only = true;
  o.create_if_missing = false;
  return o;
}

colikv::Options write_options(const Args& a) {
  colikv::Options o = base_options(a);
  o.create_if_missing = false;
  o.create_tenant_if_missing = false;  // rm, rename, gc, ... of a tenant that is not there: "no such tenant"
  return o;
}

}  // namespace colikv_cli
