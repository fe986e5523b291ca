// The colikv command-line tool, run as a separate process: every command and
// exit code, --json output against hand-written expected text, byte-exact
// round trips, the bad-input corpus (each refused with a message naming the
// problem, the store unchanged), and the views a person reads at the sqlite3
// shell, checked with the real sqlite3 binary.
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <regex>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "cli_run.h"
#include "test_support.h"

namespace {

using colikv_test::EngineBuffers;
using colikv_test::TempDir;
using colikv_test::read_file;
using colikv_test::write_file;
using colikv_test::Run;
using colikv_test::RunOptions;
using colikv_test::coli_bytes;
using colikv_test::contains;
using colikv_test::contains_ci;
using colikv_test::describe;
using colikv_test::dump_store;
using colikv_test::file_exists;
using colikv_test::require_error_line;
using colikv_test::run_program;
using colikv_test::sql_exec;
using colikv_test::tool;

const std::string kSample = std::string(COLIKV_SAMPLE_DIR) + "/glm_tiny_nodsa_51.coli_kv";
const char* const kSqlite3 = COLIKV_SQLITE3_SHELL;  // found by find_program; "" when missing

// ---------------------------------------------------------------------------
// Editing .coli_kv bytes.

void set_header_field(std::string& bytes, int field, int32_t v) { std::memcpy(&bytes[8 + 4 * field], &v, 4); }

int32_t token_at(const std::string& bytes, int64_t record_bytes, int64_t pos) {
  int32_t t;
  std::memcpy(&t, bytes.data() + 40 + pos * record_bytes, 4);
  return t;
}

void set_token(std::string& bytes, int64_t record_bytes, int64_t pos, int32_t t) {
  std::memcpy(&bytes[static_cast<size_t>(40 + pos * record_bytes)], &t, 4);
}

// What the engine's file holds for its first k records: the header with count
// k, then those records.
std::string prefix_file(const std::string& bytes, int64_t record_bytes, int64_t k) {
  std::string p = bytes.substr(0, static_cast<size_t>(40 + k * record_bytes));
  set_header_field(p, 6, static_cast<int32_t>(k));
  return p;
}

// Special float patterns in the first positions of every plane.
void special_values(EngineBuffers& b) {
  const uint32_t bits[] = {0x7fc00000u, 0x7fc12345u, 0xffc00000u, 0x7f800001u, 0xff80abcdu, 0x7f800000u,
                           0xff800000u, 0x80000000u, 0x00000000u, 0x00000001u, 0x807fffffu, 0x7f7fffffu};
  auto put = [&](std::vector<float>& plane) {
    for (size_t i = 0; i < plane.size() && i < 3 * (sizeof bits / 4); ++i)
      std::memcpy(&plane[i], &bits[i % (sizeof bits / 4)], 4);
  };
  for (auto& v : b.lc) put(v);
  for (auto& v : b.rc) put(v);
  for (auto& v : b.ic) put(v);
}

// ---------------------------------------------------------------------------
// JSON: a strict validator, and masks for the values that vary between runs.

class JsonCheck {
 public:
  explicit JsonCheck(const std::string& s) : s_(s) {}
  bool valid() {
    ws();
    if (!value()) return false;
    ws();
    return i_ == s_.size();
  }

 private:
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r')) ++i_;
  }
  bool lit(const char* w) {
    size_t n = std::strlen(w);
    if (s_.compare(i_, n, w) != 0) return false;
    i_ += n;
    return true;
  }
  bool value() {
    if (i_ >= s_.size()) return false;
    char c = s_[i_];
    if (c == '{') return object();
    if (c == '[') return array();
    if (c == '"') return string();
    if (c == 't') return lit("true");
    if (c == 'f') return lit("false");
    if (c == 'n') return lit("null");
    return number();
  }
  bool object() {
    ++i_;
    ws();
    if (i_ < s_.size() && s_[i_] == '}') { ++i_; return true; }
    for (;;) {
      ws();
      if (!string()) return false;
      ws();
      if (i_ >= s_.size() || s_[i_++] != ':') return false;
      ws();
      if (!value()) return false;
      ws();
      if (i_ >= s_.size()) return false;
      if (s_[i_] == ',') { ++i_; continue; }
      if (s_[i_] == '}') { ++i_; return true; }
      return false;
    }
  }
  bool array() {
    ++i_;
    ws();
    if (i_ < s_.size() && s_[i_] == ']') { ++i_; return true; }
    for (;;) {
      ws();
      if (!value()) return false;
      ws();
      if (i_ >= s_.size()) return false;
      if (s_[i_] == ',') { ++i_; continue; }
      if (s_[i_] == ']') { ++i_; return true; }
      return false;
    }
  }
  bool string() {
    if (i_ >= s_.size() || s_[i_] != '"') return false;
    ++i_;
    while (i_ < s_.size()) {
      unsigned char c = static_cast<unsigned char>(s_[i_]);
      if (c == '"') { ++i_; return true; }
      if (c < 0x20) return false;
      if (c == '\\') {
        ++i_;
        if (i_ >= s_.size()) return false;
        char e = s_[i_];
        if (e == 'u') {
          for (int k = 1; k <= 4; ++k)
            if (i_ + k >= s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[i_ + k]))) return false;
          i_ += 5;
          continue;
        }
        if (!std::strchr("\"\\/bfnrt", e)) return false;
        ++i_;
        continue;
      }
      if (c >= 0x80) {  // valid UTF-8 only
        int n = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c <= 0xdf ? 2 : 0;
        if (n == 0 || i_ + n > s_.size()) return false;
        for (int k = 1; k < n; ++k)
          if ((static_cast<unsigned char>(s_[i_ + k]) & 0xc0) != 0x80) return false;
        i_ += n;
        continue;
      }
      ++i_;
    }
    return false;
  }
  bool number() {
    static const std::regex re(R"(^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?)");
    std::smatch m;
    std::string rest = s_.substr(i_, 64);
    if (!std::regex_search(rest, m, re) || m.length(0) == 0) return false;
    i_ += static_cast<size_t>(m.length(0));
    return true;
  }
  const std::string& s_;
  size_t i_ = 0;
};

bool valid_json(const std::string& s) { return JsonCheck(s).valid(); }

// Replaces what varies from run to run, checking its form on the way: times
// (ISO 8601 UTC with milliseconds), Unix milliseconds, and the sizes that
// depend on the compressor.
std::string mask_json(std::string s) {
  s = std::regex_replace(s, std::regex(R"re("(created|updated|last_used)": "\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")re"),
                         "\"$1\": \"<TIME>\"");
  s = std::regex_replace(s, std::regex(R"re("(created_ms|updated_ms|last_used_ms)": 1\d{12})re"), "\"$1\": <MS>");
  s = std::regex_replace(s, std::regex(R"re("(stored_bytes|saved_by_compression|file_bytes)": \d+)re"),
                         "\"$1\": <BYTES>");
  s = std::regex_replace(s, std::regex(R"re("ratio": \d+\.\d{3})re"), "\"ratio\": <RATIO>");
  return s;
}

// The integer value of the first `"key": N` in a JSON text; -1 if absent.
int64_t json_int(const std::string& json, const std::string& key, size_t from = 0) {
  std::smatch m;
  std::string tail = json.substr(from);
  if (!std::regex_search(tail, m, std::regex("\"" + key + "\": (-?\\d+)"))) return -1;
  return std::stoll(m[1].str());
}

std::string sample_model_json(const std::string& indent, const std::string& weights = "") {
  const std::string sig = "n_layers=5 kv_lora=32 qk_rope=8 index_hd=0 n_indexed=0 vocab=264" +
                          (weights.empty() ? "" : " weights=" + weights);
  return "{\n" + indent + "  \"signature\": \"" + sig + "\",\n" + indent + "  \"n_layers\": 5,\n" + indent +
         "  \"kv_lora\": 32,\n" + indent + "  \"qk_rope\": 8,\n" + indent + "  \"index_hd\": 0,\n" + indent +
         "  \"n_indexed\": 0,\n" + indent + "  \"vocab\": 264,\n" + indent + "  \"weights_id\": \"" + weights +
         "\",\n" + indent + "  \"record_bytes\": 804\n" + indent + "}";
}

const std::vector<std::string> kCommands = {"import", "export", "inspect", "ls",     "info", "rm",
                                            "rename", "fork",   "truncate", "verify", "stats"};

}  // namespace

// ===========================================================================

