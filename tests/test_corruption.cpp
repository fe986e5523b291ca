// Corrupt data: bytes of chunk blobs, token columns, counts and chunk lists
// are altered behind the library's back (plain SQL, or raw bytes of the
// file). Load must fail with kCorrupt naming the conversation and the
// position range, or return data that is bit for bit right; never wrong
// floats, never a crash. Store::verify and `colikv verify` report the
// conversation and the range; other conversations stay readable.
#include <catch2/catch.hpp>

#include <SQLiteCpp/SQLiteCpp.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "colikv/error.h"
#include "colikv/store.h"
#include "crash_workload.h"
#include "fault_vfs.h"
#include "test_support.h"

namespace wl = colikv_test::workload;
using colikv::Error;
using colikv::ErrorCode;
using colikv::Store;
using colikv_test::EngineBuffers;
using colikv_test::TempDir;

namespace {

// c0 and c1: 40 tokens each, 5 chunks of 8; c2: 21 tokens.
void make_store(const std::string& path) { wl::write_store(path, {{"c0", 40}, {"c1", 40}, {"c2", 21}}, true); }

int64_t chunk_id_of(SQLite::Database& db, const std::string& conv, int seq) {
  SQLite::Statement q(db,
                      "SELECT cc.chunk_id FROM conversation_chunks cc JOIN conversations c USING (conversation_id) "
                      "WHERE c.name = ? AND cc.seq = ?");
  q.bind(1, conv);
  q.bind(2, seq);
  REQUIRE(q.executeStep());
  return q.getColumn(0).getInt64();
}

const uint32_t kPoison = 0x7fc0dead;

bool poisoned(const EngineBuffers& b, int64_t from, int64_t to) {
  for (int l = 0; l < b.model.n_layers; ++l) {
    for (int64_t i = from * b.model.kv_lora; i < to * b.model.kv_lora; ++i) {
      uint32_t u;
      std::memcpy(&u, &b.lc[l][static_cast<size_t>(i)], 4);
      if (u != kPoison) return false;
    }
  }
  return true;
}

struct Outcome {
  bool corrupt = false;
  std::string message;
};

// Loads `name`: either kCorrupt (positions [bad_from, bad_to) untouched in the
// buffers, the message naming the conversation) or bit-exact data.
Outcome load_checked(Store& s, const std::string& name, int64_t expect, int64_t bad_from, int64_t bad_to,
                     const std::string& ctx) {
  EngineBuffers got(wl::model(), wl::kCapacity);
  got.poison();
  Outcome o;
  try {
    const int64_t n = s.load(name, wl::model(), got.tokens.data(), wl::kCapacity, got.target());
    const std::string d = got.compare(wl::history_of(name).buffers, n);
    if (!d.empty()) FAIL(ctx << ": load returned wrong data: " << d);
    if (n != expect && n > expect) FAIL(ctx << ": load returned " << n << " tokens, more than the " << expect << " stored");
  } catch (const Error& e) {
    o.corrupt = true;
    o.message = e.what();
    if (e.code() != ErrorCode::kCorrupt) FAIL(ctx << ": error " << colikv::error_code_name(e.code()) << ": " << e.what());
    if (o.message.find("'" + name + "'") == std::string::npos) FAIL(ctx << ": message does not name " << name << ": " << o.message);
    if (bad_from >= 0 && !poisoned(got, bad_from, bad_to))
      FAIL(ctx << ": bytes of the corrupt chunk reached the caller's buffers");
  }
  return o;
}

bool verify_names(Store& s, const std::string& name, int64_t from, int64_t to) {
  for (const auto& p : s.verify().problems)
    if (p.conversation == name && p.first_pos <= from && p.end_pos >= to) return true;
  return false;
}

}  // namespace

