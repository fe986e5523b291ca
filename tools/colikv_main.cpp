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
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "colikv/coli_kv.h"
#include "colikv/error.h"
#include "colikv/model.h"
#include "colikv/options.h"
#include "colikv/store.h"
#include "cli_output.h"
#include "disk_full.h"
#include "new_store.h"
#include "token_stream.h"

namespace {

using colikv_cli::bytes_both;
using colikv_cli::human_bytes;
using colikv_cli::shown;

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

// Files (or stores) above this size show progress on a terminal by default.
constexpr int64_t kProgressThresholdBytes = int64_t{64} << 20;

// ---------------------------------------------------------------------------
// A small JSON value and writer.

class Json {
 public:
  enum class Type { kNull, kBool, kInt, kDouble, kString, kArray, kObject, kIntStream };
  // Called with the text written so far when it has grown: print_to writes it out.
  using Flush = std::function<void(std::string&)>;

  Json() = default;
  static Json null() { return Json(); }
  static Json boolean(bool b) { Json j; j.type_ = Type::kBool; j.b_ = b; return j; }
  static Json integer(int64_t i) { Json j; j.type_ = Type::kInt; j.i_ = i; return j; }
  // Finite doubles are written with `decimals` digits after the point; NaN
  // and infinities as null.
  static Json number(double d, int decimals = 3) {
    Json j; j.type_ = Type::kDouble; j.d_ = d; j.decimals_ = decimals; return j;
  }
  static Json string(const std::string& s) { Json j; j.type_ = Type::kString; j.s_ = s; return j; }
  static Json array() { Json j; j.type_ = Type::kArray; return j; }
  // An array of integers produced while it is written (next returns false at
  // the end): print_to never holds more than a buffer of it.
  static Json int_stream(std::function<bool(int64_t&)> next) {
    Json j; j.type_ = Type::kIntStream; j.next_ = std::move(next); return j;
  }
  static Json object() { Json j; j.type_ = Type::kObject; return j; }

  // Object: appends a key (keys keep their insertion order).
  Json& set(const std::string& key, Json value) {
    members_.emplace_back(key, std::move(value));
    return *this;
  }
  // Array: appends an element.
  Json& push(Json value) {
    elements_.push_back(std::move(value));
    return *this;
  }

  std::string dump() const {
    std::string out;
    write(out, 0, nullptr);
    out += '\n';
    return out;
  }

  // Writes the document to f as it goes, in buffers of a bounded size.
  void print_to(std::FILE* f) const {
    std::string out;
    const Flush flush = [f](std::string& text) {
      std::fwrite(text.data(), 1, text.size(), f);
      text.clear();
    };
    write(out, 0, &flush);
    out += '\n';
    flush(out);
  }

 private:
  bool scalar() const { return type_ != Type::kArray && type_ != Type::kObject && type_ != Type::kIntStream; }

  static void indent(std::string& out, int level) { out.append(static_cast<size_t>(level) * 2, ' '); }

  void write(std::string& out, int level, const Flush* flush) const {
    switch (type_) {
      case Type::kNull: out += "null"; break;
      case Type::kBool: out += b_ ? "true" : "false"; break;
      case Type::kInt: out += std::to_string(i_); break;
      case Type::kDouble: {
        if (!std::isfinite(d_)) { out += "null"; break; }
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.*f", decimals_, d_);
        out += buf;
        break;
      }
      case Type::kString: escape(out, s_); break;
      case Type::kArray: {
        if (elements_.empty()) { out += "[]"; break; }
        bool inline_form = std::all_of(elements_.begin(), elements_.end(), [](const Json& e) { return e.scalar(); });
        out += '[';
        for (size_t i = 0; i < elements_.size(); ++i) {
          if (inline_form) {
            if (i) out += ", ";
          } else {
            out += i ? ",\n" : "\n";
            indent(out, level + 1);
          }
          elements_[i].write(out, level + 1, flush);
        }
        if (!inline_form) { out += '\n'; indent(out, level); }
        out += ']';
        break;
      }
      case Type::kIntStream: {
        out += '[';
        int64_t v;
        for (bool first = true; next_(v); first = false) {
          if (!first) out += ", ";
          out += std::to_string(v);
          if (flush && out.size() >= (size_t{1} << 16)) (*flush)(out);
        }
        out += ']';
        break;
      }
      case Type::kObject: {
        if (members_.empty()) { out += "{}"; break; }
        out += '{';
        for (size_t i = 0; i < members_.size(); ++i) {
          out += i ? ",\n" : "\n";
          indent(out, level + 1);
          escape(out, members_[i].first);
          out += ": ";
          members_[i].second.write(out, level + 1, flush);
        }
        out += '\n';
        indent(out, level);
        out += '}';
        break;
      }
    }
  }

  // A JSON string literal; bytes that are not valid UTF-8 become U+FFFD, and
  // every control character is escaped.
  static void escape(std::string& out, const std::string& s) {
    out += '"';
    for (size_t i = 0; i < s.size();) {
      unsigned char c = static_cast<unsigned char>(s[i]);
      switch (c) {
        case '"': out += "\\\""; ++i; continue;
        case '\\': out += "\\\\"; ++i; continue;
        case '\b': out += "\\b"; ++i; continue;
        case '\f': out += "\\f"; ++i; continue;
        case '\n': out += "\\n"; ++i; continue;
        case '\r': out += "\\r"; ++i; continue;
        case '\t': out += "\\t"; ++i; continue;
        default: break;
      }
      if (c < 0x20 || c == 0x7f) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out += buf;
        ++i;
        continue;
      }
      size_t n = colikv_cli::utf8_sequence(s, i);
      if (n == 0) {
        out += "\\ufffd";
        ++i;
      } else if (n == 2 && c == 0xc2 && static_cast<unsigned char>(s[i + 1]) < 0xa0) {
        // A C1 control (U+0080..U+009F): escaped too, as a terminal may act on it.
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned char>(s[i + 1]));
        out += buf;
        i += n;
      } else {
        out.append(s, i, n);
        i += n;
      }
    }
    out += '"';
  }

  Type type_ = Type::kNull;
  bool b_ = false;
  int64_t i_ = 0;
  double d_ = 0;
  int decimals_ = 3;
  std::string s_;
  std::vector<Json> elements_;
  std::vector<std::pair<std::string, Json>> members_;
  std::function<bool(int64_t&)> next_;
};

// ---------------------------------------------------------------------------
// Formatting helpers.

// raw / stored with three decimals, or "-" when stored is 0.
std::string ratio_text(int64_t raw, int64_t stored) {
  if (stored <= 0) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(raw) / static_cast<double>(stored));
  return buf;
}

Json ratio_json(int64_t raw, int64_t stored) {
  if (stored <= 0) return Json::null();
  return Json::number(static_cast<double>(raw) / static_cast<double>(stored), 3);
}

// Unix milliseconds as UTC: "2025-01-31T12:34:56.789Z" (iso) or
// "2025-01-31 12:34:56" (human).
std::string format_time(int64_t ms, bool iso) {
  if (ms <= 0) return iso ? "" : "-";
  std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  if (!gmtime_r(&secs, &tm)) return std::to_string(ms);
  char buf[64];
  if (iso) {
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                  tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms % 1000));
  } else {
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02d %02d:%02d:%02d", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                  tm.tm_hour, tm.tm_min, tm.tm_sec);
  }
  return buf;
}

Json time_json(int64_t ms) { return ms > 0 ? Json::string(format_time(ms, true)) : Json::null(); }

Json model_json(const colikv::ModelSignature& m) {
  Json j = Json::object();
  j.set("signature", Json::string(m.to_string()));
  j.set("n_layers", Json::integer(m.n_layers));
  j.set("kv_lora", Json::integer(m.kv_lora));
  j.set("qk_rope", Json::integer(m.qk_rope));
  j.set("index_hd", Json::integer(m.index_hd));
  j.set("n_indexed", Json::integer(m.n_indexed));
  j.set("vocab", Json::integer(m.vocab));
  j.set("weights_id", Json::string(m.weights_id));
  j.set("record_bytes", Json::integer(m.record_bytes()));
  return j;
}