TEST_CASE("cli: help, usage errors and their exit codes", "[cli]") {
  TempDir dir;
  const std::string store = dir.file("s.colikv");

  Run r = RUN_EXPECT(0, {"--help"});
  CHECK(r.err.empty());
  CHECK(contains(r.out, "usage: colikv COMMAND"));
  for (const auto& c : kCommands) CHECK(contains(r.out, "  " + c + " "));
  CHECK(RUN_EXPECT(0, {"help"}).out == r.out);
  CHECK(RUN_EXPECT(0, {"-h"}).out == r.out);

  // No command: the usage on stderr, exit 2.
  r = RUN_EXPECT(2, {});
  CHECK(r.out.empty());
  CHECK(contains(r.err, "usage: colikv"));

  for (const auto& c : kCommands) {
    Run h = RUN_EXPECT(0, {c, "--help"});
    CHECK(h.out.rfind("usage: colikv " + c + " ", 0) == 0);
    CHECK(contains(h.out, "exit status"));
    CHECK(h.err.empty());
    CHECK(RUN_EXPECT(0, {"help", c}).out == h.out);
    CHECK(RUN_EXPECT(0, {c, "-h"}).out == h.out);
    // --help wins over anything else on the line.
    CHECK(RUN_EXPECT(0, {c, "x", "--bogus", "--help"}).out == h.out);
  }
  // The --json keys are documented.
  CHECK(contains(RUN_EXPECT(0, {"ls", "--help"}).out, "last_used_ms"));
  CHECK(contains(RUN_EXPECT(0, {"verify", "--help"}).out, "chunk_seq"));
  CHECK(contains(RUN_EXPECT(0, {"stats", "--help"}).out, "saved_by_sharing"));
  CHECK(contains(RUN_EXPECT(0, {"inspect", "--help"}).out, "records_on_disk"));
  CHECK(contains(RUN_EXPECT(0, {"import", "--help"}).out, "ignored_records"));

  r = RUN_EXPECT(2, {"frobnicate", store});
  CHECK(r.err == "colikv: unknown command 'frobnicate' (see colikv --help)\n");
  r = RUN_EXPECT(2, {"help", "frobnicate"});
  CHECK(contains(r.err, "unknown command 'frobnicate'"));
  r = RUN_EXPECT(2, {"--frobnicate"});
  CHECK(contains(r.err, "unknown option '--frobnicate'"));

  struct Case {
    std::vector<std::string> args;
    std::string phrase;
  };
  const std::vector<Case> cases = {
      {{"ls", store, "--bogus"}, "unknown option '--bogus'"},
      {{"ls", store, "-x"}, "unknown option '-x'"},
      {{"inspect", kSample, "--sync", "full"}, "unknown option '--sync'"},
      {{"ls", store, "--json=yes"}, "option --json takes no value"},
      {{"import", store}, "missing arguments"},
      {{"import"}, "missing arguments"},
      {{"export", store, "id"}, "missing arguments"},
      {{"info", store}, "missing arguments"},
      {{"rm", store}, "missing arguments"},
      {{"rename", store, "a"}, "missing arguments"},
      {{"fork", store, "a"}, "missing arguments"},
      {{"truncate", store, "a"}, "missing arguments"},
      {{"verify"}, "missing arguments"},
      {{"stats"}, "missing arguments"},
      {{"inspect"}, "missing arguments"},
      {{"ls", store, "extra"}, "unexpected argument 'extra'"},
      {{"verify", store, "id", "extra"}, "unexpected argument 'extra'"},
      {{"truncate", store, "id", "abc"}, "bad number 'abc'"},
      {{"truncate", store, "id", "12x"}, "bad number '12x'"},
      {{"truncate", store, "id", "-1"}, "bad number '-1'"},
      {{"truncate", store, "id", "+5"}, "bad number '+5'"},
      {{"truncate", store, "id", ""}, "bad number ''"},
      {{"truncate", store, "id", "99999999999999999999"}, "bad number '99999999999999999999'"},
      {{"fork", store, "a", "b", "--at", "x"}, "bad number 'x'"},
      {{"fork", store, "a", "b", "--at=-3"}, "bad number '-3'"},
      {{"fork", store, "a", "b", "--at"}, "option --at needs a value"},
      {{"inspect", kSample, "--tokens", "1.5"}, "bad number '1.5'"},
      {{"ls", store, "--limit", "ten"}, "bad number 'ten'"},
      {{"ls", store, "--busy-timeout", "soon"}, "bad number 'soon'"},
      {{"rm", store, "a", "--sync", "sometimes"}, "bad value 'sometimes' for --sync"},
      {{"import", store, kSample, "--progress", "--quiet"}, "--progress and --quiet exclude each other"},
      {{"import", store, kSample, "--id="}, "--id must not be empty"},
  };
  for (const auto& c : cases) {
    Run u = tool(c.args);
    INFO(describe(c.args, u));
    CHECK(u.code == 2);
    CHECK(u.out.empty());
    require_error_line(u, c.args[0]);
    CHECK(contains(u.err, c.phrase));
    CHECK(contains(u.err, "(see colikv " + c.args[0] + " --help)"));
  }
  // Wrong usage never touches a store: none was created.
  CHECK_FALSE(file_exists(store));

  // `--` ends the options: an id may start with a dash.
  RUN_EXPECT(0, {"import", "--sync=normal", store, kSample, "--id", "-dash"});
  r = RUN_EXPECT(0, {"info", store, "--", "-dash"});
  CHECK(contains(r.out, "-dash"));
  RUN_EXPECT(0, {"rm", store, "--", "-dash"});
}

TEST_CASE("cli: the sample round-trips byte for byte", "[cli]") {
  TempDir dir;
  const std::string store = dir.file("s.colikv");
  const std::string out = dir.file("out.coli_kv");
  const std::string sample = read_file(kSample);
  REQUIRE(sample.size() == 41044);

  Run r = RUN_EXPECT(0, {"inspect", kSample});
  CHECK(contains(r.out, "n_layers=5 kv_lora=32 qk_rope=8 index_hd=0 n_indexed=0 vocab=264"));
  CHECK(contains(r.out, "51 records"));
  CHECK(contains(r.out, "51 complete records, 0 trailing bytes"));
  CHECK(contains(r.out, "257 258 259 112 108 97 105 110 32 103 101 111 109 101 116 114 ..."));
  CHECK(contains(r.out, "problems      none"));
  CHECK(r.err.empty());

  // The store does not exist yet: import creates it. Default id: the file name.
  r = RUN_EXPECT(0, {"import", store, kSample});
  CHECK(r.out.rfind("imported " + kSample + " as 'glm_tiny_nodsa_51'\n", 0) == 0);
  CHECK(contains(r.out, "tokens   51\n"));
  CHECK(contains(r.out, "41004 B (40.0 KiB) of 804 B each"));
  CHECK_FALSE(contains(r.out, "ignored"));
  CHECK(r.err.empty());

  r = RUN_EXPECT(0, {"export", store, "glm_tiny_nodsa_51", out});
  CHECK(r.out == "exported 'glm_tiny_nodsa_51' to " + out + ": 51 tokens, 41044 B (40.1 KiB)\n");
  CHECK(read_file(out) == sample);

  // No overwrite without --force; the existing file stays as it was.
  write_file(out, "precious");
  r = RUN_EXPECT(1, {"export", store, "glm_tiny_nodsa_51", out});
  require_error_line(r, "export");
  CHECK(contains(r.err, out));
  CHECK(contains(r.err, "exists"));
  CHECK(read_file(out) == "precious");
  RUN_EXPECT(0, {"export", store, "glm_tiny_nodsa_51", out, "--force"});
  CHECK(read_file(out) == sample);
  // No temporary file is left beside it.
  RUN_EXPECT(0, {"export", store, "glm_tiny_nodsa_51", out, "--force", "--quiet"});
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    if (e.path().filename().string().rfind("out.coli_kv", 0) == 0) ++entries;
  CHECK(entries == 1);

  // Export of a missing conversation: exit 1, the id named, no file written.
  r = RUN_EXPECT(1, {"export", store, "nope", dir.file("nope.coli_kv")});
  require_error_line(r, "export");
  CHECK(contains(r.err, "nope"));
  CHECK(contains(r.err, "no such conversation"));
  CHECK_FALSE(file_exists(dir.file("nope.coli_kv")));

  // A second import under another id with a weights identity.
  RUN_EXPECT(0, {"import", store, kSample, "--id", "q8", "--weights-id", "glm-q8", "--sync", "full"});
  r = RUN_EXPECT(0, {"info", store, "q8", "--json"});
  CHECK(contains(r.out, "\"signature\": \"n_layers=5 kv_lora=32 qk_rope=8 index_hd=0 n_indexed=0 vocab=264 weights=glm-q8\""));
  CHECK(contains(r.out, "\"weights_id\": \"glm-q8\""));
  RUN_EXPECT(0, {"export", store, "q8", dir.file("q8.coli_kv")});
  CHECK(read_file(dir.file("q8.coli_kv")) == sample);  // the weights identity is not in the file format

  // Progress: forced with --progress even though stderr is not a terminal;
  // the report on stdout is the same.
  r = RUN_EXPECT(0, {"export", store, "q8", dir.file("p.coli_kv"), "--progress"});
  CHECK(r.out == "exported 'q8' to " + dir.file("p.coli_kv") + ": 51 tokens, 41044 B (40.1 KiB)\n");
  CHECK(r.err.rfind("\rexport q8: ", 0) == 0);
  CHECK(contains(r.err, "100.0%  0.0/0.0 MB"));
  CHECK(contains(r.err, " MB/s"));
  CHECK(r.err.back() == '\n');
  r = RUN_EXPECT(0, {"import", store, kSample, "--id", "p", "--progress", "--sync", "normal"});
  CHECK(contains(r.err, "\rimport " + kSample + ": 100.0%"));
  CHECK(r.out.rfind("imported " + kSample + " as 'p'\n", 0) == 0);
  r = RUN_EXPECT(0, {"import", store, kSample, "--id", "quiet", "--quiet"});
  CHECK(r.err.empty());
  RUN_EXPECT(0, {"rm", store, "p"});
  RUN_EXPECT(0, {"rm", store, "quiet"});

  r = RUN_EXPECT(0, {"verify", store});
  CHECK(contains(r.out, "checked 2 conversations"));
  CHECK(contains(r.out, "integrity_check: ok"));
  CHECK(contains(r.out, "ok: no problems found"));
  RUN_EXPECT(0, {"verify", store, "q8"});
}

