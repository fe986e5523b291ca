// read_coli_kv (colikv/coli_kv.h): a .coli_kv file's records into the
// caller's buffers, without a store. The engine-written sample reads as its
// import loads; an indexed file lands on the layers the caller's Ic names;
// limit, max_tokens and the model are honoured; hostile files are refused
// naming the file before a byte reaches the buffers; a file cut while it is
// read is kIO and one grown meanwhile is read as it was. The cut and the
// growth happen in the progress callback, between two blocks: no timing.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "colikv/coli_kv.h"
#include "colikv/error.h"
#include "colikv/store.h"
#include "test_support.h"

using colikv::Error;
using colikv::ErrorCode;
using colikv::ModelSignature;
using colikv_test::EngineBuffers;
using colikv_test::TempDir;

namespace {

const std::string kSample = std::string(COLIKV_SAMPLE_DIR) + "/glm_tiny_nodsa_51.coli_kv";

std::string header(std::vector<int32_t> h) {
  std::string out("COLIKV1\0", 8);
  out.append(reinterpret_cast<const char*>(h.data()), h.size() * 4);
  return out;
}

// What read_coli_kv throws for the file, as "code message"; "" when it reads.
std::string refusal(const std::string& path, const ModelSignature& m, EngineBuffers& b, int64_t max_tokens,
                    int64_t limit = -1) {
  colikv::ReadColiKvOptions o;
  o.limit = limit;
  try {
    colikv::read_coli_kv(path, m, b.tokens.data(), max_tokens, b.target(), o);
  } catch (const Error& e) {
    return std::to_string(static_cast<int>(e.code())) + " " + e.what();
  }
  return "";
}

std::string code(ErrorCode c) { return std::to_string(static_cast<int>(c)) + " "; }

}  // namespace

TEST_CASE("coli_kv read: the engine's sample reads as its import loads", "[coli_kv_read]") {
  const ModelSignature m = colikv_test::sample_model();
  EngineBuffers got(m, 60);
  got.poison();
  CHECK(colikv::read_coli_kv(kSample, m, got.tokens.data(), got.capacity, got.target()) == 51);
  CHECK(colikv_test::untouched_from(got, 51) == "");
  CHECK(std::vector<int32_t>(got.tokens.begin(), got.tokens.begin() + 4) == std::vector<int32_t>{257, 258, 259, 112});

  TempDir dir;
  colikv::Store s(dir.file("s.db"));
  colikv::ImportOptions io;
  io.id = "sample";
  colikv::import_coli_kv(s, kSample, io);
  EngineBuffers loaded(m, 60);
  REQUIRE(s.load("sample", m, loaded.tokens.data(), loaded.capacity, loaded.target()) == 51);
  CHECK(got.compare(loaded, 51) == "");

  // weights_id is the caller's business: a file has none to compare.
  ModelSignature named = m;
  named.weights_id = "wsample";
  EngineBuffers again(named, 51);
  CHECK(colikv::read_coli_kv(kSample, named, again.tokens.data(), 51, again.target()) == 51);
  CHECK(again.compare(loaded, 51) == "");
}

TEST_CASE("coli_kv read: indexer planes go to the layers Ic names, and limit reads a prefix", "[coli_kv_read]") {
  const ModelSignature m = colikv_test::tiny_indexed_model();  // the indexer on the last two of four layers
  TempDir dir;
  const std::string f = dir.file("ix.coli_kv");
  EngineBuffers src(m, 40);
  src.tokens = colikv_test::make_tokens(40, m.vocab, 3);
  src.fill(0, 40, 9);
  colikv_test::write_coli_kv(f, src, 40);

  EngineBuffers all(m, 48);
  all.poison();
  CHECK(colikv::read_coli_kv(f, m, all.tokens.data(), all.capacity, all.target()) == 40);
  CHECK(all.compare(src, 40) == "");
  CHECK(colikv_test::untouched_from(all, 40) == "");

  EngineBuffers part(m, 48);
  part.poison();
  colikv::ReadColiKvOptions o;
  o.limit = 13;
  CHECK(colikv::read_coli_kv(f, m, part.tokens.data(), 13, part.target(), o) == 13);
  CHECK(part.compare(src, 13) == "");
  CHECK(colikv_test::untouched_from(part, 13) == "");
  o.limit = 100;  // a limit past the count reads the count
  CHECK(colikv::read_coli_kv(f, m, part.tokens.data(), part.capacity, part.target(), o) == 40);
  o.limit = 0;
  CHECK(colikv::read_coli_kv(f, m, nullptr, 0, colikv::KvTarget(), o) == 0);
}

TEST_CASE("coli_kv read: the caller's maximum, model and buffers are checked before a byte is written",
          "[coli_kv_read]") {
  const ModelSignature m = colikv_test::sample_model();
  EngineBuffers b(m, 60);
  b.poison();
  std::string r = refusal(kSample, m, b, 50);
  CHECK(r.rfind(code(ErrorCode::kTooLarge) + kSample + ": 51 records do not fit the caller's maximum of 50", 0) == 0);
  CHECK(refusal(kSample, m, b, 10, 10) == "");  // a limit within the maximum
  b.poison();

  ModelSignature other = m;
  other.kv_lora = 16;
  r = refusal(kSample, other, b, 60);
  INFO(r);
  CHECK(r.rfind(code(ErrorCode::kModelMismatch) + kSample + ": the file's model is n_layers=5 kv_lora=32", 0) == 0);
  CHECK(r.find("not the caller's n_layers=5 kv_lora=16") != std::string::npos);

  std::vector<float*> lc(static_cast<size_t>(m.n_layers), nullptr);
  colikv::KvTarget no_lc = b.target();
  no_lc.Lc = lc.data();
  CHECK(colikv_test::error_code_of([&] { colikv::read_coli_kv(kSample, m, b.tokens.data(), 60, no_lc); }) ==
        ErrorCode::kInvalidArgument);
  CHECK(colikv_test::error_code_of([&] { colikv::read_coli_kv(kSample, m, nullptr, 60, b.target()); }) ==
        ErrorCode::kInvalidArgument);
  CHECK(colikv_test::untouched_from(b, 0) == "");
}