Json conversation_json(const colikv::ConversationInfo& c) {
  Json j = Json::object();
  j.set("id", Json::string(c.id));
  j.set("model", model_json(c.model));
  j.set("tokens", Json::integer(c.tokens));
  j.set("raw_bytes", Json::integer(c.raw_bytes));
  j.set("stored_bytes", Json::integer(c.stored_bytes));
  j.set("ratio", ratio_json(c.raw_bytes, c.stored_bytes));
  j.set("title", Json::string(c.title));
  j.set("metadata", Json::string(c.metadata));
  j.set("parent", c.parent.empty() ? Json::null() : Json::string(c.parent));
  j.set("forked_at", Json::integer(c.forked_at));
  j.set("created", time_json(c.created_ms));
  j.set("updated", time_json(c.updated_ms));
  j.set("last_used", time_json(c.last_used_ms));
  j.set("created_ms", Json::integer(c.created_ms));
  j.set("updated_ms", Json::integer(c.updated_ms));
  j.set("last_used_ms", Json::integer(c.last_used_ms));
  if (c.evicted) j.set("evicted", Json::boolean(true));
  return j;
}

Json usage_json(const colikv::UsageStats& u, bool with_model) {
  Json j = Json::object();
  if (with_model) {
    j.set("model", model_json(u.model));
    j.set("chunk_tokens", Json::integer(u.chunk_tokens));
  }
  j.set("conversations", Json::integer(u.conversations));
  j.set("tokens", Json::integer(u.tokens));
  j.set("chunks", Json::integer(u.chunks));
  j.set("logical_bytes", Json::integer(u.logical_bytes));
  j.set("unique_bytes", Json::integer(u.unique_bytes));
  j.set("stored_bytes", Json::integer(u.stored_bytes));
  j.set("saved_by_sharing", Json::integer(u.saved_by_sharing()));
  j.set("saved_by_compression", Json::integer(u.saved_by_compression()));
  j.set("ratio", ratio_json(u.logical_bytes, u.stored_bytes));
  return j;
}

Json optional_int(int64_t v) { return v < 0 ? Json::null() : Json::integer(v); }

// An aligned text table: two spaces between columns, numbers right-aligned,
// the last column not padded.
class Table {
 public:
  explicit Table(std::vector<std::string> header, std::vector<bool> right_aligned)
      : right_(std::move(right_aligned)) {
    rows_.push_back(std::move(header));
  }
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string render() const {
    std::vector<size_t> width(rows_[0].size(), 0);
    for (const auto& r : rows_)
      for (size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
    std::string out;
    for (const auto& r : rows_) {
      std::string line;
      for (size_t c = 0; c < r.size(); ++c) {
        bool last = c + 1 == r.size();
        size_t pad = width[c] - r[c].size();
        if (c) line += "  ";
        if (right_[c]) line.append(pad, ' ');
        line += r[c];
        if (!right_[c] && !last) line.append(pad, ' ');
      }
      while (!line.empty() && line.back() == ' ') line.pop_back();
      out += line + '\n';
    }
    return out;
  }

 private:
  std::vector<std::vector<std::string>> rows_;
  std::vector<bool> right_;
};

// "key   value" lines with the values aligned.
class KeyValues {
 public:
  void add(const std::string& key, const std::string& value) { rows_.emplace_back(key, value); }
  size_t key_width() const {
    size_t w = 0;
    for (const auto& r : rows_) w = std::max(w, r.first.size());
    return w;
  }
  // min_width aligns the values with other rows printed around these.
  std::string render(const std::string& prefix = "", size_t min_width = 0) const {
    const size_t w = std::max(key_width(), min_width);
    std::string out;
    for (const auto& r : rows_) {
      std::string line = prefix + r.first + std::string(w - r.first.size() + 2, ' ') + r.second;
      while (!line.empty() && line.back() == ' ') line.pop_back();
      out += line + '\n';
    }
    return out;
  }