TEST_CASE("cli: --json output matches the documented form", "[cli]") {
  TempDir dir;
  const std::string store = dir.file("s.colikv");
  const std::string out = dir.file("alpha.coli_kv");

  auto json_run = [&](const std::vector<std::string>& args, int code = 0) {
    Run r = tool(args);
    INFO(describe(args, r));
    REQUIRE(r.code == code);
    REQUIRE(valid_json(r.out));
    return r.out;
  };

  // inspect: nothing varies but the path.
  std::string j = json_run({"inspect", kSample, "--json"});
  CHECK(j ==
        "{\n"
        "  \"file\": \"" + kSample + "\",\n"
        "  \"file_bytes\": 41044,\n"
        "  \"header_read\": true,\n"
        "  \"model\": " + sample_model_json("  ") + ",\n"
        "  \"header_count\": 51,\n"
        "  \"record_bytes\": 804,\n"
        "  \"records_on_disk\": 51,\n"
        "  \"records_past_count\": 0,\n"
        "  \"trailing_bytes\": 0,\n"
        "  \"first_tokens\": [257, 258, 259, 112, 108, 97, 105, 110, 32, 103, 101, 111, 109, 101, 116, 114],\n"
        "  \"ok\": true,\n"
        "  \"problems\": []\n"
        "}\n");
  j = json_run({"inspect", kSample, "--json", "--tokens", "3"});
  CHECK(contains(j, "\"first_tokens\": [257, 258, 259],\n"));
  j = json_run({"inspect", kSample, "--json", "--tokens", "0"});
  CHECK(contains(j, "\"first_tokens\": [],\n"));

  // An empty file: the header is unreadable, model is null; exit 1.
  write_file(dir.file("empty.coli_kv"), "");
  j = json_run({"inspect", dir.file("empty.coli_kv"), "--json"}, 1);
  CHECK(j ==
        "{\n"
        "  \"file\": \"" + dir.file("empty.coli_kv") + "\",\n"
        "  \"file_bytes\": 0,\n"
        "  \"header_read\": false,\n"
        "  \"model\": null,\n"
        "  \"header_count\": 0,\n"
        "  \"record_bytes\": 0,\n"
        "  \"records_on_disk\": 0,\n"
        "  \"records_past_count\": 0,\n"
        "  \"trailing_bytes\": 0,\n"
        "  \"first_tokens\": [],\n"
        "  \"ok\": false,\n"
        "  \"problems\": [\"the file is empty\"]\n"
        "}\n");

  j = json_run({"import", store, kSample, "--id", "alpha", "--json", "--sync", "normal"});
  CHECK(j ==
        "{\n"
        "  \"store\": \"" + store + "\",\n"
        "  \"file\": \"" + kSample + "\",\n"
        "  \"id\": \"alpha\",\n"
        "  \"model\": " + sample_model_json("  ") + ",\n"
        "  \"tokens\": 51,\n"
        "  \"raw_bytes\": 41004,\n"
        "  \"header_count\": 51,\n"
        "  \"ignored_records\": 0,\n"
        "  \"ignored_bytes\": 0,\n"
        "  \"salvaged\": false\n"
        "}\n");


  RUN_EXPECT(0, {"fork", store, "alpha", "beta", "--at", "20", "--sync", "normal"});

  // A conversation object as info and ls write it, at the given indent.
  auto conversation = [](const std::string& in, const std::string& id, int64_t tokens, const std::string& parent,
                         int64_t forked_at) {
    return "{\n" + in + "  \"id\": \"" + id + "\",\n" + in + "  \"model\": " + sample_model_json(in + "  ") + ",\n" +
           in + "  \"tokens\": " + std::to_string(tokens) + ",\n" + in + "  \"raw_bytes\": " +
           std::to_string(tokens * 804) + ",\n" + in + "  \"stored_bytes\": <BYTES>,\n" + in +
           "  \"ratio\": <RATIO>,\n" + in + "  \"title\": \"\",\n" + in + "  \"metadata\": \"{}\",\n" + in +
           "  \"parent\": " + parent + ",\n" + in + "  \"forked_at\": " + std::to_string(forked_at) + ",\n" + in +
           "  \"created\": \"<TIME>\",\n" + in + "  \"updated\": \"<TIME>\",\n" + in + "  \"last_used\": \"<TIME>\",\n" +
           in + "  \"created_ms\": <MS>,\n" + in + "  \"updated_ms\": <MS>,\n" + in + "  \"last_used_ms\": <MS>\n" + in +
           "}";
  };

  std::string info_alpha = json_run({"info", store, "alpha", "--json"});
  CHECK(mask_json(info_alpha) == conversation("", "alpha", 51, "null", 0) + "\n");
  std::string info_beta = json_run({"info", store, "beta", "--json"});
  CHECK(mask_json(info_beta) == conversation("", "beta", 20, "\"alpha\"", 20) + "\n");

  // ls: most recently used first (the fork is at least as recent as its source).
  j = json_run({"ls", store, "--json"});
  CHECK(mask_json(j) == "{\n"
                        "  \"store\": \"" + store + "\",\n"
                        "  \"conversations\": [\n"
                        "    " + conversation("    ", "beta", 20, "\"alpha\"", 20) + ",\n"
                        "    " + conversation("    ", "alpha", 51, "null", 0) + "\n"
                        "  ]\n"
                        "}\n");
  // The sizes hidden by the mask are consistent: ratio = raw / stored.
  const int64_t stored_alpha = json_int(info_alpha, "stored_bytes");
  const int64_t stored_beta = json_int(info_beta, "stored_bytes");
  CHECK(stored_alpha > 0);
  CHECK(stored_beta > 0);
  {
    std::smatch m;
    REQUIRE(std::regex_search(info_alpha, m, std::regex(R"("ratio": (\d+\.\d{3}))")));
    CHECK(std::stod(m[1].str()) == Approx(41004.0 / static_cast<double>(stored_alpha)).margin(0.0006));
  }
  j = json_run({"ls", store, "--json", "--limit", "1"});
  CHECK(contains(j, "\"id\": \"beta\""));
  CHECK_FALSE(contains(j, "\"id\": \"alpha\""));

  // verify: two conversations, two distinct chunks (the fork at 20 re-encodes
  // the source's partial chunk). "bytes" is the decoded payload checked.
  j = json_run({"verify", store, "--json"});
  const int64_t verified_bytes = json_int(j, "bytes");
  CHECK(verified_bytes >= (51 + 20) * 800);
  CHECK(std::regex_replace(j, std::regex(R"("bytes": \d+)"), "\"bytes\": <BYTES>") ==
        "{\n"
        "  \"store\": \"" + store + "\",\n"
        "  \"conversation\": null,\n"
        "  \"conversations\": 2,\n"
        "  \"chunks\": 2,\n"
        "  \"bytes\": <BYTES>,\n"
        "  \"integrity\": \"ok\",\n"
        "  \"ok\": true,\n"
        "  \"problems\": [],\n"
        "  \"uncompared_shares\": []\n"
        "}\n");
  j = json_run({"verify", store, "alpha", "--json"});
  CHECK(contains(j, "  \"conversation\": \"alpha\",\n  \"conversations\": 1,\n  \"chunks\": 1,\n"));

  // stats: logical = (51 + 20) * 804; nothing shared (no full chunk).
  j = json_run({"stats", store, "--json"});
  const std::string usage =
      "    \"conversations\": 2,\n"
      "    \"tokens\": 71,\n"
      "    \"chunks\": 2,\n"
      "    \"logical_bytes\": 57084,\n"
      "    \"unique_bytes\": 57084,\n"
      "    \"stored_bytes\": <BYTES>,\n"
      "    \"saved_by_sharing\": 0,\n"
      "    \"saved_by_compression\": <BYTES>,\n"
      "    \"ratio\": <RATIO>\n";
  auto indented = [](const std::string& text, const std::string& extra) {
    std::string result;
    size_t start = 0;
    while (start < text.size()) {
      size_t end = text.find('\n', start);
      result += extra + text.substr(start, end - start + 1);
      start = end + 1;
    }
    return result;
  };
  CHECK(mask_json(j) == "{\n"
                        "  \"store\": \"" + store + "\",\n"
                        "  \"file_bytes\": <BYTES>,\n"
                        "  \"models\": [\n"
                        "    {\n"
                        "      \"model\": " + sample_model_json("      ") + ",\n"
                        "      \"chunk_tokens\": 1024,\n" +
                        indented(usage, "  ") +
                        "    }\n"
                        "  ],\n"
                        "  \"total\": {\n" + usage +
                        "  }\n"
                        "}\n");
  CHECK(json_int(j, "stored_bytes") == stored_alpha + stored_beta);
  CHECK(json_int(j, "saved_by_compression") == 57084 - (stored_alpha + stored_beta));
  CHECK(json_int(j, "file_bytes") > stored_alpha + stored_beta);

  j = json_run({"export", store, "alpha", out, "--json"});
  CHECK(j == "{\n"
             "  \"store\": \"" + store + "\",\n"
             "  \"id\": \"alpha\",\n"
             "  \"file\": \"" + out + "\",\n"
             "  \"tokens\": 51,\n"
             "  \"bytes\": 41044\n"
             "}\n");

  // Strings are escaped; bytes that are not UTF-8 become U+FFFD.
  const std::string odd = std::string("we\"ird\\id\n\ttab\x01") + "\xff" + " \xc3\xa9";
  RUN_EXPECT(0, {"import", store, kSample, "--id", odd, "--sync", "normal"});
  j = json_run({"ls", store, "--json"});
  CHECK(contains(j, "\"id\": \"we\\\"ird\\\\id\\n\\ttab\\u0001\\ufffd \xc3\xa9\",\n"));
  j = json_run({"info", store, odd, "--json"});
  CHECK(contains(j, "\"id\": \"we\\\"ird\\\\id\\n\\ttab\\u0001\\ufffd \xc3\xa9\",\n"));
  // An error naming such an id is still one line.
  Run r = RUN_EXPECT(1, {"info", store, std::string("no\nsuch")});
  require_error_line(r, "info");
}