TEST_CASE("corruption: every single-bit flip of a chunk payload is caught or harmless", "[corruption]") {
  colikv_test::RamTmpdir ram;
  TempDir dir;
  const std::string path = dir.file("flip.db");
  make_store(path);
  std::string original;
  int64_t id;
  {
    SQLite::Database db(path, SQLite::OPEN_READWRITE);
    id = chunk_id_of(db, "c0", 2);
    SQLite::Statement q(db, "SELECT payload FROM chunks WHERE chunk_id = ?");
    q.bind(1, id);
    REQUIRE(q.executeStep());
    original.assign(static_cast<const char*>(q.getColumn(0).getBlob()), static_cast<size_t>(q.getColumn(0).getBytes()));
  }
  REQUIRE(original.size() > 16);
  int caught = 0, harmless = 0;
  Store s(path, wl::options(true));
  for (size_t i = 0; i < original.size(); ++i) {
    std::string bad = original;
    bad[i] = static_cast<char>(bad[i] ^ (1 << (i % 8)));
    {
      SQLite::Database db(path, SQLite::OPEN_READWRITE);
      SQLite::Statement u(db, "UPDATE chunks SET payload = ? WHERE chunk_id = ?");
      u.bind(1, bad.data(), static_cast<int>(bad.size()));
      u.bind(2, id);
      u.exec();
    }
    Outcome o = load_checked(s, "c0", 40, 16, 24, "payload byte " + std::to_string(i));
    if (o.corrupt) {
      ++caught;
      if (o.message.find("[16, 24)") == std::string::npos) FAIL("byte " << i << ": message has no range: " << o.message);
    } else {
      ++harmless;
    }
  }
  CHECK(verify_names(s, "c0", 16, 24));
  load_checked(s, "c1", 40, -1, -1, "c1 beside the corrupt chunk");
  load_checked(s, "c2", 21, -1, -1, "c2 beside the corrupt chunk");
  std::printf("corruption: %zu payload bit flips: %d caught, %d decoded to the right bytes anyway\n", original.size(),
              caught, harmless);
  CHECK(caught > 0);

  // colikv verify names the conversation and exits 1.
  const std::string out = dir.file("verify.out");
  const int status = std::system((std::string(COLIKV_TOOL_PATH) + " verify " + path + " > " + out + " 2>&1").c_str());
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 1);
  const std::string text = colikv_test::read_file(out);
  CHECK(text.find("'c0'") != std::string::npos);
}

TEST_CASE("corruption: altered token ids, sizes, checksums, counts and chunk lists are reported", "[corruption]") {
  struct Case {
    const char* what;
    std::string sql;  // ?1 = chunk id of c0 seq 1 (positions [8, 16)), ?2 = conversation id of c0
    int64_t bad_from, bad_to;  // positions load must leave untouched (-1: none)
    bool load_may_succeed;     // a consistent shorter conversation
  };
  const std::vector<Case> cases = {
      {"a token id changed", "UPDATE chunks SET tokens = json_set(tokens, '$[3]', (json_extract(tokens, '$[3]') + 1) % 1000) WHERE chunk_id = ?1", 8, 16, false},
      {"token list malformed", "UPDATE chunks SET tokens = '[1,2,' WHERE chunk_id = ?1", 8, 16, false},
      {"token list one short", "UPDATE chunks SET tokens = json_remove(tokens, '$[7]') WHERE chunk_id = ?1", 8, 16, false},
      {"token id out of the vocabulary", "UPDATE chunks SET tokens = json_set(tokens, '$[0]', 5000) WHERE chunk_id = ?1", 8, 16, false},
      {"chunk n_tokens changed", "UPDATE chunks SET n_tokens = 7 WHERE chunk_id = ?1", 8, 16, false},
      {"raw_size changed", "UPDATE chunks SET raw_size = raw_size + 4 WHERE chunk_id = ?1", 8, 16, false},
      {"raw_size huge", "UPDATE chunks SET raw_size = 1099511627776 WHERE chunk_id = ?1", 8, 16, false},
      {"checksum changed", "UPDATE chunks SET checksum = (checksum + 1) % 4294967296 WHERE chunk_id = ?1", 8, 16, false},
      {"compression flag flipped", "UPDATE chunks SET compression = CASE compression WHEN 'zstd' THEN 'none' ELSE 'zstd' END WHERE chunk_id = ?1", 8, 16, false},
      {"payload truncated", "UPDATE chunks SET payload = substr(payload, 1, length(payload) / 2) WHERE chunk_id = ?1", 8, 16, false},
      {"payload empty", "UPDATE chunks SET payload = x'' WHERE chunk_id = ?1", 8, 16, false},
      {"first_pos changed", "UPDATE chunks SET first_pos = 9 WHERE chunk_id = ?1", 8, 16, false},
      {"count larger than the chunks", "UPDATE conversations SET token_count = 47 WHERE conversation_id = ?2", -1, -1, false},
      {"count smaller than the chunks", "UPDATE conversations SET token_count = 30 WHERE conversation_id = ?2", -1, -1, true},
      {"chunk list row deleted", "DELETE FROM conversation_chunks WHERE conversation_id = ?2 AND seq = 1", 8, 16, false},
      {"chunk list seq moved", "UPDATE conversation_chunks SET seq = 9 WHERE conversation_id = ?2 AND seq = 1", 8, 16, false},
      {"chunk list points at another conversation's chunk", "UPDATE conversation_chunks SET chunk_id = (SELECT chunk_id FROM conversation_chunks cc JOIN conversations c USING (conversation_id) WHERE c.name = 'c1' AND cc.seq = 1) WHERE conversation_id = ?2 AND seq = 1", 8, 16, false},
  };
  for (const auto& c : cases) {
    SECTION(c.what) {
      colikv_test::RamTmpdir ram;
  TempDir dir;
      const std::string path = dir.file("alter.db");
      make_store(path);
      {
        SQLite::Database db(path, SQLite::OPEN_READWRITE);
        db.exec("PRAGMA foreign_keys = OFF");
        const int64_t chunk = chunk_id_of(db, "c0", 1);
        const int64_t conv = db.execAndGet("SELECT conversation_id FROM conversations WHERE name = 'c0'").getInt64();
        SQLite::Statement u(db, c.sql);
        u.bind(1, chunk);
        if (c.sql.find("?2") != std::string::npos) u.bind(2, conv);
        REQUIRE(u.exec() >= 1);
      }
      Store s(path, wl::options(true));
      Outcome o = load_checked(s, "c0", 40, c.bad_from, c.bad_to, c.what);
      if (!c.load_may_succeed) {
        CHECK(o.corrupt);
        if (c.bad_from >= 0)
          CHECK(o.message.find("[" + std::to_string(c.bad_from) + ", ") != std::string::npos);
      }
      // verify names c0 and a range of positions.
      const auto report = s.verify();
      bool named = false;
      for (const auto& p : report.problems)
        if (p.conversation == "c0" && p.first_pos >= 0 && p.end_pos > p.first_pos) named = true;
      CHECK(named);
      // The others are untouched and load bit for bit.
      load_checked(s, "c2", 21, -1, -1, std::string(c.what) + ": c2");
      if (c.sql.find("'c1'") == std::string::npos) load_checked(s, "c1", 40, -1, -1, std::string(c.what) + ": c1");
    }
  }
}