TEST_CASE("coli_kv read: hostile files are refused naming the file, the buffers untouched", "[coli_kv_read]") {
  const ModelSignature m = colikv_test::tiny_model();
  TempDir dir;
  const std::string one_record = std::string(4 + 4 * 3 * 24, '\0');  // token 0 of the tiny model
  struct Case {
    std::string what, bytes, problem;
    ErrorCode code = ErrorCode::kInvalidArgument;
  };
  const std::vector<Case> cases = {
      {"empty", "", "the file is empty"},
      {"short magic", "COLI", "the file is 4 bytes, shorter than the 8-byte magic"},
      {"bad magic", std::string("COLIKV2\0", 8) + std::string(32, '\0') + one_record, "wrong magic"},
      {"short header", header({3, 16, 8, 0}), "the file is 24 bytes, shorter than the 40-byte header"},
      {"count beyond the file", header({3, 16, 8, 0, 0, 1000, 3, 0}) + one_record + one_record.substr(0, 9),
       "header counts 3 records but only 1 complete records are present"},
      {"count 2^31-1 over one record", header({3, 16, 8, 0, 0, 1000, 0x7fffffff, 0}) + one_record,
       "header counts 2147483647 records but only 1 complete records are present"},
      {"negative count", header({3, 16, 8, 0, 0, 1000, -5, 0}) + one_record, "record count nrec is negative"},
      {"bad shape", header({3, -16, 8, 0, 0, 1000, 1, 0}) + one_record, "header: "},
      {"token out of range", header({3, 16, 8, 0, 0, 1000, 1, 0}) + std::string("\xe8\x03\0\0", 4) +
                                 one_record.substr(4),
       "record 0: token id 1000 is outside [0, 1000)"},
  };
  for (const Case& c : cases) {
    const std::string f = dir.file("hostile.coli_kv");
    colikv_test::write_file(f, c.bytes);
    EngineBuffers b(m, 4);
    b.poison();
    const std::string r = refusal(f, m, b, 4);
    INFO(c.what << ": " << r);
    CHECK(r.rfind(code(c.code) + f + ": ", 0) == 0);
    CHECK(r.find(c.problem) != std::string::npos);
    // A token out of range is found while reading; every other problem before it.
    if (c.what != "token out of range") CHECK(colikv_test::untouched_from(b, 0) == "");
  }
  EngineBuffers b(m, 4);
  CHECK(refusal(dir.file("absent.coli_kv"), m, b, 4).rfind(code(ErrorCode::kNotFound), 0) == 0);
  const std::string r = refusal(dir.path(), m, b, 4);
  CHECK(r.rfind(code(ErrorCode::kInvalidArgument) + dir.path() + ": a directory", 0) == 0);
}

TEST_CASE("coli_kv read: a file cut while it is read is kIO, one grown meanwhile reads as it was", "[coli_kv_read]") {
  const ModelSignature m = colikv_test::tiny_model();  // 292-byte records: 30,000 of them span two 4 MiB blocks
  const int64_t n = 30000;
  TempDir dir;
  const std::string f = dir.file("moving.coli_kv");
  EngineBuffers src(m, n);
  src.tokens = colikv_test::make_tokens(n, m.vocab, 5);
  src.fill(0, n, 2);
  colikv_test::write_coli_kv(f, src, n);
  const std::string whole = colikv_test::read_file(f);

  SECTION("cut") {
    EngineBuffers b(m, n);
    colikv::ReadColiKvOptions o;
    int calls = 0;
    o.progress = [&](int64_t done, int64_t total) {
      CHECK(total == n);
      if (calls++ == 0) {
        CHECK(done < n);
        REQUIRE(::truncate(f.c_str(), colikv::kColiKvHeaderBytes + done * m.record_bytes() + 100) == 0);
      }
    };
    try {
      colikv::read_coli_kv(f, m, b.tokens.data(), n, b.target(), o);
      FAIL("a cut file read cleanly");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::kIO);
      CHECK(std::string(e.what()) == f + ": the file shrank while it was read");
    }
    CHECK(calls == 1);
  }
  SECTION("grown") {
    EngineBuffers b(m, n + 10);
    b.poison();
    colikv::ReadColiKvOptions o;
    int calls = 0;
    o.progress = [&](int64_t, int64_t) {
      if (calls++ == 0) colikv_test::write_file(f, whole + whole.substr(colikv::kColiKvHeaderBytes, 10 * 292));
    };
    CHECK(colikv::read_coli_kv(f, m, b.tokens.data(), b.capacity, b.target(), o) == n);
    CHECK(calls >= 2);
    CHECK(b.compare(src, n) == "");
    CHECK(colikv_test::untouched_from(b, n) == "");
  }
}

TEST_CASE("coli_kv read: the default conversation id is the file name without its directory and .coli_kv",
          "[coli_kv_read]") {
  CHECK(colikv::default_conversation_id("/var/kv/slot3.coli_kv") == "slot3");
  CHECK(colikv::default_conversation_id("slot3.coli_kv") == "slot3");
  CHECK(colikv::default_conversation_id("dir/slot3.kv") == "slot3.kv");
  CHECK(colikv::default_conversation_id("dir/.coli_kv") == ".coli_kv");
  CHECK(colikv::default_conversation_id("a.coli_kv.coli_kv") == "a.coli_kv");
}