TEST_CASE("cli: generated files round-trip byte for byte", "[cli]") {
  TempDir dir;
  const std::string store = dir.file("s.colikv");
  struct Case {
    std::string id;
    colikv::ModelSignature model;
    int64_t n;
    void (*tweak)(EngineBuffers&);
  };
  const std::vector<Case> cases = {
      {"single", colikv_test::tiny_model(), 1, nullptr},
      {"single-indexed", colikv_test::tiny_indexed_model(), 1, nullptr},
      {"indexed", colikv_test::tiny_indexed_model(), 300, nullptr},
      {"thousands", colikv_test::tiny_model(), 3000, nullptr},
      {"one-chunk", colikv_test::tiny_model(), 1024, nullptr},
      {"chunk-and-one", colikv_test::tiny_model(), 1025, nullptr},
      {"special", colikv_test::tiny_model(), 40, special_values},
      {"special-indexed", colikv_test::tiny_indexed_model(), 40, special_values},
      {"empty", colikv_test::tiny_model(), 0, nullptr},
  };
  uint32_t seed = 100;
  for (const auto& c : cases) {
    INFO("case " << c.id);
    const std::string file = dir.file(c.id + ".coli_kv");
    const std::string bytes = coli_bytes(c.model, c.n, ++seed, -1, c.tweak);
    REQUIRE(static_cast<int64_t>(bytes.size()) == 40 + c.n * c.model.record_bytes());
    write_file(file, bytes);
    RUN_EXPECT(0, {"inspect", file});
    Run r = RUN_EXPECT(0, {"import", store, file, "--sync", "normal"});  // default id: the file name
    CHECK(r.out.rfind("imported " + file + " as '" + c.id + "'\n", 0) == 0);
    CHECK(contains(r.out, "tokens   " + std::to_string(c.n) + "\n"));
    const std::string out = dir.file(c.id + ".out");
    RUN_EXPECT(0, {"export", store, c.id, out});
    CHECK(read_file(out) == bytes);
  }
  Run r = RUN_EXPECT(0, {"verify", store});
  CHECK(contains(r.out, "checked 9 conversations"));
  CHECK(contains(r.out, "ok: no problems found"));
}

TEST_CASE("cli: files with the same token ids and other values each export byte for byte", "[cli]") {
  TempDir dir;
  const std::string store = dir.file("n.db");
  const colikv::ModelSignature m = colikv_test::tiny_indexed_model();
  const int64_t n = 40;
  const std::string a = coli_bytes(m, n, 7);
  // Same shape, same token ids; the first float of every record differs:
  // NaN payloads, -0.0, denormals, or another value.
  std::string b = a;
  const uint32_t bits[] = {0x7fc00123u, 0x80000000u, 0x00000007u, 0x807fffffu, 0x3f800000u};
  for (int64_t p = 0; p < n; ++p) {
    uint32_t v;
    std::memcpy(&v, &a[static_cast<size_t>(40 + p * m.record_bytes() + 4)], 4);
    const uint32_t w = bits[p % 5] == v ? bits[p % 5] ^ 1u : bits[p % 5];
    std::memcpy(&b[static_cast<size_t>(40 + p * m.record_bytes() + 4)], &w, 4);
  }
  write_file(dir.file("A.coli_kv"), a);
  write_file(dir.file("B.coli_kv"), b);
  RUN_EXPECT(0, {"import", store, dir.file("A.coli_kv"), "--id", "a"});
  RUN_EXPECT(0, {"import", store, dir.file("B.coli_kv"), "--id", "b"});
  RUN_EXPECT(0, {"export", store, "b", dir.file("b.out")});
  RUN_EXPECT(0, {"export", store, "a", dir.file("a.out")});
  CHECK(read_file(dir.file("b.out")) == b);
  CHECK(read_file(dir.file("a.out")) == a);
  Run r = RUN_EXPECT(0, {"verify", store});
  CHECK(contains(r.out, "ok: no problems found\n"));
  CHECK_FALSE(contains(r.out, "warning"));
}