TEST_CASE("corruption: random bytes of the database file flipped never crash or return wrong floats",
          "[corruption]") {
  colikv_test::RamTmpdir ram;
  TempDir dir;
  const std::string path = dir.file("pages.db");
  make_store(path);
  const std::string pristine = colikv_test::read_file(path);
  std::mt19937 rng(7);
  const int rounds = std::getenv("COLIKV_LONG_TESTS") ? 2000 : 200;
  int open_failed = 0, load_failed = 0, loads_exact = 0, verify_threw = 0, verify_flagged = 0;
  for (int r = 0; r < rounds; ++r) {
    std::string bytes = pristine;
    const int flips = 1 + static_cast<int>(rng() % 8);
    for (int f = 0; f < flips; ++f) {
      const size_t at = rng() % bytes.size();
      bytes[at] = static_cast<char>(bytes[at] ^ (1 + rng() % 255));
    }
    colikv_test::write_file(path, bytes);
    try {
      Store s(path, wl::options(true));
      for (auto [name, len] : std::vector<std::pair<std::string, int64_t>>{{"c0", 40}, {"c1", 40}, {"c2", 21}}) {
        EngineBuffers got(wl::model(), wl::kCapacity);
        got.poison();
        try {
          const int64_t n = s.load(name, wl::model(), got.tokens.data(), wl::kCapacity, got.target());
          const std::string d = got.compare(wl::history_of(name).buffers, n);
          if (!d.empty()) FAIL("round " << r << ": " << name << " loaded wrong data: " << d);
          if (n > len) FAIL("round " << r << ": " << name << " loaded " << n << " tokens");
          ++loads_exact;
        } catch (const Error&) {
          ++load_failed;
        }
      }
      try {
        if (!s.verify().ok()) ++verify_flagged;
      } catch (const Error&) {
        ++verify_threw;
      }
    } catch (const Error&) {
      ++open_failed;
    }
  }
  std::printf("corruption: %d rounds of random byte flips: %d opens refused, %d loads refused, %d loads exact, "
              "verify flagged %d, threw %d\n",
              rounds, open_failed, load_failed, loads_exact, verify_flagged, verify_threw);
  CHECK(open_failed + load_failed + verify_flagged > 0);
}
