// The colikv tool's match, gc and vacuum commands, and how ls, info and
// export show evicted conversations. The tool runs as a separate process.
#include <sys/wait.h>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>
#include <vector>

#include "colikv/coli_kv.h"
#include "colikv/store.h"
#include "test_support.h"

using colikv::ModelSignature;
using colikv::Options;
using colikv::Store;
using colikv_test::EngineBuffers;
using colikv_test::TempDir;

namespace {

struct ToolRun {
  int code = -1;
  std::string out, err;
};

// Runs the tool with arguments (no shell metacharacters in them).
ToolRun tool(const TempDir& dir, const std::vector<std::string>& args) {
  std::string cmd = std::string("'") + COLIKV_TOOL_PATH + "'";
  for (const auto& a : args) cmd += " '" + a + "'";
  cmd += " >'" + dir.file("out.txt") + "' 2>'" + dir.file("err.txt") + "' </dev/null";
  const int status = std::system(cmd.c_str());
  ToolRun r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  r.out = colikv_test::read_file(dir.file("out.txt"));
  r.err = colikv_test::read_file(dir.file("err.txt"));
  return r;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::vector<int32_t> ids(int32_t from, int n) { return colikv_test::token_run(from, n); }

// A store with "a" (tokens 100..109) and "b" (100..105 then 300..303), 4 tokens a chunk.
std::string make_store(const TempDir& dir) {
  const ModelSignature m = colikv_test::tiny_model();
  Options o;
  o.chunk_target_bytes = 4 * m.record_bytes();
  const std::string path = dir.file("s.colikv");
  Store s(path, o);
  EngineBuffers b(m, 16);
  b.fill(0, 16, 3);
  auto a = ids(100, 10);
  s.append("a", m, a.data(), 10, b.source());
  auto bt = ids(100, 6);
  for (int32_t t : ids(300, 4)) bt.push_back(t);
  s.append("b", m, bt.data(), 10, b.source());
  return path;
}

}  // namespace

TEST_CASE("cli match: the longest prefix, as text, as JSON and from a .coli_kv file", "[match][cli]") {
  TempDir dir;
  const std::string store = make_store(dir);
  colikv_test::write_file(dir.file("p.txt"), "100 101 102 103\n104 105\t300 301 9\n");
  ToolRun r = tool(dir, {"match", store, "--model-of", "a", "--tokens", dir.file("p.txt")});
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(r.out == "'b' holds the first 8 of the 9 prompt tokens\n");
  r = tool(dir, {"match", store, "--model-of", "a", "--tokens", dir.file("p.txt"), "--json"});
  CHECK(r.code == 0);
  CHECK(has(r.out, "\"id\": \"b\""));
  CHECK(has(r.out, "\"prompt_tokens\": 9"));
  CHECK(has(r.out, "\"tokens\": 8"));
  CHECK(has(r.out, "\"loadable\": 8"));
  CHECK(has(r.out, "\"evicted\": false"));

  {
    Store s(store);
    colikv::export_coli_kv(s, "a", dir.file("a.coli_kv"));
  }
  r = tool(dir, {"match", store, "--model-of", "b", "--tokens", dir.file("a.coli_kv")});
  CHECK(r.code == 0);
  CHECK(r.out == "'a' holds the first 10 of the 10 prompt tokens\n");

  colikv_test::write_file(dir.file("none.txt"), "7 8 9");
  r = tool(dir, {"match", store, "--model-of", "a", "--tokens", dir.file("none.txt"), "--json"});
  CHECK(r.code == 0);
  CHECK(has(r.out, "\"id\": null"));
  CHECK(has(r.out, "\"tokens\": 0"));
}

TEST_CASE("cli match: bad input is refused with a message", "[match][cli]") {
  TempDir dir;
  const std::string store = make_store(dir);
  colikv_test::write_file(dir.file("bad.txt"), "100 1x1 3");
  ToolRun r = tool(dir, {"match", store, "--model-of", "a", "--tokens", dir.file("bad.txt")});
  CHECK(r.code == 1);
  CHECK(has(r.err, "'1x1' (token 1) is not a token id"));
  colikv_test::write_file(dir.file("p.txt"), "100");
  r = tool(dir, {"match", store, "--tokens", dir.file("p.txt")});
  CHECK(r.code == 2);
  CHECK(has(r.err, "--model-of"));
  r = tool(dir, {"match", store, "--model-of", "nobody", "--tokens", dir.file("p.txt")});
  CHECK(r.code == 1);
  CHECK(has(r.err, "nobody"));
  r = tool(dir, {"match", store, "--model-of", "a", "--tokens", dir.file("missing.txt")});
  CHECK(r.code == 1);
  CHECK(has(r.err, "missing.txt"));
}

TEST_CASE("cli gc and vacuum, ls, info, match and export show evicted conversations", "[eviction][cli]") {
  TempDir dir;
  const std::string store = make_store(dir);
  ToolRun r = tool(dir, {"gc", store, "--max-bytes", "-1"});
  CHECK(r.code == 2);
  r = tool(dir, {"gc", store});
  CHECK(r.code == 2);
  CHECK(has(r.err, "--max-bytes"));
  r = tool(dir, {"gc", store, "--max-bytes", "1000000000"});
  CHECK(r.code == 0);
  CHECK(has(r.out, "evicted 0 chunks of 0 conversations"));
  r = tool(dir, {"gc", store, "--max-bytes", "0", "--json"});
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(has(r.out, "\"stored_bytes_after\": 0"));
  CHECK(has(r.out, "\"fits\": true"));
  CHECK(has(r.out, "\"a\""));
  CHECK(has(r.out, "\"b\""));

  r = tool(dir, {"ls", store});
  CHECK(r.code == 0);
  CHECK(has(r.out, "(evicted)"));
  r = tool(dir, {"info", store, "a", "--json"});
  CHECK(has(r.out, "\"evicted\": true"));
  r = tool(dir, {"info", store, "a"});
  CHECK(has(r.out, "evicted"));

  colikv_test::write_file(dir.file("p.txt"), "100 101 102 103 104 105 106");
  r = tool(dir, {"match", store, "--model-of", "a", "--tokens", dir.file("p.txt")});
  CHECK(r.code == 0);
  CHECK(has(r.out, "'a' holds the first 7 of the 7 prompt tokens; its KV data was evicted from position 0 on"));

  r = tool(dir, {"export", store, "a", dir.file("a.coli_kv")});
  CHECK(r.code == 1);
  CHECK(has(r.err, "evicted"));

  r = tool(dir, {"vacuum", store, "--json"});
  CHECK(r.code == 0);
  CHECK(has(r.out, "\"file_bytes_after\""));
  r = tool(dir, {"vacuum", store});
  CHECK(r.code == 0);
  CHECK(has(r.out, "file size"));
  Store s(store);
  CHECK(s.conversation_count() == 2);
  CHECK(s.verify().ok());
}