TEST_CASE("cli: verify warns about chunks an older colikv shared without comparing values", "[cli]") {
  TempDir dir;
  const std::string store = dir.file("n.db");
  const colikv::ModelSignature m = colikv_test::tiny_model();
  write_file(dir.file("A.coli_kv"), coli_bytes(m, 5, 7));
  RUN_EXPECT(0, {"import", store, dir.file("A.coli_kv"), "--id", "a"});
  RUN_EXPECT(0, {"import", store, dir.file("A.coli_kv"), "--id", "b"});
  RUN_EXPECT(0, {"fork", store, "a", "a-fork"});
  // As a colikv of schema 4 left it: the one chunk stored under its chain
  // hash, without a digest, shared by a, its fork and the unrelated b.
  sql_exec(store,
           "UPDATE chunks SET hash = (SELECT chain_hash FROM chunk_meta k WHERE k.chunk_id = chunks.chunk_id); "
           "UPDATE chunk_meta SET digest = NULL");
  Run r = RUN_EXPECT(0, {"verify", store});
  CHECK(contains(r.out, "warning: chunk_id 1, positions [0, 5): shared by 'a', 'a-fork', 'b' (not forks of one another) "
                        "without comparing their values"));
  CHECK(contains(r.out, "ok: no problems found; 1 chunk shared without a content comparison"));
  const std::string j = RUN_EXPECT(0, {"verify", store, "--json"}).out;
  CHECK(valid_json(j));
  CHECK(contains(j, "  \"uncompared_shares\": [\n"
                    "    {\n"
                    "      \"chunk_id\": 1,\n"
                    "      \"first_pos\": 0,\n"
                    "      \"end_pos\": 5,\n"
                    "      \"conversations\": [\"a\", \"a-fork\", \"b\"]\n"
                    "    }\n"
                    "  ]\n"));
  // The names in a warning are store text: shown escaped.
  RUN_EXPECT(0, {"rename", store, "b", "b\x1b[2J"});
  r = RUN_EXPECT(0, {"verify", store});
  CHECK(contains(r.out, "'a-fork', 'b\\x1b[2J' (not forks"));
  CHECK_FALSE(contains(r.out, "\x1b"));
  // A fork alone is no finding: its values are its parent's by construction.
  RUN_EXPECT(0, {"rm", store, "b\x1b[2J"});
  r = RUN_EXPECT(0, {"verify", store});
  CHECK_FALSE(contains(r.out, "warning"));
}

TEST_CASE("cli: records past the header's count are ignored, and import says so", "[cli]") {
  TempDir dir;
  const std::string store = dir.file("s.colikv");
  const auto m = colikv_test::tiny_model();
  const int64_t rb = m.record_bytes();
  REQUIRE(rb == 292);

  // 10 records, the header counts 7, then 100 bytes of a torn append.
  const std::string f = coli_bytes(m, 10, 5, 7) + std::string(100, '\x5a');
  write_file(dir.file("past.coli_kv"), f);
  Run r = RUN_EXPECT(0, {"inspect", dir.file("past.coli_kv")});
  CHECK(contains(r.out, "header count    7 records\n"));
  CHECK(contains(r.out, "on disk         10 complete records, 100 trailing bytes\n"));
  CHECK(contains(r.out, "past the count  3 records (not content: import ignores them)\n"));
  r = RUN_EXPECT(0, {"inspect", dir.file("past.coli_kv"), "--json"});
  CHECK(contains(r.out, "  \"header_count\": 7,\n  \"record_bytes\": 292,\n  \"records_on_disk\": 10,\n"
                        "  \"records_past_count\": 3,\n  \"trailing_bytes\": 100,\n"));
  CHECK(contains(r.out, "  \"ok\": true,\n"));

  r = RUN_EXPECT(0, {"import", store, dir.file("past.coli_kv")});
  CHECK(contains(r.out, "tokens   7\n"));
  CHECK(contains(r.out, "ignored 3 records past the header's count of 7 (976 B after the counted records): "
                        "not content, not imported\n"));
  r = RUN_EXPECT(0, {"import", store, dir.file("past.coli_kv"), "--id", "again", "--json"});
  CHECK(contains(r.out, "  \"tokens\": 7,\n  \"raw_bytes\": 2044,\n  \"header_count\": 7,\n"
                        "  \"ignored_records\": 3,\n  \"ignored_bytes\": 976,\n  \"salvaged\": false\n"));
  RUN_EXPECT(0, {"export", store, "past", dir.file("past.out")});
  CHECK(read_file(dir.file("past.out")) == f.substr(0, static_cast<size_t>(40 + 7 * rb)));

  // Only a partial record after the counted ones.
  const std::string g = coli_bytes(m, 5, 6) + std::string(50, '\x01');
  write_file(dir.file("torn.coli_kv"), g);
  r = RUN_EXPECT(0, {"import", store, dir.file("torn.coli_kv")});
  CHECK(contains(r.out, "ignored 50 B after the counted records (less than one record): not imported\n"));
  RUN_EXPECT(0, {"export", store, "torn", dir.file("torn.out")});
  CHECK(read_file(dir.file("torn.out")) == g.substr(0, static_cast<size_t>(40 + 5 * rb)));

  // The engine truncated to 0: the header counts none, every record is past it.
  const std::string z = coli_bytes(m, 4, 7, 0);
  write_file(dir.file("zero.coli_kv"), z);
  r = RUN_EXPECT(0, {"import", store, dir.file("zero.coli_kv")});
  CHECK(contains(r.out, "tokens   0\n"));
  CHECK(contains(r.out, "ignored 4 records past the header's count of 0"));
  RUN_EXPECT(0, {"export", store, "zero", dir.file("zero.out")});
  CHECK(read_file(dir.file("zero.out")) == z.substr(0, 40));
}

TEST_CASE("cli: a header counting more records than present is refused unless --salvage", "[cli]") {
  TempDir dir;
  const std::string store = dir.file("s.colikv");
  const auto m = colikv_test::tiny_model();
  const int64_t rb = m.record_bytes();
  RUN_EXPECT(0, {"import", store, kSample, "--id", "keep", "--sync", "normal"});
  const std::string before = dump_store(store);

  const std::string f = coli_bytes(m, 6, 9, 10) + std::string(50, '\x07');
  const std::string file = dir.file("torn.coli_kv");
  write_file(file, f);
  Run r = RUN_EXPECT(1, {"import", store, file});
  require_error_line(r, "import");
  CHECK(contains(r.err, file));
  CHECK(contains(r.err, "header counts 10 records but only 6 complete records are present"));
  CHECK(contains(r.err, "salvage"));
  CHECK(dump_store(store) == before);

  r = RUN_EXPECT(0, {"import", store, file, "--salvage"});
  CHECK(contains(r.out, "tokens   6\n"));
  CHECK(contains(r.out, "salvaged: the header counts 10 records but only 6 complete ones are present; kept 6\n"));
  CHECK(contains(r.out, "ignored 50 B after the complete records (less than one record): not imported\n"));
  RUN_EXPECT(0, {"export", store, "torn", dir.file("torn.out")});
  CHECK(read_file(dir.file("torn.out")) == prefix_file(f, rb, 6));
  r = RUN_EXPECT(0, {"import", store, file, "--salvage", "--id", "j", "--json"});
  CHECK(contains(r.out, "  \"tokens\": 6,\n  \"raw_bytes\": 1752,\n  \"header_count\": 10,\n"
                        "  \"ignored_records\": 0,\n  \"ignored_bytes\": 50,\n  \"salvaged\": true\n"));
}