 private:
  std::vector<std::pair<std::string, std::string>> rows_;
};

// ---------------------------------------------------------------------------
// Progress on stderr, updated in place.

enum class ProgressMode { kAuto, kOn, kOff };

class Progress {
 public:
  // total_bytes: the bytes that 100% stands for; enabled when forced, or in
  // auto mode when stderr is a terminal and total_bytes is large.
  Progress(std::string label, int64_t total_bytes, ProgressMode mode)
      : label_(std::move(label)), total_bytes_(total_bytes), start_(Clock::now()) {
    enabled_ = mode == ProgressMode::kOn ||
               (mode == ProgressMode::kAuto && isatty(STDERR_FILENO) && total_bytes > kProgressThresholdBytes);
  }
  ~Progress() { end(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // done and total in tokens (or any unit), as ProgressFn reports them.
  void update(int64_t done, int64_t total) {
    if (!enabled_) return;
    auto now = Clock::now();
    bool final_update = total > 0 && done >= total;
    if (shown_ && !final_update && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    double fraction = total > 0 ? static_cast<double>(done) / static_cast<double>(total) : 0.0;
    fraction = std::min(1.0, std::max(0.0, fraction));
    double mb_done = fraction * static_cast<double>(total_bytes_) / 1e6;
    double secs = std::chrono::duration<double>(now - start_).count();
    double rate = secs > 0 ? mb_done / secs : 0.0;
    char buf[256];
    int n = std::snprintf(buf, sizeof buf, "\r%s: %5.1f%%  %.1f/%.1f MB  %.1f MB/s", label_.c_str(),
                          fraction * 100.0, mb_done, static_cast<double>(total_bytes_) / 1e6, rate);
    std::string line(buf, static_cast<size_t>(std::max(0, std::min(n, static_cast<int>(sizeof buf) - 1))));
    size_t visible = line.size() - 1;
    if (visible < width_) line.append(width_ - visible, ' ');
    width_ = std::max(width_, visible);
    std::fputs(line.c_str(), stderr);
    std::fflush(stderr);
    shown_ = true;
  }

  colikv::ProgressFn fn() {
    if (!enabled_) return colikv::ProgressFn();
    return [this](int64_t done, int64_t total) { update(done, total); };
  }

  // Ends the progress line (a newline after it) if one was shown.
  void end() {
    if (shown_) {
      std::fputc('\n', stderr);
      std::fflush(stderr);
      shown_ = false;
    }
  }

 private:
  using Clock = std::chrono::steady_clock;
  std::string label_;
  int64_t total_bytes_;
  bool enabled_ = false;
  bool shown_ = false;
  size_t width_ = 0;
  Clock::time_point start_;
  Clock::time_point last_;
};

// ---------------------------------------------------------------------------
// Commands and their arguments.

struct OptionSpec {
  const char* name;  // "--json"
  bool takes_value;
};

struct Args;
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
};

// A usage error: exit 2.
struct UsageError {
  std::string message;
};

// A failure the tool itself detects (not a colikv::Error): exit 1.
struct Failure {
  std::string message;
};

struct Args {
  const CommandSpec* command = nullptr;
  std::vector<std::string> positional;
  std::map<std::string, std::string> options;  // "--json" -> "" ; "--id" -> "x"

  bool has(const std::string& name) const { return options.count(name) != 0; }
  std::string value(const std::string& name, const std::string& fallback = "") const {
    auto it = options.find(name);
    return it == options.end() ? fallback : it->second;
  }
};

// A non-negative decimal integer that fits int64; anything else is a usage error.
int64_t parse_count(const std::string& text, const std::string& what) {
  int64_t v = 0;
  const char* b = text.data();
  const char* e = b + text.size();
  auto r = std::from_chars(b, e, v);
  if (text.empty() || text[0] < '0' || text[0] > '9' || r.ec != std::errc() || r.ptr != e)
    throw UsageError{"bad number '" + text + "' for " + what + " (expected a non-negative integer)"};
  return v;
}

ProgressMode progress_mode(const Args& a) {
  if (a.has("--progress") && a.has("--quiet")) throw UsageError{"--progress and --quiet exclude each other"};
  if (a.has("--progress")) return ProgressMode::kOn;
  if (a.has("--quiet")) return ProgressMode::kOff;
  return ProgressMode::kAuto;
}

colikv::Options base_options(const Args& a) {
  colikv::Options o;
  if (a.has("--busy-timeout")) {
    int64_t ms = parse_count(a.value("--busy-timeout"), "--busy-timeout");
    if (ms > 0x7fffffff) throw UsageError{"--busy-timeout " + a.value("--busy-timeout") + " is too large"};
    o.busy_timeout_ms = static_cast<int>(ms);
  }
  if (a.has("--sync")) {
    std::string s = a.value("--sync");
    if (s == "full") o.synchronous = colikv::Synchronous::kFull;
    else if (s == "normal") o.synchronous = colikv::Synchronous::kNormal;
    else throw UsageError{"bad value '" + s + "' for --sync (expected normal or full)"};
  }
  return o;
}

// Stores of read-only commands: never created, never written.
colikv::Options read_options(const Args& a) {
  colikv::Options o = base_options(a);
  o.read_only = true;
  o.create_if_missing = false;
  return o;
}

// Stores of write commands other than import: must exist.
colikv::Options write_options(const Args& a) {
  colikv::Options o = base_options(a);
  o.create_if_missing = false;
  return o;
}

void print(const std::string& text) { std::fwrite(text.data(), 1, text.size(), stdout); }

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); !from.empty() && at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

std::string plural(int64_t n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// ---------------------------------------------------------------------------
// import

int cmd_import(const Args& a) {
  const std::string& store_path = a.positional[0];
  const std::string& file = a.positional[1];
  colikv::Options opts = base_options(a);
  opts.create_if_missing = true;
  ProgressMode mode = progress_mode(a);

  colikv::ImportOptions io;
  if (a.has("--id") && a.value("--id").empty()) throw UsageError{"--id must not be empty"};
  io.id = a.value("--id");
  io.weights_id = a.value("--weights-id");
  // The identity an engine adapter derives from its model folder
  // (integrations/colibri), so an imported slot file resumes under it.
  if (a.has("--weights-id-from")) {
    if (a.has("--weights-id")) throw UsageError{"--weights-id and --weights-id-from exclude each other"};
    io.weights_id = colikv::weights_id_from_dir(a.value("--weights-id-from"));
    // An engine slot file lands where the adapter looks for it: <weights-id>/slot<N>.
    const std::string name = file.substr(file.find_last_of('/') + 1);
    if (!a.has("--id") && name.rfind(".coli_kv", 0) == 0) {
      const std::string n = name.size() > 9 && name[8] == '.' ? name.substr(9) : "0";
      if (n.find_first_not_of("0123456789") == std::string::npos) io.id = io.weights_id + "/slot" + n;
    }
  }
  io.salvage = a.has("--salvage");

  struct stat st {};
  int64_t file_bytes = ::stat(file.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
  auto import_into = [&](const std::string& path, const colikv::Options& o) {
    colikv::Store store(path, o);
    Progress progress("import " + shown(file), file_bytes, mode);
    io.progress = progress.fn();
    return colikv::import_coli_kv(store, file, io);
  };

  // A store this import creates is built aside and given its name only once
  // it holds the conversation (tools/new_store.h): a failed import never
  // deletes a store, not even one another process has just created.
  colikv::ImportResult r;
  const std::string target = colikv_cli::store_file_of(store_path);
  bool imported = false;
  if (!colikv_cli::file_exists(target)) {
    colikv_cli::NewStoreFile fresh(target);
    try {
      r = import_into(fresh.path(), opts);
    } catch (const colikv::Error& e) {
      throw colikv::Error(e.code(), replace_all(e.what(), fresh.path(), store_path));
    }
    imported = fresh.publish();
  }
  if (!imported) {
    // The store existed, or another process created it meanwhile.
    opts.create_if_missing = false;
    r = import_into(store_path, opts);
  }

  const int64_t record_bytes = r.model.record_bytes();
  if (a.has("--json")) {
    Json j = Json::object();
    j.set("store", Json::string(store_path));
    j.set("file", Json::string(file));
    j.set("id", Json::string(r.id));
    j.set("model", model_json(r.model));
    j.set("tokens", Json::integer(r.tokens));
    j.set("raw_bytes", Json::integer(r.tokens * record_bytes));
    j.set("header_count", Json::integer(r.header_count));
    j.set("ignored_records", Json::integer(r.ignored_records));
    j.set("ignored_bytes", Json::integer(r.ignored_bytes));
    j.set("salvaged", Json::boolean(r.salvaged));
    print(j.dump());
    return kExitOk;
  }
  std::string out = "imported " + shown(file) + " as '" + shown(r.id) + "'\n";
  KeyValues kv;
  kv.add("model", shown(r.model.to_string()));
  kv.add("tokens", std::to_string(r.tokens));
  kv.add("records", bytes_both(r.tokens * record_bytes) + " of " + std::to_string(record_bytes) + " B each");
  out += kv.render("  ");
  if (r.salvaged)
    out += "salvaged: the header counts " + plural(r.header_count, "record", "records") + " but only " +
           std::to_string(r.tokens) + " complete ones are present; kept " + std::to_string(r.tokens) + "\n";
  if (r.ignored_records > 0)
    out += "ignored " + plural(r.ignored_records, "record", "records") + " past the header's count of " +
           std::to_string(r.header_count) + " (" + bytes_both(r.ignored_bytes) +
           " after the counted records): not content, not imported\n";
  else if (r.ignored_bytes > 0)
    out += "ignored " + bytes_both(r.ignored_bytes) + " after the " +
           (r.salvaged ? std::string("complete") : "counted") + " records (less than one record): not imported\n";
  print(out);
  return kExitOk;
}

// ---------------------------------------------------------------------------
// export

// export STORE ID -: the file streamed to standard output, nothing else on it.
int export_to_stdout(const Args& a, colikv::Store& store, const std::string& id, colikv::ExportOptions& eo,
                     int64_t total_bytes) {
  if (a.has("--json")) throw UsageError{"--json cannot share standard output with the exported file"};
  if (isatty(STDOUT_FILENO)) throw Failure{"standard output is a terminal: redirect it to a file or a pipe"};
  std::fflush(stdout);
  Progress progress("export " + shown(id), total_bytes, progress_mode(a));
  eo.progress = progress.fn();
  colikv::export_coli_kv_to_fd(store, id, STDOUT_FILENO, eo);
  return kExitOk;
}

int cmd_export(const Args& a) {
  const std::string& store_path = a.positional[0];
  const std::string& id = a.positional[1];
  const std::string& out_path = a.positional[2];
  ProgressMode mode = progress_mode(a);
  colikv::Store store(store_path, read_options(a));
  colikv::ConversationInfo info = store.info(id);
  const int64_t record_bytes = info.model.record_bytes();
  const int64_t total_bytes = colikv::kColiKvHeaderBytes + info.tokens * record_bytes;

  colikv::ExportOptions eo;
  eo.force = a.has("--force");
  if (out_path == "-") return export_to_stdout(a, store, id, eo, total_bytes);
  int64_t bytes;
  {
    Progress progress("export " + shown(id), total_bytes, mode);
    eo.progress = progress.fn();
    bytes = colikv::export_coli_kv(store, id, out_path, eo);
  }
  int64_t tokens = record_bytes > 0 ? (bytes - colikv::kColiKvHeaderBytes) / record_bytes : 0;
  if (a.has("--json")) {
    Json j = Json::object();
    j.set("store", Json::string(store_path));
    j.set("id", Json::string(id));
    j.set("file", Json::string(out_path));
    j.set("tokens", Json::integer(tokens));
    j.set("bytes", Json::integer(bytes));
    print(j.dump());
    return kExitOk;
  }
  print("exported '" + shown(id) + "' to " + shown(out_path) + ": " + plural(tokens, "token", "tokens") + ", " +
        bytes_both(bytes) + "\n");
  return kExitOk;
}

// ---------------------------------------------------------------------------
// inspect

int cmd_inspect(const Args& a) {
  const std::string& file = a.positional[0];
  const int64_t want = a.has("--tokens") ? parse_count(a.value("--tokens"), "--tokens") : 16;
  colikv::ColiKvInspection r = colikv::inspect_coli_kv(file, 0);
  const int64_t past = std::max<int64_t>(0, r.records_on_disk - r.header_count);
  // The first tokens are streamed from the file as they are printed: memory
  // stays bounded whatever N is and whatever the file holds.
  const int64_t counted =
      r.record_bytes > 0 ? std::min(std::max<int64_t>(r.header_count, 0), r.records_on_disk) : 0;
  const int64_t first_n = std::min(want, counted);
  colikv_cli::ColiKvTokens first_tokens(file, r.record_bytes > 0 ? r.record_bytes : 1, first_n);

  if (a.has("--json")) {
    Json j = Json::object();
    j.set("file", Json::string(file));
    j.set("file_bytes", Json::integer(r.file_bytes));
    j.set("header_read", Json::boolean(r.header_read));
    j.set("model", r.header_read ? model_json(r.model) : Json::null());
    j.set("header_count", Json::integer(r.header_count));
    j.set("record_bytes", Json::integer(r.record_bytes));
    j.set("records_on_disk", Json::integer(r.records_on_disk));
    j.set("records_past_count", Json::integer(past));
    j.set("trailing_bytes", Json::integer(r.trailing_bytes));
    j.set("first_tokens", Json::int_stream([&](int64_t& v) {
            int32_t t;
            if (!first_tokens.next(t)) return false;
            v = t;
            return true;
          }));
    j.set("ok", Json::boolean(r.ok()));
    Json probs = Json::array();
    for (const auto& p : r.problems) probs.push(Json::string(p));
    j.set("problems", std::move(probs));
    j.print_to(stdout);
  } else {
    KeyValues head, tail;
    head.add("file", shown(file));
    head.add("file size", bytes_both(r.file_bytes));
    if (r.header_read) {
      head.add("model", r.model.to_string());
      head.add("record size", r.record_bytes > 0 ? std::to_string(r.record_bytes) + " B" : "- (invalid header)");
      head.add("header count", plural(r.header_count, "record", "records"));
      head.add("on disk", plural(r.records_on_disk, "complete record", "complete records") + ", " +
                              plural(r.trailing_bytes, "trailing byte", "trailing bytes"));
      if (r.record_bytes > 0 && r.header_count >= 0)
        head.add("content", bytes_both(std::min(r.header_count, r.records_on_disk) * r.record_bytes));
      if (past > 0)
        head.add("past the count", plural(past, "record", "records") + " (not content: import ignores them)");
    } else {
      head.add("header", "not readable");
    }
    tail.add("problems", r.problems.empty() ? "none" : std::to_string(r.problems.size()));
    const std::string tokens_key = "first tokens";
    const size_t width = std::max({head.key_width(), tail.key_width(), r.header_read ? tokens_key.size() : 0});
    print(head.render("", width));
    if (r.header_read) {
      print(tokens_key + std::string(width - tokens_key.size() + 2, ' '));
      int32_t t;
      for (int64_t i = 0; first_tokens.next(t); ++i) print((i ? " " : "") + std::to_string(t));
      print(first_n == 0 ? "-\n" : first_n < r.header_count ? " ...\n" : "\n");
    }
    std::string out = tail.render("", width);
    for (const auto& p : r.problems) out += "  - " + shown(p) + "\n";
    print(out);
  }
  if (!r.ok()) {
    throw Failure{file + " is not a well-formed .coli_kv file: " + r.problems.front() +
                  (r.problems.size() > 1 ? " (and " + plural(static_cast<int64_t>(r.problems.size()) - 1,
                                                             "more problem", "more problems") + ")"
                                         : "")};
  }
  return kExitOk;
}

// ---------------------------------------------------------------------------
// ls, info

int cmd_ls(const Args& a) {
  const std::string& store_path = a.positional[0];
  int64_t limit = a.has("--limit") ? parse_count(a.value("--limit"), "--limit") : -1;
  colikv::Store store(store_path, read_options(a));
  std::vector<colikv::ConversationInfo> all;
  const int64_t page = 500;
  for (int64_t offset = 0;;) {
    colikv::ListOptions lo;
    lo.offset = offset;
    lo.limit = limit >= 0 ? std::min(page, limit - static_cast<int64_t>(all.size())) : page;
    if (lo.limit <= 0) break;
    std::vector<colikv::ConversationInfo> part = store.list(lo);
    for (auto& c : part) all.push_back(std::move(c));
    if (static_cast<int64_t>(part.size()) < lo.limit) break;
    offset += static_cast<int64_t>(part.size());
  }

  if (a.has("--json")) {
    Json j = Json::object();
    j.set("store", Json::string(store_path));
    Json list = Json::array();
    for (const auto& c : all) list.push(conversation_json(c));
    j.set("conversations", std::move(list));
    print(j.dump());
    return kExitOk;
  }
  if (limit == 0) {
    // Nothing listed, as asked; the store is not necessarily empty.
    print("0 of " + plural(store.conversation_count(), "conversation", "conversations") + " listed (--limit 0)\n");
    return kExitOk;
  }
  if (all.empty()) {
    print("no conversations in " + shown(store_path) + "\n");
    return kExitOk;
  }
  Table t({"ID", "TOKENS", "RAW", "STORED", "RATIO", "LAST USED (UTC)", "PARENT", "MODEL"},
          {false, true, true, true, true, false, false, false});
  for (const auto& c : all)
    t.add({shown(c.id), std::to_string(c.tokens), bytes_both(c.raw_bytes),
           c.evicted ? bytes_both(c.stored_bytes) + " (evicted)" : bytes_both(c.stored_bytes),
           ratio_text(c.raw_bytes, c.stored_bytes), format_time(c.last_used_ms, false),
           c.parent.empty() ? "-" : shown(c.parent), shown(c.model.to_string())});
  print(t.render());
  return kExitOk;
}

int cmd_info(const Args& a) {
  const std::string& store_path = a.positional[0];
  colikv::Store store(store_path, read_options(a));
  colikv::ConversationInfo c = store.info(a.positional[1]);
  if (a.has("--json")) {
    print(conversation_json(c).dump());
    return kExitOk;
  }
  KeyValues kv;
  kv.add("id", shown(c.id));
  kv.add("model", shown(c.model.to_string()));
  kv.add("tokens", std::to_string(c.tokens));
  kv.add("record size", std::to_string(c.model.record_bytes()) + " B");
  kv.add("raw size", bytes_both(c.raw_bytes));
  kv.add("stored size", bytes_both(c.stored_bytes));
  kv.add("ratio", ratio_text(c.raw_bytes, c.stored_bytes));
  if (c.evicted) kv.add("evicted", "yes: KV data was evicted under the byte budget; the token ids are kept");
  kv.add("title", c.title.empty() ? "-" : shown(c.title));
  kv.add("metadata", shown(c.metadata));
  kv.add("forked from", c.parent.empty() ? "-" : shown(c.parent) + " at " + plural(c.forked_at, "token", "tokens"));
  kv.add("created", format_time(c.created_ms, false) + " UTC");
  kv.add("updated", format_time(c.updated_ms, false) + " UTC");
  kv.add("last used", format_time(c.last_used_ms, false) + " UTC");
  print(kv.render());
  return kExitOk;
}

// ---------------------------------------------------------------------------
// rm, rename, fork, truncate

int cmd_rm(const Args& a) {
  colikv::Store store(a.positional[0], write_options(a));
  const std::string& id = a.positional[1];
  int64_t n = store.count(id);
  store.remove(id);
  print("removed '" + shown(id) + "' (" + plural(n, "token", "tokens") + ")\n");
  return kExitOk;
}

int cmd_rename(const Args& a) {
  colikv::Store store(a.positional[0], write_options(a));
  store.rename(a.positional[1], a.positional[2]);
  print("renamed '" + shown(a.positional[1]) + "' to '" + shown(a.positional[2]) + "'\n");
  return kExitOk;
}

int cmd_fork(const Args& a) {
  int64_t at = a.has("--at") ? parse_count(a.value("--at"), "--at") : -1;
  colikv::Store store(a.positional[0], write_options(a));
  store.fork(a.positional[1], a.positional[2], at);
  int64_t n = store.count(a.positional[2]);
  print("forked '" + shown(a.positional[1]) + "' into '" + shown(a.positional[2]) + "' at " + plural(n, "token", "tokens") + "\n");
  return kExitOk;
}

int cmd_truncate(const Args& a) {
  int64_t len = parse_count(a.positional[2], "N");
  colikv::Store store(a.positional[0], write_options(a));
  const std::string& id = a.positional[1];
  int64_t before = store.count(id);
  store.truncate(id, len);
  print("truncated '" + shown(id) + "' from " + std::to_string(before) + " to " + plural(len, "token", "tokens") + "\n");
  return kExitOk;
}

// ---------------------------------------------------------------------------
// verify, stats

int cmd_verify(const Args& a) {
  const std::string& store_path = a.positional[0];
  const std::string id = a.positional.size() > 1 ? a.positional[1] : "";
  ProgressMode mode = progress_mode(a);
  struct stat st {};
  int64_t store_bytes = ::stat(store_path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
  colikv::Store store(store_path, read_options(a));
  colikv::VerifyReport rep;
  {
    Progress progress("verify " + shown(id.empty() ? store_path : id), store_bytes, mode);
    rep = store.verify(id, progress.fn());
  }
  const bool sound = rep.ok() && rep.integrity == "ok";
  if (a.has("--json")) {
    Json j = Json::object();
    j.set("store", Json::string(store_path));
    j.set("conversation", id.empty() ? Json::null() : Json::string(id));
    j.set("conversations", Json::integer(rep.conversations));
    j.set("chunks", Json::integer(rep.chunks));
    j.set("bytes", Json::integer(rep.bytes));
    j.set("integrity", Json::string(rep.integrity));
    j.set("ok", Json::boolean(sound));
    Json probs = Json::array();
    for (const auto& p : rep.problems) {
      Json pj = Json::object();
      pj.set("conversation", p.conversation.empty() ? Json::null() : Json::string(p.conversation));
      pj.set("chunk_seq", optional_int(p.chunk_seq));
      pj.set("chunk_id", optional_int(p.chunk_id));
      pj.set("first_pos", optional_int(p.first_pos));
      pj.set("end_pos", optional_int(p.end_pos));
      pj.set("what", Json::string(p.what));
      probs.push(std::move(pj));
    }
    j.set("problems", std::move(probs));
    Json shares = Json::array();
    for (const auto& u : rep.uncompared_shares) {
      Json uj = Json::object();
      uj.set("chunk_id", Json::integer(u.chunk_id));
      uj.set("first_pos", Json::integer(u.first_pos));
      uj.set("end_pos", Json::integer(u.end_pos));
      Json names = Json::array();
      for (const auto& c : u.conversations) names.push(Json::string(c));
      uj.set("conversations", std::move(names));
      shares.push(std::move(uj));
    }
    j.set("uncompared_shares", std::move(shares));
    print(j.dump());
  } else {
    std::string out = "checked " + plural(rep.conversations, "conversation", "conversations") + ", " +
                      plural(rep.chunks, "chunk", "chunks") + ", " + bytes_both(rep.bytes) +
                      " decoded; integrity_check: " + rep.integrity + "\n";
    for (const auto& p : rep.problems) {
      std::string where = p.conversation.empty() ? "store" : "conversation '" + shown(p.conversation) + "'";
      if (p.chunk_seq >= 0) where += ", chunk " + std::to_string(p.chunk_seq);
      if (p.chunk_id >= 0) where += " (chunk_id " + std::to_string(p.chunk_id) + ")";
      if (p.first_pos >= 0)
        where += ", positions [" + std::to_string(p.first_pos) + ", " + std::to_string(p.end_pos) + ")";
      out += "problem: " + where + ": " + shown(p.what) + "\n";
    }
    for (const auto& u : rep.uncompared_shares) {
      std::string names;
      for (const auto& c : u.conversations) names += (names.empty() ? "'" : ", '") + shown(c) + "'";
      out += "warning: chunk_id " + std::to_string(u.chunk_id) + ", positions [" + std::to_string(u.first_pos) + ", " +
             std::to_string(u.end_pos) + "): shared by " + names +
             " (not forks of one another) without comparing their values, by a colikv before schema 5; "
             "all but one may load values appended to another\n";
    }
    if (sound)
      out += rep.uncompared_shares.empty()
                 ? "ok: no problems found\n"
                 : "ok: no problems found; " +
                       plural(static_cast<int64_t>(rep.uncompared_shares.size()), "chunk", "chunks") +
                       " shared without a content comparison (warnings above)\n";
    print(out);
  }
  if (!sound) {
    std::string what = rep.problems.empty() ? "integrity_check: " + rep.integrity
                                            : plural(static_cast<int64_t>(rep.problems.size()), "problem", "problems") +
                                                  " found";
    throw Failure{store_path + (id.empty() ? "" : " conversation '" + id + "'") + ": " + what};
  }
  return kExitOk;
}

void add_usage(KeyValues& kv, const colikv::UsageStats& u) {
  kv.add("conversations", std::to_string(u.conversations));
  kv.add("tokens", std::to_string(u.tokens));
  kv.add("chunks", std::to_string(u.chunks));
  kv.add("logical bytes", bytes_both(u.logical_bytes));
  kv.add("unique bytes", bytes_both(u.unique_bytes));
  kv.add("stored bytes", bytes_both(u.stored_bytes));
  kv.add("saved by sharing", bytes_both(u.saved_by_sharing()));
  kv.add("saved by compression", bytes_both(u.saved_by_compression()));
  kv.add("ratio", ratio_text(u.logical_bytes, u.stored_bytes));
}

int cmd_stats(const Args& a) {
  const std::string& store_path = a.positional[0];
  colikv::Store store(store_path, read_options(a));
  colikv::StoreStats s = store.stats();
  if (a.has("--json")) {
    Json j = Json::object();
    j.set("store", Json::string(store_path));
    j.set("file_bytes", Json::integer(s.file_bytes));
    Json models = Json::array();
    for (const auto& m : s.models) models.push(usage_json(m, true));
    j.set("models", std::move(models));
    j.set("total", usage_json(s.total, false));
    print(j.dump());
    return kExitOk;
  }
  std::string out;
  for (const auto& m : s.models) {
    KeyValues kv;
    add_usage(kv, m);
    out += "model " + shown(m.model.to_string()) + " (" + plural(m.chunk_tokens, "token", "tokens") + " per chunk)\n";
    out += kv.render("  ");
  }
  KeyValues total;
  add_usage(total, s.total);
  out += "total\n" + total.render("  ");
  out += "file size  " + bytes_both(s.file_bytes) + "\n";
  print(out);
  return kExitOk;
}

// ---------------------------------------------------------------------------
// match, gc, vacuum

bool is_coli_kv(const std::string& path) {
  char magic[8] = {};
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw Failure{path + ": " + std::strerror(errno)};
  const size_t n = std::fread(magic, 1, sizeof magic, f);
  std::fclose(f);
  return n == sizeof magic && std::memcmp(magic, "COLIKV1\0", 8) == 0;
}

// The token ids of a prompt file, one at a time: a .coli_kv file (its
// counted records), or token ids as decimal text separated by whitespace.
std::unique_ptr<colikv_cli::TokenStream> prompt_tokens(const std::string& path) {
  if (!is_coli_kv(path)) return std::make_unique<colikv_cli::TextTokens>(path);
  colikv::ColiKvInspection in = colikv::inspect_coli_kv(path, 0);
  if (!in.ok()) throw Failure{path + ": " + in.problems.front()};
  return std::make_unique<colikv_cli::ColiKvTokens>(path, in.record_bytes,
                                                    std::min(in.header_count, in.records_on_disk));
}

// The most tokens any conversation of the model holds: no match is longer.
int64_t longest_conversation(colikv::Store& store, const colikv::ModelSignature& model) {
  int64_t longest = 0;
  colikv::ListOptions lo;
  lo.limit = 500;
  for (lo.offset = 0;; lo.offset += lo.limit) {
    const std::vector<colikv::ConversationInfo> page = store.list(lo);
    for (const auto& c : page)
      if (c.model == model) longest = std::max(longest, c.tokens);
    if (static_cast<int64_t>(page.size()) < lo.limit) return longest;
  }
}

int cmd_match(const Args& a) {
  const std::string& store_path = a.positional[0];
  if (!a.has("--model-of")) throw UsageError{"--model-of ID is required"};
  if (!a.has("--tokens")) throw UsageError{"--tokens FILE is required"};
  std::unique_ptr<colikv_cli::TokenStream> tokens = prompt_tokens(a.value("--tokens"));
  colikv::Store store(store_path, read_options(a));
  const colikv::ModelSignature model = store.info(a.value("--model-of")).model;
  // The prompt is read to its end (every token checked and counted), but only
  // as much of it is kept as the longest conversation could match: memory is
  // bounded by the store, not by the file.
  const int64_t keep = longest_conversation(store, model);
  std::vector<int32_t> prompt;
  int64_t prompt_tokens = 0;
  for (int32_t t; tokens->next(t); ++prompt_tokens)
    if (prompt_tokens < keep) prompt.push_back(t);
  colikv::PrefixMatch m = store.match(model, prompt.data(), static_cast<int64_t>(prompt.size()));
  if (a.has("--json")) {
    Json j = Json::object();
    j.set("store", Json::string(store_path));
    j.set("model", model_json(model));
    j.set("prompt_tokens", Json::integer(prompt_tokens));
    j.set("id", m.id.empty() ? Json::null() : Json::string(m.id));
    j.set("tokens", Json::integer(m.tokens));
    j.set("loadable", Json::integer(m.loadable));
    j.set("evicted", Json::boolean(m.evicted()));
    print(j.dump());
    return kExitOk;
  }
  if (m.tokens == 0) {
    print("no conversation of model " + shown(model.to_string()) + " holds a prefix of the " +
          plural(prompt_tokens, "prompt token", "prompt tokens") + "\n");
    return kExitOk;
  }
  std::string line = "'" + shown(m.id) + "' holds the first " + std::to_string(m.tokens) + " of the " +
                     plural(prompt_tokens, "prompt token", "prompt tokens");
  if (m.evicted())
    line += "; its KV data was evicted from position " + std::to_string(m.loadable) + " on (" +
            std::to_string(m.loadable) + " can be loaded, the rest must be recomputed)";
  print(line + "\n");
  return kExitOk;
}

int cmd_gc(const Args& a) {
  const std::string& store_path = a.positional[0];
  if (!a.has("--max-bytes")) throw UsageError{"--max-bytes N is required"};
  const int64_t max_bytes = parse_count(a.value("--max-bytes"), "--max-bytes");
  colikv::Store store(store_path, write_options(a));
  colikv::EvictionReport r = store.gc(max_bytes);
  if (a.has("--json")) {
    Json j = Json::object();
    j.set("store", Json::string(store_path));
    j.set("max_bytes", Json::integer(max_bytes));
    j.set("stored_bytes_before", Json::integer(r.stored_bytes_before));
    j.set("stored_bytes_after", Json::integer(r.stored_bytes_after));
    j.set("freed_bytes", Json::integer(r.freed_bytes));
    j.set("chunks", Json::integer(r.chunks));
    Json list = Json::array();
    for (const auto& id : r.conversations) list.push(Json::string(id));
    j.set("evicted", std::move(list));
    j.set("fits", Json::boolean(r.fits));
    print(j.dump());
    return kExitOk;
  }
  std::string out = "KV data " + bytes_both(r.stored_bytes_before) + " -> " + bytes_both(r.stored_bytes_after) +
                    " (budget " + bytes_both(max_bytes) + "): evicted " +
                    plural(r.chunks, "chunk", "chunks") + " of " +
                    plural(static_cast<int64_t>(r.conversations.size()), "conversation", "conversations");
  for (size_t i = 0; i < r.conversations.size() && i < 20; ++i) out += (i ? ", " : ": ") + shown(r.conversations[i]);
  if (r.conversations.size() > 20) out += ", ...";
  out += "\n";
  if (!r.fits) out += "the conversations that remain share data that does not fit the budget\n";
  print(out);
  return kExitOk;
}

int cmd_vacuum(const Args& a) {
  const std::string& store_path = a.positional[0];
  colikv::Store store(store_path, write_options(a));
  colikv::VacuumReport r = store.vacuum();
  if (a.has("--json")) {
    Json j = Json::object();
    j.set("store", Json::string(store_path));
    j.set("file_bytes_before", Json::integer(r.file_bytes_before));
    j.set("file_bytes_after", Json::integer(r.file_bytes_after));
    print(j.dump());
    return kExitOk;
  }
  print("file size " + bytes_both(r.file_bytes_before) + " -> " + bytes_both(r.file_bytes_after) + "\n");
  return kExitOk;
}

// ---------------------------------------------------------------------------
// Command table and help.

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
const char* const kModelKeys =
    "  model{...}: signature (canonical text), n_layers, kv_lora, qk_rope, index_hd,\n"
    "    n_indexed, vocab, weights_id (\"\" when none), record_bytes\n";
const char* const kConversationKeys =
    "  id, model{...}, tokens, raw_bytes (tokens * record_bytes), stored_bytes (bytes\n"
    "  of the chunk blobs it references, shared ones counted fully), ratio (raw /\n"
    "  stored with 3 decimals, null when nothing is stored), title, metadata (JSON\n"
    "  text, as a string), parent (id or null), forked_at, created, updated, last_used\n"
    "  (UTC, ISO 8601 with milliseconds, or null), created_ms, updated_ms, last_used_ms\n"
    "  (Unix milliseconds); evicted (present, and true, only when some of its KV data\n"
    "  was evicted under a byte budget: see colikv gc)\n";

const std::vector<CommandSpec>& commands();

bool has_option(const CommandSpec& c, const char* name) {
  return std::any_of(c.options.begin(), c.options.end(),
                     [&](const OptionSpec& o) { return std::strcmp(o.name, name) == 0; });
}

std::string command_help(const CommandSpec& c) {
  std::string h = std::string("usage: colikv ") + c.name + " " + c.synopsis + "\n\n" + c.summary + ".\n\n" +
                  c.description + "\noptions:\n" + c.option_help;
  if (has_option(c, "--sync")) h += kSyncHelp;
  if (has_option(c, "--progress")) h += kProgressHelp;
  if (has_option(c, "--busy-timeout")) h += kBusyHelp;
  h += "  -h, --help          show this help\n";
  if (!c.json_help.empty()) h += "\n--json keys (stable; new keys may be added):\n" + c.json_help;
  h += "\nexit status: 0 success, 1 failure, 2 wrong usage\n";
  return h;
}

std::string main_help() {
  std::string h =
      "usage: colikv COMMAND ARGS... [OPTIONS]\n"
      "\n"
      "colikv keeps the KV caches of LLM conversations in one SQLite file (a store),\n"
      "and imports and exports the engine's .coli_kv files byte for byte.\n"
      "\n"
      "commands:\n";
  for (const auto& c : commands())
    h += std::string("  ") + c.name + " " + c.synopsis + "\n      " + c.summary + "\n";
  h +=
      "\n"
      "Run 'colikv COMMAND --help' for a command's options and its --json keys.\n"
      "Exit status: 0 success; 1 failure (including problems found by verify or\n"
      "inspect); 2 wrong usage. Errors are one line on stderr: 'colikv: COMMAND: ...'.\n";
  return h;
}

const std::vector<CommandSpec>& commands() {
  static const std::vector<CommandSpec> all = {
      {"import", "STORE FILE.coli_kv [--id ID] [--weights-id W | --weights-id-from DIR] [--salvage] [--json]",
       "import a .coli_kv file as a new conversation",
       "Stores the whole file as one conversation in one transaction: either all of it\n"
       "is stored or nothing is. A store that does not exist is built beside it as\n"
       ".colikv-import-XXXXXX and given its name only once the import succeeded: a\n"
       "failed import leaves no store behind and never deletes one. (Such files of an\n"
       "import killed midway are removed by the next import creating a store in that\n"
       "directory.) A store another process creates meanwhile is imported into instead.\n"
       "Records past the header's count are not content: they are ignored, and the\n"
       "output says how many. A file whose header counts more records than it holds is\n"
       "refused unless --salvage is given.\n",
       "  --id ID             the conversation id (default: the file name without its\n"
       "                      directory and .coli_kv); an existing id is refused\n"
       "  --weights-id W      weights identity recorded in the model signature (default\n"
       "                      none)\n"
       "  --weights-id-from DIR  the weights identity of the model folder DIR, as\n"
       "                      colikv_weights_id_from_dir computes it (a hash of\n"
       "                      config.json and the *.safetensors names and sizes);\n"
       "                      without --id, an engine slot file .coli_kv[.N] is\n"
       "                      imported as <identity>/slot<N>, where the colibri\n"
       "                      adapter (integrations/colibri) looks for it\n"
       "  --salvage           keep the complete records when the header counts more than\n"
       "                      are present, as the engine itself would\n"
       "  --json              print the result as JSON\n",
       std::string("  store, file, id, model{...}, tokens (records stored), raw_bytes, header_count\n"
                   "  (the header's nrec), ignored_records (complete records past nrec),\n"
                   "  ignored_bytes (all bytes past the stored records), salvaged\n") +
           kModelKeys,
       2, 2,
       {{"--id", true}, {"--weights-id", true}, {"--weights-id-from", true}, {"--salvage", false}, {"--json", false}, {"--sync", true},
        {"--progress", false}, {"--quiet", false}, {"--busy-timeout", true}},
       cmd_import},
      {"export", "STORE ID OUT.coli_kv|- [--force] [--json]", "write a conversation as a .coli_kv file",
       "Writes exactly the bytes the engine would have written (header, records in its\n"
       "layout, count), through a temporary file .colikv-export-XXXXXX in OUT's\n"
       "directory that is synced and renamed, so a crash never leaves a partial file\n"
       "under OUT.coli_kv; one left by an export killed midway is removed by the next\n"
       "export into that directory. A symbolic link at OUT is kept and its target\n"
       "replaced. OUT must not be the store or one of its -wal, -shm, -journal files,\n"
       "nor anything but a regular file (a FIFO, a device). OUT - streams the file to\n"
       "standard output (not a terminal), with nothing else on it. The store is\n"
       "opened read-only.\n",
       "  --force             overwrite OUT.coli_kv if it exists (default: refuse, as\n"
       "                      for a symbolic link to a missing file)\n"
       "  --json              print the result as JSON\n",
       "  store, id, file, tokens, bytes (of the file written)\n", 3, 3,
       {{"--force", false}, {"--json", false}, {"--progress", false}, {"--quiet", false}, {"--busy-timeout", true}},
       cmd_export},
      {"inspect", "FILE.coli_kv [--tokens N] [--json]", "check a .coli_kv file without importing it",
       "Shows the header, the record size, the record count on disk against the\n"
       "header's, the first token ids and every problem found (each token id of the\n"
       "counted records is checked against the vocabulary). Exit 1 if the file is not\n"
       "well-formed, that is, if import would refuse it.\n",
       "  --tokens N          show the first N token ids (default 16)\n"
       "  --json              print as JSON\n",
       std::string("  file, file_bytes, header_read, model{...} (null when the header is not\n"
                   "  readable), header_count, record_bytes (0 when the header is invalid),\n"
                   "  records_on_disk (complete records after the header), records_past_count,\n"
                   "  trailing_bytes (after the last complete record), first_tokens[], ok,\n"
                   "  problems[] (strings)\n") +
           kModelKeys,
       1, 1, {{"--tokens", true}, {"--json", false}}, cmd_inspect},
      {"ls", "STORE [--limit N] [--json]", "list the conversations, most recently used first",
       "Lists every conversation (or the first N) with its tokens, sizes, ratio, last\n"
       "use, fork parent and model. The store is opened read-only.\n",
       "  --limit N           list at most N conversations (default: all; 0 lists none\n"
       "                      and says how many there are)\n"
       "  --json              print as JSON\n",
       std::string("  store, conversations[], each with:\n") + kConversationKeys + kModelKeys, 1, 1,
       {{"--limit", true}, {"--json", false}, {"--busy-timeout", true}}, cmd_ls},
      {"info", "STORE ID [--json]", "show one conversation",
       "Shows the conversation's model, tokens, sizes, title, metadata, fork parent and\n"
       "times. The store is opened read-only.\n",
       "  --json              print as JSON\n", std::string(kConversationKeys) + kModelKeys, 2, 2,
       {{"--json", false}, {"--busy-timeout", true}}, cmd_info},
      {"rm", "STORE ID", "delete a conversation",
       "Deletes the conversation and frees the chunks no other conversation uses.\n", "", "", 2, 2,
       {{"--sync", true}, {"--busy-timeout", true}}, cmd_rm},
      {"rename", "STORE OLD NEW", "rename a conversation", "Gives the conversation OLD the id NEW, which must be free.\n",
       "", "", 3, 3, {{"--sync", true}, {"--busy-timeout", true}}, cmd_rename},
      {"fork", "STORE SRC NEW [--at N]", "create NEW from the first N tokens of SRC",
       "Creates the conversation NEW holding the first N tokens of SRC (default: all),\n"
       "sharing SRC's chunks instead of copying them.\n",
       "  --at N              take the first N tokens (N <= SRC's token count)\n", "", 3, 3,
       {{"--at", true}, {"--sync", true}, {"--busy-timeout", true}}, cmd_fork},
      {"truncate", "STORE ID N", "keep the first N tokens of a conversation",
       "Keeps the first N tokens (N <= the token count) and frees the chunks no other\n"
       "conversation uses.\n",
       "", "", 3, 3, {{"--sync", true}, {"--busy-timeout", true}}, cmd_truncate},
      {"verify", "STORE [ID] [--json]", "check every stored chunk and the file",
       "Reads and checks every chunk of every conversation (or of ID): checksum,\n"
       "decompression, sizes, token ranges and chunk-list completeness; and runs\n"
       "PRAGMA integrity_check. Reports each problem with its conversation, chunk and\n"
       "position range. Exit 1 if any problem is found. Warns about chunks that a\n"
       "colikv before schema 5 shared by token ids alone between conversations that\n"
       "are not forks of one another (their values were never compared; exit 0).\n"
       "The store is opened read-only.\n",
       "  --json              print as JSON\n",
       "  store, conversation (ID or null), conversations (checked), chunks (distinct\n"
       "  chunks read), bytes (decoded payload bytes checked), integrity (the result of\n"
       "  integrity_check, \"ok\" when sound), ok, problems[], each with conversation,\n"
       "  chunk_seq, chunk_id, first_pos, end_pos (each null when not applicable), what;\n"
       "  uncompared_shares[] (warnings: chunks stored before schema 5 that\n"
       "  conversations of different fork lineage share, their values never\n"
       "  compared), each with chunk_id, first_pos, end_pos, conversations[]\n",
       1, 2, {{"--json", false}, {"--progress", false}, {"--quiet", false}, {"--busy-timeout", true}}, cmd_verify},
      {"stats", "STORE [--json]", "show sizes per model and in total",
       "Per model and in total: conversations, tokens, chunks, logical bytes (what\n"
       "the .coli_kv files of every conversation would take), unique bytes (the same,\n"
       "counting shared chunks once), stored bytes (of the compressed chunk blobs),\n"
       "the bytes saved by sharing and by compression; and the file size. The store is\n"
       "opened read-only.\n",
       "  --json              print as JSON\n",
       std::string("  store, file_bytes (database plus WAL), models[] and total, each with\n"
                   "  conversations, tokens, chunks, logical_bytes, unique_bytes, stored_bytes,\n"
                   "  saved_by_sharing, saved_by_compression, ratio (logical / stored, or null);\n"
                   "  each element of models[] starts with model{...} and chunk_tokens\n") +
           kModelKeys,
       1, 1, {{"--json", false}, {"--busy-timeout", true}}, cmd_stats},
      {"match", "STORE --model-of ID --tokens FILE [--json]",
       "find the conversation holding the longest prefix of a prompt",
       "Answers which conversation of the model of conversation ID holds the longest\n"
       "prefix of the prompt in FILE, and how many of its tokens. FILE holds token ids\n"
       "as decimal numbers separated by whitespace, or is a .coli_kv file (its counted\n"
       "records' token ids). Ties go to the most recently used conversation; only equal\n"
       "token ids count; other models are never matched. An evicted conversation\n"
       "matches too, and the output says how much of it can still be loaded. Exit 0\n"
       "whether or not a conversation matches. The store is opened read-only.\n",
       "  --model-of ID       match conversations of the model of conversation ID\n"
       "  --tokens FILE       the prompt's token ids\n"
       "  --json              print as JSON\n",
       std::string("  store, model{...}, prompt_tokens, id (null when nothing matches), tokens\n"
                   "  (leading prompt tokens it holds), loadable (of those, how many still have\n"
                   "  their KV data), evicted (loadable < tokens)\n") +
           kModelKeys,
       1, 1, {{"--model-of", true}, {"--tokens", true}, {"--json", false}, {"--busy-timeout", true}}, cmd_match},
      {"gc", "STORE --max-bytes N [--json]", "evict KV data until the store fits a byte budget",
       "Evicts the KV data of the least recently used conversations until the chunk\n"
       "payloads take at most N bytes (the stored bytes of 'colikv stats'; 0 evicts\n"
       "all). Evicted conversations keep their rows, metadata and token ids: loading\n"
       "one fails with 'evicted' and returns its token ids, and appending it again\n"
       "re-saves it. Chunks still used by a kept conversation stay. One transaction.\n"
       "The freed pages are reused by SQLite; 'colikv vacuum' gives them back.\n",
       "  --max-bytes N       the budget in bytes of KV data\n"
       "  --json              print as JSON\n",
       "  store, max_bytes, stored_bytes_before, stored_bytes_after, freed_bytes, chunks\n"
       "  (payloads evicted), evicted[] (ids of the conversations that lost KV data,\n"
       "  least recently used first), fits (stored_bytes_after <= max_bytes)\n",
       1, 1, {{"--max-bytes", true}, {"--json", false}, {"--sync", true}, {"--busy-timeout", true}}, cmd_gc},
      {"vacuum", "STORE [--json]", "give the store's free space back to the filesystem",
       "Rewrites the file without its free pages (SQLite's VACUUM) and truncates the\n"
       "WAL. Needs free disk space about the size of the store.\n",
       "  --json              print as JSON\n", "  store, file_bytes_before, file_bytes_after (database plus WAL)\n",
       1, 1, {{"--json", false}, {"--sync", true}, {"--busy-timeout", true}}, cmd_vacuum},
  };
  return all;
}

const CommandSpec* find_command(const std::string& name) {
  for (const auto& c : commands())
    if (name == c.name) return &c;
  return nullptr;
}

// Parses the arguments after the command name. Returns false (after printing
// the help) when --help was asked for.
bool parse_args(const CommandSpec& c, const std::vector<std::string>& argv, Args& out) {
  out.command = &c;
  for (const auto& s : argv) {
    if (s == "--") break;
    if (s == "--help" || s == "-h") {
      print(command_help(c));
      return false;
    }
  }
  bool only_positional = false;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& s = argv[i];
    if (!only_positional && s == "--") {
      only_positional = true;
      continue;
    }
    if (only_positional || s.size() < 2 || s[0] != '-') {
      out.positional.push_back(s);
      continue;
    }
    std::string name = s, value;
    bool inline_value = false;
    size_t eq = s.find('=');
    if (s.compare(0, 2, "--") == 0 && eq != std::string::npos) {
      name = s.substr(0, eq);
      value = s.substr(eq + 1);
      inline_value = true;
    }
    const OptionSpec* spec = nullptr;
    for (const auto& o : c.options)
      if (name == o.name) spec = &o;
    if (!spec) {
      if (s[1] >= '0' && s[1] <= '9') throw UsageError{"bad number '" + s + "' (expected a non-negative integer)"};
      throw UsageError{"unknown option '" + name + "'"};
    }
    if (spec->takes_value && !inline_value) {
      if (i + 1 >= argv.size()) throw UsageError{"option " + name + " needs a value"};
      value = argv[++i];
    } else if (!spec->takes_value && inline_value) {
      throw UsageError{"option " + name + " takes no value"};
    }
    out.options[name] = value;
  }
  if (out.positional.size() < c.min_positional)
    throw UsageError{"missing arguments: expected 'colikv " + std::string(c.name) + " " + c.synopsis + "'"};
  if (out.positional.size() > c.max_positional)
    throw UsageError{"unexpected argument '" + out.positional[c.max_positional] + "'"};
  return true;
}

void error_line(const std::string& command, const std::string& message) {
  std::fflush(stdout);
  std::string line = "colikv: " + (command.empty() ? "" : command + ": ") + message;
  // One line: a message with newlines (e.g. from SQLite) is joined; and the
  // ids, titles and paths it quotes must not drive the terminal.
  for (char& ch : line)
    if (ch == '\n' || ch == '\r') ch = ' ';
  std::fprintf(stderr, "%s\n", shown(line).c_str());
}

int run(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::fputs(main_help().c_str(), stderr);
    return kExitUsage;
  }
  const std::string& first = args[0];
  if (first == "--help" || first == "-h" || first == "help") {
    if (args.size() > 1 && first == "help") {
      const CommandSpec* c = find_command(args[1]);
      if (!c) {
        error_line("", "unknown command '" + args[1] + "' (see colikv --help)");
        return kExitUsage;
      }
      print(command_help(*c));
    } else {
      print(main_help());
    }
    return kExitOk;
  }
  const CommandSpec* c = find_command(first);
  if (!c) {
    error_line("", (first.size() > 0 && first[0] == '-' ? "unknown option '" : "unknown command '") + first +
                       "' (see colikv --help)");
    return kExitUsage;
  }
  int code;
  Args a;
  try {
    if (!parse_args(*c, std::vector<std::string>(args.begin() + 1, args.end()), a)) {
      code = kExitOk;
    } else {
      code = c->handler(a);
    }
  } catch (const UsageError& e) {
    error_line(c->name, e.message + " (see colikv " + c->name + " --help)");
    return kExitUsage;
  } catch (const Failure& e) {
    error_line(c->name, e.message);
    return kExitFailure;
  } catch (const colikv::Error& e) {
    std::string message = e.what();
    // Every command but inspect names its store first.
    if (e.code() == colikv::ErrorCode::kDiskFull && c->handler != cmd_inspect && !a.positional.empty())
      message += colikv_cli::disk_full_advice(a.positional[0]);
    error_line(c->name, message);
    return kExitFailure;
  } catch (const std::bad_alloc&) {
    error_line(c->name, "out of memory");
    return kExitFailure;
  } catch (const std::exception& e) {
    error_line(c->name, e.what());
    return kExitFailure;
  }
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    error_line(c->name, std::string("cannot write the output: ") + std::strerror(errno));
    return kExitFailure;
  }
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  // Past a file-size limit (ulimit -f) a write should fail with EFBIG and be
  // reported, not kill the tool between a commit and its output.
  std::signal(SIGXFSZ, SIG_IGN);
  return run(argc, argv);
}