TEST_CASE("cli: bad input is refused with a message naming the problem, and the store is unchanged", "[cli]") {
  TempDir dir;
  const std::string store = dir.file("s.colikv");
  const auto tiny = colikv_test::tiny_model();
  const int64_t rb = tiny.record_bytes();
  const std::string keep = coli_bytes(tiny, 30, 1);
  write_file(dir.file("keep.coli_kv"), keep);
  RUN_EXPECT(0, {"import", store, dir.file("keep.coli_kv"), "--sync", "normal"});
  REQUIRE_FALSE(file_exists(store + "-wal"));  // checkpointed on close: the file is the whole store
  const std::string pristine = read_file(store);
  const std::string before = dump_store(store);
  REQUIRE(contains(before, "keep"));

  const std::string base = coli_bytes(tiny, 8, 2);
  auto with_field = [&](std::vector<std::pair<int, int32_t>> fields) {
    std::string b = base;
    for (const auto& f : fields) set_header_field(b, f.first, f.second);
    return b;
  };
  auto with_token = [&](int64_t pos, int32_t t) {
    std::string b = base;
    set_token(b, rb, pos, t);
    return b;
  };
  // Records of the indexed shape under the tiny shape's header.
  std::string other_shape = coli_bytes(colikv_test::tiny_indexed_model(), 8, 3);
  for (auto f : std::vector<std::pair<int, int32_t>>{{0, 3}, {3, 0}, {4, 0}}) set_header_field(other_shape, f.first, f.second);
  std::string wrong_magic = base;
  wrong_magic[6] = '2';
  const int32_t big = std::numeric_limits<int32_t>::max();

  struct Case {
    std::string name;
    std::string bytes;
    std::string phrase;  // what the message must say
  };
  const std::vector<Case> corpus = {
      {"empty", "", "the file is empty"},
      {"shorter than the magic", "COLI", "shorter than the 8-byte magic"},
      {"shorter than the header", base.substr(0, 20), "shorter than the 40-byte header"},
      {"one byte short of the header", base.substr(0, 39), "shorter than the 40-byte header"},
      {"wrong magic", wrong_magic, "wrong magic"},
      {"not a .coli_kv at all", std::string(4096, 'x'), "wrong magic"},
      {"n_layers zero", with_field({{0, 0}}), "n_layers must be positive"},
      {"n_layers negative", with_field({{0, -3}}), "n_layers must be positive"},
      {"kv_lora zero", with_field({{1, 0}}), "kv_lora must be positive"},
      {"kv_lora negative", with_field({{1, -16}}), "kv_lora must be positive"},
      {"qk_rope zero", with_field({{2, 0}}), "qk_rope must be positive"},
      {"qk_rope negative", with_field({{2, -1}}), "qk_rope must be positive"},
      {"vocab zero", with_field({{5, 0}}), "vocab must be positive"},
      {"vocab negative", with_field({{5, -1000}}), "vocab must be positive"},
      {"index_hd negative", with_field({{3, -8}, {4, 1}}), "index_hd must not be negative"},
      {"n_indexed negative", with_field({{3, 8}, {4, -1}}), "n_indexed must not be negative"},
      {"index_hd without indexed layers", with_field({{3, 8}, {4, 0}}), "n_indexed is 0 while index_hd is not"},
      {"indexed layers without index_hd", with_field({{3, 0}, {4, 2}}), "index_hd is 0 while n_indexed is not"},
      {"more indexed layers than layers", with_field({{3, 8}, {4, 4}}), "n_indexed exceeds n_layers"},
      {"record size over 1 GiB", with_field({{0, 1 << 20}, {1, 1 << 20}}), "over the 1 GiB limit"},
      {"sizes whose product overflows", with_field({{0, big}, {1, big}, {2, big}}), "over the 1 GiB limit"},
      {"overflowing sizes with a header count of 0", with_field({{0, big}, {1, big}, {2, big}, {6, 0}}),
       "over the 1 GiB limit"},
      {"indexer sizes whose product overflows", with_field({{0, big}, {1, big}, {2, big}, {3, big}, {4, big}}),
       "over the 1 GiB limit"},
      {"negative record count", with_field({{6, -1}}), "nrec is negative"},
      {"reserved field set", with_field({{7, 1}}), "reserved eighth field"},
      {"header count larger than the records", with_field({{6, 20}}),
       "header counts 20 records but only 8 complete records are present"},
      {"token id == vocab", with_token(3, 1000), "record 3: token id 1000 is outside [0, 1000)"},
      {"negative token id", with_token(0, -1), "record 0: token id -1 is outside [0, 1000)"},
      {"records of another shape", other_shape, "is outside [0, 1000) (records written under another shape's header?)"},
  };
  for (const auto& c : corpus) {
    INFO("case: " << c.name);
    write_file(store, pristine);  // a case that wrongly succeeds does not spoil the next ones
    const std::string file = dir.file("bad.coli_kv");
    write_file(file, c.bytes);
    Run r = tool({"import", store, file, "--id", "bad"});
    INFO(describe({"import", store, file, "--id", "bad"}, r));
    CHECK(r.code == 1);
    CHECK(r.out.empty());
    require_error_line(r, "import");
    CHECK(contains(r.err, file));
    CHECK(contains(r.err, c.phrase));
    CHECK(dump_store(store) == before);

    // inspect finds the same problem; exit 1.
    Run i = tool({"inspect", file});
    INFO(describe({"inspect", file}, i));
    CHECK(i.code == 1);
    CHECK(contains(i.out, c.phrase));
    require_error_line(i, "inspect");
    CHECK(contains(i.err, file + " is not a well-formed .coli_kv file"));
    Run ij = tool({"inspect", file, "--json"});
    CHECK(ij.code == 1);
    CHECK(valid_json(ij.out));
    CHECK(contains(ij.out, "\"ok\": false"));
  }

  write_file(store, pristine);

  // An id that exists already: refused, the conversation named.
  Run r = RUN_EXPECT(1, {"import", store, dir.file("keep.coli_kv")});
  require_error_line(r, "import");
  CHECK(contains(r.err, "'keep'"));
  CHECK(contains(r.err, "exists already"));
  CHECK(dump_store(store) == before);
  r = RUN_EXPECT(1, {"import", store, kSample, "--id", "keep"});
  CHECK(contains(r.err, "exists already"));
  CHECK(dump_store(store) == before);

  // A file that does not exist.
  r = RUN_EXPECT(1, {"import", store, dir.file("missing.coli_kv")});
  require_error_line(r, "import");
  CHECK(contains(r.err, dir.file("missing.coli_kv")));
  CHECK(contains(r.err, "No such file"));
  CHECK(dump_store(store) == before);

  // A refused file does not leave a new store behind.
  write_file(dir.file("bad.coli_kv"), wrong_magic);
  r = RUN_EXPECT(1, {"import", dir.file("new.colikv"), dir.file("bad.coli_kv")});
  CHECK(contains(r.err, "wrong magic"));
  CHECK_FALSE(file_exists(dir.file("new.colikv")));
  CHECK_FALSE(file_exists(dir.file("new.colikv-wal")));
  CHECK_FALSE(file_exists(dir.file("new.colikv-shm")));

  // Empty paths are named as such, before anything is written (the old tool
  // exported the whole file to a temporary one, then failed to rename it).
  r = RUN_EXPECT(2, {"import", "", dir.file("keep.coli_kv")});
  CHECK(contains(r.err, "STORE is empty"));
  r = RUN_EXPECT(1, {"import", store, ""});
  CHECK(contains(r.err, "the .coli_kv file's path is empty"));
  r = RUN_EXPECT(1, {"export", store, "keep", ""});
  CHECK(contains(r.err, "'keep': export: the output path is empty"));
  r = RUN_EXPECT(1, {"ls", ""});
  CHECK(contains(r.err, "colikv: ls: store path is empty"));
  CHECK(dump_store(store) == before);

  // A store in a directory that does not exist.
  r = RUN_EXPECT(1, {"import", dir.file("no/such/dir/s.colikv"), dir.file("keep.coli_kv")});
  require_error_line(r, "import");
  CHECK(contains(r.err, dir.file("no/such/dir/s.colikv")));
}

TEST_CASE("cli: a read-only or full store is refused and unchanged", "[cli]") {
  TempDir dir;
  const std::string store = dir.file("s.colikv");
  const auto tiny = colikv_test::tiny_model();
  write_file(dir.file("keep.coli_kv"), coli_bytes(tiny, 30, 1));
  write_file(dir.file("big.coli_kv"), coli_bytes(tiny, 3000, 2));
  RUN_EXPECT(0, {"import", store, dir.file("keep.coli_kv")});
  const std::string before = dump_store(store);

  SECTION("read-only") {
    // A store file nobody may write, in a directory the tool may write (SQLite
    // creates the -shm file there even to read). Root ignores file modes, so
    // as root the tool runs without the capabilities that let it.
    REQUIRE(chmod(store.c_str(), 0444) == 0);
    RunOptions ro;
    ro.bound_by_file_modes = geteuid() == 0;
    Run probe = tool({"ls", store}, ro);
    INFO(describe({"ls", store}, probe));
    REQUIRE(probe.code == 0);  // 126: root's capabilities could not be dropped
    CHECK(contains(probe.out, "keep"));
    const std::vector<std::vector<std::string>> writes = {
        {"import", store, dir.file("big.coli_kv")}, {"rm", store, "keep"},          {"rename", store, "keep", "k2"},
        {"fork", store, "keep", "k2"},              {"truncate", store, "keep", "3"},
    };
    for (const auto& w : writes) {
      Run r = tool(w, ro);
      INFO(describe(w, r));
      CHECK(r.code == 1);
      require_error_line(r, w[0]);
      CHECK((contains_ci(r.err, "read-only") || contains_ci(r.err, "readonly")));
      CHECK(contains(r.err, store));
    }
    chmod(store.c_str(), 0644);
    CHECK(dump_store(store) == before);
  }

  SECTION("full") {
    // The tool may not write files larger than 256 KiB: the import of ~850 KiB
    // of records fails in the middle of its transaction.
    RunOptions ro;
    ro.file_size_limit = 256 << 10;
    Run r = tool({"import", store, dir.file("big.coli_kv"), "--id", "big"}, ro);
    INFO(describe({"import", store, "big.coli_kv"}, r));
    CHECK(r.code == 1);
    require_error_line(r, "import");
    CHECK((contains_ci(r.err, "full") || contains_ci(r.err, "I/O")));
    // The limit is named: SQLite says only "disk I/O error".
    CHECK(contains(r.err, "; this process may write files of at most 262144 B (256.0 KiB) (ulimit -f)"));
    CHECK(dump_store(store) == before);
    // Without the limit it goes in.
    RUN_EXPECT(0, {"import", store, dir.file("big.coli_kv"), "--id", "big"});
  }
}

TEST_CASE("cli: ls, info, rm, rename, fork, truncate, verify and stats", "[cli]") {
  TempDir dir;
  const std::string store = dir.file("s.colikv");
  const std::string out = dir.file("out.coli_kv");

  // Only import creates a store; every other command fails on a missing one.
  const std::vector<std::vector<std::string>> on_missing = {
      {"ls", store},          {"info", store, "a"},         {"verify", store},          {"stats", store},
      {"export", store, "a", out}, {"rm", store, "a"}, {"rename", store, "a", "b"}, {"fork", store, "a", "b"},
      {"truncate", store, "a", "1"},
  };
  for (const auto& args : on_missing) {
    Run r = tool(args);
    INFO(describe(args, r));
    CHECK(r.code == 1);
    require_error_line(r, args[0]);
    CHECK(contains(r.err, store));
    CHECK(contains(r.err, "no such file"));
  }
  CHECK_FALSE(file_exists(store));
  CHECK_FALSE(file_exists(out));

  // A file that is not a store.
  write_file(dir.file("junk"), std::string(8192, 'j'));
  Run r = RUN_EXPECT(1, {"ls", dir.file("junk")});
  require_error_line(r, "ls");
  CHECK(contains(r.err, dir.file("junk")));
  CHECK(read_file(dir.file("junk")) == std::string(8192, 'j'));

  const auto tiny = colikv_test::tiny_model();
  const int64_t rb = tiny.record_bytes();
  const std::string f = coli_bytes(tiny, 3000, 21);
  write_file(dir.file("long.coli_kv"), f);
  RUN_EXPECT(0, {"import", store, dir.file("long.coli_kv"), "--sync", "normal"});

  r = RUN_EXPECT(0, {"ls", store});
  CHECK(r.out.rfind("ID    TOKENS  ", 0) == 0);
  CHECK(contains(r.out, "LAST USED (UTC)"));
  CHECK(std::regex_search(r.out, std::regex(R"(\nlong    3000  876000 B \(855\.5 KiB\)  +\d+ B \([0-9.]+ KiB\)  +\d\.\d{3}  \d{4}-\d\d-\d\d \d\d:\d\d:\d\d  -       n_layers=3 kv_lora=16 qk_rope=8 index_hd=0 n_indexed=0 vocab=1000\n)")));
  r = RUN_EXPECT(0, {"info", store, "long"});
  CHECK(contains(r.out, "id           long\n"));
  CHECK(contains(r.out, "tokens       3000\n"));
  CHECK(contains(r.out, "record size  292 B\n"));
  CHECK(contains(r.out, "raw size     876000 B (855.5 KiB)\n"));
  CHECK(contains(r.out, "forked from  -\n"));
  CHECK(std::regex_search(r.out, std::regex(R"(\ncreated      \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\n)")));

  // fork
  r = RUN_EXPECT(0, {"fork", store, "long", "half", "--at", "1500"});
  CHECK(r.out == "forked 'long' into 'half' at 1500 tokens\n");
  RUN_EXPECT(0, {"export", store, "half", out});
  CHECK(read_file(out) == prefix_file(f, rb, 1500));
  r = RUN_EXPECT(0, {"fork", store, "long", "whole", "--sync", "full"});
  CHECK(r.out == "forked 'long' into 'whole' at 3000 tokens\n");
  RUN_EXPECT(0, {"export", store, "whole", out, "--force"});
  CHECK(read_file(out) == f);
  r = RUN_EXPECT(0, {"info", store, "half"});
  CHECK(contains(r.out, "forked from  long at 1500 tokens\n"));

  std::string snapshot = dump_store(store);
  struct Failing {
    std::vector<std::string> args;
    std::string phrase;
    std::string named;  // the conversation the message names
  };
  const std::vector<Failing> failing = {
      {{"fork", store, "long", "x", "--at", "3001"}, "cannot fork 3001 tokens", "'long'"},
      {{"fork", store, "long", "half"}, "exists already", "'half'"},
      {{"fork", store, "nope", "x"}, "no such conversation", "'nope'"},
      {{"truncate", store, "long", "3001"}, "cannot truncate to 3001 tokens", "'long'"},
      {{"truncate", store, "nope", "1"}, "no such conversation", "'nope'"},
      {{"rename", store, "half", "long"}, "the id is taken", "'long'"},
      {{"rename", store, "nope", "x"}, "no such conversation", "'nope'"},
      {{"rm", store, "nope"}, "no such conversation", "'nope'"},
      {{"info", store, "nope"}, "no such conversation", "'nope'"},
      {{"verify", store, "nope"}, "no such conversation", "'nope'"},
      {{"export", store, "nope", out, "--force"}, "no such conversation", "'nope'"},
  };
  for (const auto& c : failing) {
    Run fr = tool(c.args);
    INFO(describe(c.args, fr));
    CHECK(fr.code == 1);
    CHECK(fr.out.empty());
    require_error_line(fr, c.args[0]);
    CHECK(contains(fr.err, c.phrase));
    CHECK(contains(fr.err, c.named));
    CHECK(contains(fr.err, store));
    CHECK(dump_store(store) == snapshot);
  }
  CHECK(read_file(out) == f);

  // truncate
  r = RUN_EXPECT(0, {"truncate", store, "long", "1000"});
  CHECK(r.out == "truncated 'long' from 3000 to 1000 tokens\n");
  RUN_EXPECT(0, {"export", store, "long", out, "--force"});
  CHECK(read_file(out) == prefix_file(f, rb, 1000));
  r = RUN_EXPECT(0, {"truncate", store, "long", "1000", "--sync", "normal"});
  CHECK(r.out == "truncated 'long' from 1000 to 1000 tokens\n");

  // rename
  r = RUN_EXPECT(0, {"rename", store, "half", "mid"});
  CHECK(r.out == "renamed 'half' to 'mid'\n");
  r = RUN_EXPECT(0, {"ls", store, "--json"});
  CHECK(contains(r.out, "\"id\": \"mid\""));
  CHECK_FALSE(contains(r.out, "\"id\": \"half\""));
  RUN_EXPECT(0, {"export", store, "mid", out, "--force"});
  CHECK(read_file(out) == prefix_file(f, rb, 1500));

  // rm
  r = RUN_EXPECT(0, {"rm", store, "whole"});
  CHECK(r.out == "removed 'whole' (3000 tokens)\n");
  r = RUN_EXPECT(1, {"rm", store, "whole"});
  CHECK(contains(r.err, "no such conversation"));

  // stats
  r = RUN_EXPECT(0, {"stats", store});
  CHECK(r.out.rfind("model n_layers=3 kv_lora=16 qk_rope=8 index_hd=0 n_indexed=0 vocab=1000 (1024 tokens per chunk)\n", 0) == 0);
  CHECK(contains(r.out, "\n  conversations         2\n"));
  CHECK(contains(r.out, "\n  tokens                2500\n"));
  CHECK(contains(r.out, "\n  logical bytes         730000 B (712.9 KiB)\n"));
  CHECK(contains(r.out, "\ntotal\n"));
  CHECK(contains(r.out, "saved by sharing"));
  CHECK(contains(r.out, "saved by compression"));
  CHECK(std::regex_search(r.out, std::regex(R"(\nfile size  \d+ B \([0-9.]+ [KM]iB\)\n$)")));

  // Read-only commands change nothing, not even the last-used times.
  snapshot = dump_store(store);
  for (const auto& args : std::vector<std::vector<std::string>>{{"ls", store},
                                                                {"ls", store, "--json", "--limit", "1"},
                                                                {"info", store, "mid"},
                                                                {"info", store, "long", "--json"},
                                                                {"verify", store},
                                                                {"verify", store, "mid", "--json"},
                                                                {"stats", store},
                                                                {"stats", store, "--json"},
                                                                {"export", store, "mid", out, "--force"}}) {
    Run rr = tool(args);
    INFO(describe(args, rr));
    CHECK(rr.code == 0);
  }
  CHECK(dump_store(store) == snapshot);
  r = RUN_EXPECT(0, {"ls", store, "--limit", "1"});
  CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 2);

  // A corrupt chunk: verify names the conversation, chunk and positions; exit 1.
  // long's only chunk [0, 1000) was re-encoded by the truncate: mid does not share it.
  sql_exec(store,
           "UPDATE chunks SET checksum = (checksum + 1) % 4294967296 WHERE chunk_id = "
           "(SELECT chunk_id FROM conversation_chunks JOIN conversations USING (conversation_id) "
           "WHERE name = 'long' AND seq = 0)");
  r = RUN_EXPECT(1, {"verify", store});
  require_error_line(r, "verify");
  CHECK(contains(r.err, store));
  CHECK(contains(r.err, "1 problem found"));
  CHECK(std::regex_search(r.out, std::regex(R"(\nproblem: conversation 'long', chunk 0 \(chunk_id \d+\), positions \[0, 1000\): .+\n)")));
  CHECK_FALSE(contains(r.out, "ok: no problems found"));
  r = RUN_EXPECT(1, {"verify", store, "--json"});
  CHECK(valid_json(r.out));
  CHECK(contains(r.out, "  \"ok\": false,\n"));
  CHECK(std::regex_search(r.out, std::regex(R"(\{\n      "conversation": "long",\n      "chunk_seq": 0,\n      "chunk_id": \d+,\n      "first_pos": 0,\n      "end_pos": 1000,\n      "what": ".+"\n    \})")));
  RUN_EXPECT(0, {"verify", store, "mid"});
  RUN_EXPECT(1, {"verify", store, "long"});
  r = RUN_EXPECT(1, {"export", store, "long", dir.file("corrupt.coli_kv")});
  require_error_line(r, "export");
  CHECK(contains(r.err, "long"));
  CHECK(contains_ci(r.err, "checksum"));
  CHECK_FALSE(file_exists(dir.file("corrupt.coli_kv")));

  // An empty store.
  RUN_EXPECT(0, {"rm", store, "long"});
  RUN_EXPECT(0, {"rm", store, "mid"});
  r = RUN_EXPECT(0, {"ls", store});
  CHECK(r.out == "no conversations in " + store + "\n");
  r = RUN_EXPECT(0, {"ls", store, "--json"});
  CHECK(r.out == "{\n  \"store\": \"" + store + "\",\n  \"conversations\": []\n}\n");
  r = RUN_EXPECT(0, {"verify", store});
  CHECK(contains(r.out, "checked 0 conversations, 0 chunks"));
}

TEST_CASE("cli: a person at the sqlite3 shell reads a store made by the tool", "[cli]") {
  if (*kSqlite3 == '\0') FAIL("no sqlite3 shell was found when configuring (Debian package sqlite3): install it and reconfigure");
  TempDir dir;
  const std::string store = dir.file("s.colikv");
  const auto tiny = colikv_test::tiny_model();
  const auto indexed = colikv_test::tiny_indexed_model();
  const std::string f_long = coli_bytes(tiny, 3000, 31);
  const std::string f_idx = coli_bytes(indexed, 100, 32);
  write_file(dir.file("long.coli_kv"), f_long);
  write_file(dir.file("indexed.coli_kv"), f_idx);
  RUN_EXPECT(0, {"import", store, dir.file("long.coli_kv"), "--sync", "normal"});
  RUN_EXPECT(0, {"import", store, dir.file("indexed.coli_kv"), "--sync", "normal"});
  RUN_EXPECT(0, {"fork", store, "long", "long-fork", "--at", "1500"});

  auto sql = [&](const std::string& query) {
    Run r = run_program(kSqlite3, {store, query});
    INFO(describe({"sqlite3", store, query}, r));
    REQUIRE(r.code == 0);
    REQUIRE(r.err.empty());
    return r.out;
  };
  const std::string sig_tiny = "n_layers=3 kv_lora=16 qk_rope=8 index_hd=0 n_indexed=0 vocab=1000";
  const std::string sig_idx = "n_layers=4 kv_lora=16 qk_rope=8 index_hd=8 n_indexed=2 vocab=1000";
  const int64_t rb_tiny = 4 + 4 * (3 * 24);
  const int64_t rb_idx = 4 + 4 * (4 * 24 + 2 * 8);
  auto tokens_of = [](const std::string& file, int64_t rb, int64_t from, int64_t to, const char* sep) {
    std::string s;
    for (int64_t p = from; p < to; ++p) s += (p > from ? sep : "") + std::to_string(token_at(file, rb, p));
    return s;
  };

  // Conversations with model, tokens and sizes.
  std::string o = sql("SELECT conversation, model, tokens, raw_bytes FROM conversation_summary ORDER BY conversation;");
  CHECK(o == "indexed|" + sig_idx + "|100|" + std::to_string(100 * rb_idx) + "\n" +
                 "long|" + sig_tiny + "|3000|" + std::to_string(3000 * rb_tiny) + "\n" +
                 "long-fork|" + sig_tiny + "|1500|" + std::to_string(1500 * rb_tiny) + "\n");
  // stored_bytes agrees with the tool's; ratio is raw / stored.
  for (const std::string id : {"indexed", "long", "long-fork"}) {
    Run info = RUN_EXPECT(0, {"info", store, id, "--json"});
    const std::string row = sql("SELECT stored_bytes, ratio FROM conversation_summary WHERE conversation = '" + id + "';");
    const int64_t stored = json_int(info.out, "stored_bytes");
    CHECK(row.rfind(std::to_string(stored) + "|", 0) == 0);
    CHECK(std::stod(row.substr(row.find('|') + 1)) ==
          Approx(static_cast<double>(json_int(info.out, "raw_bytes")) / static_cast<double>(stored)).margin(0.0006));
  }
  o = sql("SELECT conversation, forked_from FROM conversation_summary WHERE forked_from IS NOT NULL;");
  CHECK(o == "long-fork|long\n");
  o = sql("SELECT created, updated, last_used FROM conversation_summary WHERE conversation = 'long';");
  CHECK(std::regex_match(o, std::regex(R"((\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}\|){2}\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}\n)")));

  // A conversation's token ids, in order.
  o = sql("SELECT token FROM conversation_tokens WHERE conversation = 'long' ORDER BY position LIMIT 5;");
  CHECK(o == tokens_of(f_long, rb_tiny, 0, 5, "\n") + "\n");
  o = sql("SELECT group_concat(token, ',') FROM (SELECT token FROM conversation_tokens "
          "WHERE conversation = 'long-fork' ORDER BY position);");
  CHECK(o == tokens_of(f_long, rb_tiny, 0, 1500, ",") + "\n");
  o = sql("SELECT count(*), min(position), max(position) FROM conversation_tokens WHERE conversation = 'indexed';");
  CHECK(o == "100|0|99\n");
  o = sql("SELECT position, token FROM conversation_tokens WHERE conversation = 'long' AND position BETWEEN 1023 AND 1025 "
          "ORDER BY position;");
  CHECK(o == "1023|" + std::to_string(token_at(f_long, rb_tiny, 1023)) + "\n1024|" +
                 std::to_string(token_at(f_long, rb_tiny, 1024)) + "\n1025|" +
                 std::to_string(token_at(f_long, rb_tiny, 1025)) + "\n");

  // Per-model totals. The fork shares long's first full chunk: 3 + 1 chunks.
  o = sql("SELECT model, chunk_tokens, conversations, tokens, raw_bytes, chunks FROM model_summary ORDER BY model;");
  CHECK(o == sig_tiny + "|1024|2|4500|" + std::to_string(4500 * rb_tiny) + "|4\n" +
                 sig_idx + "|1024|1|100|" + std::to_string(100 * rb_idx) + "|1\n");
  o = sql("SELECT * FROM model_summary WHERE model LIKE '%index_hd=8%';");
  Run info = RUN_EXPECT(0, {"info", store, "indexed", "--json"});
  CHECK(o == sig_idx + "|1024|1|100|" + std::to_string(100 * rb_idx) + "|1|" +
                 std::to_string(json_int(info.out, "stored_bytes")) + "\n");

  // The tables themselves have self-explaining names.
  o = sql("SELECT name, token_count, title FROM conversations ORDER BY name;");
  CHECK(o == "indexed|100|\nlong|3000|\nlong-fork|1500|\n");
  o = sql("SELECT c.name, count(*) FROM conversations c JOIN conversation_chunks USING (conversation_id) "
          "GROUP BY c.name ORDER BY c.name;");
  CHECK(o == "indexed|1\nlong|3\nlong-fork|2\n");
  o = sql("SELECT first_pos, n_tokens FROM chunks JOIN conversation_chunks USING (chunk_id) "
          "JOIN conversations USING (conversation_id) WHERE name = 'long-fork' ORDER BY seq;");
  CHECK(o == "0|1024\n1024|476\n");

  // The shell did not disturb the store.
  RUN_EXPECT(0, {"verify", store});
}
