// Erase: once a delete (rm, Store::remove, colikv_delete) or gc returns, no
// byte of what it deleted is left readable in the store's files (database,
// -wal, -shm), also while another process keeps the store open; chunks a
// kept conversation uses stay. Found by scanning the files for windows of the
// stored payloads and token lists.
#include <sqlite3.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "backend.h"
#include "colikv/colikv.h"
#include "colikv/store.h"
#include "proc_util.h"
#include "sqlite/sqlite_catalog.h"
#include "store/store_impl.h"
#include "test_support.h"

using colikv_test::ChildProcess;
using colikv_test::EngineBuffers;
using colikv_test::TempDir;

namespace {

// Byte strings of a conversation as stored: windows of its chunks' payloads
// and of their token lists (JSON text, in chunks and chunk_meta), taken from
// the chunks no other conversation uses.
struct StoredBytes {
  std::vector<std::string> payload_windows;
  std::vector<std::string> token_windows;
};

StoredBytes own_stored_bytes(const std::string& path, const std::string& id) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_stmt* q = nullptr;
  const char* sql =
      "SELECT ch.payload, ch.tokens FROM conversation_chunks cc JOIN chunks ch ON ch.chunk_id = cc.chunk_id "
      "JOIN conversations c ON c.conversation_id = cc.conversation_id WHERE c.name = ?1 AND NOT EXISTS "
      "(SELECT 1 FROM conversation_chunks o WHERE o.chunk_id = cc.chunk_id AND o.conversation_id <> c.conversation_id)";
  REQUIRE(sqlite3_prepare_v2(db, sql, -1, &q, nullptr) == SQLITE_OK);
  sqlite3_bind_text(q, 1, id.c_str(), -1, SQLITE_TRANSIENT);
  StoredBytes out;
  while (sqlite3_step(q) == SQLITE_ROW) {
    const std::string payload(static_cast<const char*>(sqlite3_column_blob(q, 0)),
                              static_cast<size_t>(sqlite3_column_bytes(q, 0)));
    const std::string tokens(reinterpret_cast<const char*>(sqlite3_column_text(q, 1)),
                             static_cast<size_t>(sqlite3_column_bytes(q, 1)));
    // 8 windows of 64 bytes spread over each payload, 3 of 24 over each token list.
    for (size_t k = 0; k < 8 && payload.size() >= 64; ++k)
      out.payload_windows.push_back(payload.substr((payload.size() - 64) * k / 7, 64));
    for (size_t k = 0; k < 3 && tokens.size() >= 24; ++k)
      out.token_windows.push_back(tokens.substr((tokens.size() - 24) * k / 2, 24));
  }
  sqlite3_finalize(q);
  sqlite3_close(db);
  return out;
}

// Two conversations sharing their first two chunks: "keep", 64 positions,
// and "gone", the same 32 then 64 of its own. 16 positions a chunk of a
// model 6,912 bytes a token, values that zstd does not shrink away.
struct TwoConversations {
  colikv::ModelSignature m = colikv_test::wide_model();
  EngineBuffers keep{m, 64};
  EngineBuffers gone{m, 96};
  TwoConversations() {
    keep.tokens = colikv_test::make_tokens(64, m.vocab, 1);
    keep.fill(0, 64, 1);
    gone.tokens = colikv_test::make_tokens(96, m.vocab, 2);
    std::copy(keep.tokens.begin(), keep.tokens.begin() + 32, gone.tokens.begin());
    gone.fill(0, 32, 1);
    gone.fill(32, 96, 2);
  }
  void write(colikv::Store& s) {
    s.append("keep", m, keep.tokens.data(), 64, keep.source());
    s.append("gone", m, gone.tokens.data(), 96, gone.source());
  }
};

colikv::Options erase_options(const colikv::ModelSignature& m) {
  colikv::Options o = colikv_test::chunked_options(m, 16);
  o.threads = 2;
  return o;
}

// A sqlite3 shell holding the store open: a reader in another process.
struct ShellReader {
  ChildProcess shell;
  ShellReader(const std::string& path, const std::string& err)
      : shell({COLIKV_SQLITE3_SHELL, path}, true, err) {}
  // Runs SQL and returns the last line it printed.
  std::string ask(const std::string& sql) {
    shell.write_stdin(sql + "\n.print READY\n");
    std::string line, last;
    while (shell.read_line(line) && line != "READY") last = line;
    REQUIRE(line == "READY");
    return last;
  }
  void quit() {
    shell.write_stdin(".quit\n");
    shell.close_stdin();
    shell.read_rest();
    CHECK(shell.wait() == 0);
  }
};

void require_shell() {
  if (*COLIKV_SQLITE3_SHELL == '\0')
    FAIL("no sqlite3 shell was found when configuring (Debian package sqlite3): install it and reconfigure");
}

// The store e.db of a fresh folder with erase_options and the two
// conversations to write into it; the sqlite3 shell is required.
struct EraseFixture : colikv_test::StoreFixture {
  EraseFixture() : StoreFixture(colikv_test::wide_model(), 16, "e.db") {
    require_shell();
    options = erase_options(model);
  }
  TwoConversations c;
};

// Stands in for a SQLite build without Debian's SECURE_DELETE default: every
// connection opened after it starts with secure_delete off.
int secure_delete_off(sqlite3* db, char**, const sqlite3_api_routines*) {
  return sqlite3_exec(db, "PRAGMA secure_delete=OFF", nullptr, nullptr, nullptr);
}

struct SecureDeleteOffByDefault {
  SecureDeleteOffByDefault() {
    sqlite3_auto_extension(reinterpret_cast<void (*)(void)>(&secure_delete_off));
  }
  ~SecureDeleteOffByDefault() { sqlite3_cancel_auto_extension(reinterpret_cast<void (*)(void)>(&secure_delete_off)); }
};

int64_t pragma_of(sqlite3* db, const char* sql) {
  sqlite3_stmt* q = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, sql, -1, &q, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_step(q) == SQLITE_ROW);
  const int64_t v = sqlite3_column_int64(q, 0);
  sqlite3_finalize(q);
  return v;
}

}  // namespace

TEST_CASE_METHOD(EraseFixture, "erase: rm leaves no byte of the conversation in the store's files while another process holds it open",
                 "[erase]") {
  colikv::Store& s = store();
  c.write(s);
  const StoredBytes gone = own_stored_bytes(path, "gone");
  REQUIRE(gone.payload_windows.size() == 4 * 8);  // its 4 chunks of its own
  REQUIRE(gone.token_windows.size() == 4 * 3);
  ShellReader reader(path, dir.file("shell.err"));
  REQUIRE(reader.ask("SELECT count(*) FROM conversations;") == "2");  // open, no transaction left
  REQUIRE(colikv_test::found_in_store_files(path, gone.payload_windows) >= 32);  // the scan finds what is there
  REQUIRE(colikv_test::found_in_store_files(path, gone.token_windows) >= 12);

  s.remove("gone");

  CHECK(colikv_test::found_in_store_files(path, gone.payload_windows) == 0);
  CHECK(colikv_test::found_in_store_files(path, gone.token_windows) == 0);
  CHECK(reader.ask("SELECT count(*) FROM conversations;") == "1");
  CHECK(colikv_test::loads_as(s, "keep", c.keep, 64) == "");  // the shared chunks stay
  CHECK(s.verify().ok());
  reader.quit();
}

TEST_CASE("erase: rm zeroes what it frees on a SQLite whose connections start with secure_delete off", "[erase]") {
  SecureDeleteOffByDefault off;
  TempDir dir;
  const std::string path = dir.file("e.db");
  {  // the stand-in works: a new connection has it off
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(":memory:", &db) == SQLITE_OK);
    REQUIRE(pragma_of(db, "PRAGMA secure_delete") == 0);
    sqlite3_close(db);
  }
  TwoConversations c;
  {  // written, then folded into the database file by the last close
    colikv::Store s(path, erase_options(c.m));
    c.write(s);
  }
  REQUIRE(colikv_test::file_size(path + "-wal") == 0);
  const StoredBytes gone = own_stored_bytes(path, "gone");
  REQUIRE(colikv_test::found_in_store_files(path, gone.payload_windows) >= 32);
  {
    colikv::Store s(path, erase_options(c.m));
    auto& db = static_cast<colikv::detail::SqliteCatalog&>(colikv::detail::StoreAccess::catalog(s)).database();
    CHECK(pragma_of(db.getHandle(), "PRAGMA secure_delete") == 1);
    s.remove("gone");
    CHECK(colikv_test::found_in_store_files(path, gone.payload_windows) == 0);
    CHECK(colikv_test::found_in_store_files(path, gone.token_windows) == 0);
    CHECK(colikv_test::loads_as(s, "keep", c.keep, 64) == "");
  }
  CHECK(colikv_test::found_in_store_files(path, gone.payload_windows) == 0);
  CHECK(colikv_test::found_in_store_files(path, gone.token_windows) == 0);
}

TEST_CASE_METHOD(EraseFixture,
                 "erase: a reader holding an older snapshot keeps the bytes until it ends it, then the store's close erases them",
                 "[erase]") {
  options.busy_timeout_ms = 200;  // how long rm waits for the reader
  colikv::Store* s = &store();
  c.write(*s);
  const StoredBytes gone = own_stored_bytes(path, "gone");
  ShellReader reader(path, dir.file("shell.err"));
  REQUIRE(reader.ask("BEGIN; SELECT count(*) FROM conversations;") == "2");

  s->remove("gone");  // committed; the erase waits for the reader, then gives up
  CHECK_FALSE(s->exists("gone"));
  // The reader may still read "gone" in its snapshot, so its bytes are there.
  CHECK(reader.ask("SELECT count(*) FROM conversations WHERE name = 'gone';") == "1");
  CHECK(colikv_test::found_in_store_files(path, gone.payload_windows) > 0);

  // Once the reader lets go, the next rm or gc, or the store's close (as
  // here: the reader keeps the file open, so SQLite's own last close does not
  // run), erases them.
  REQUIRE(reader.ask("COMMIT; SELECT count(*) FROM conversations;") == "1");
  CHECK(colikv_test::found_in_store_files(path, gone.payload_windows) > 0);
  close();
  CHECK(colikv_test::found_in_store_files(path, gone.payload_windows) == 0);
  CHECK(colikv_test::found_in_store_files(path, gone.token_windows) == 0);
  CHECK(read("keep", c.keep, 64) == "");
  reader.quit();
}

TEST_CASE_METHOD(EraseFixture, "erase: gc's evicted values leave the store's files, the token ids stay", "[erase]") {
  colikv::Store& s = store();
  c.write(s);
  const StoredBytes gone = own_stored_bytes(path, "gone");
  ShellReader reader(path, dir.file("shell.err"));
  REQUIRE(reader.ask("SELECT count(*) FROM conversations;") == "2");
  REQUIRE(colikv_test::found_in_store_files(path, gone.payload_windows) >= 32);

  const colikv::EvictionReport r = s.gc(0);
  CHECK(r.chunks == 8);  // 2 shared, 2 of keep's own, 4 of gone's
  CHECK(colikv_test::found_in_store_files(path, gone.payload_windows) == 0);
  CHECK(colikv_test::found_in_store_files(path, gone.token_windows) > 0);  // evicted keeps its token ids
  CHECK(colikv_test::error_code_of([&] { colikv_test::loads_as(s, "gone", c.gone, 96); }) ==
        colikv::ErrorCode::kEvicted);
  reader.quit();
}

namespace {

// Makes conversation id look last used two days ago (a tenant's retention of
// one day then expires it), by SQL in the store's file: no test waits a day.
void idle_for_two_days(const std::string& path, const std::string& id) {
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch()).count();
  colikv_test::store_exec(path, "UPDATE conversations SET last_used_ms = " + std::to_string(now - 2 * 86400000LL) +
                                    " WHERE name = ?", {id});
}

}  // namespace

TEST_CASE_METHOD(EraseFixture,
                 "erase: a conversation the tenant's retention expires on an append leaves no byte in the store's files",
                 "[erase][quotas]") {
  colikv::Store& s = store();
  c.write(s);
  const StoredBytes gone = own_stored_bytes(path, "gone");
  REQUIRE(gone.payload_windows.size() == 4 * 8);
  idle_for_two_days(path, "gone");
  s.set_tenant_limits({std::nullopt, 86400000});
  ShellReader reader(path, dir.file("shell.err"));
  REQUIRE(reader.ask("SELECT count(*) FROM conversations;") == "2");
  REQUIRE(colikv_test::found_in_store_files(path, gone.payload_windows) >= 32);
  REQUIRE(colikv_test::found_in_store_files(path, gone.token_windows) >= 12);

  EngineBuffers next(c.m, 16);  // another conversation's first turn
  next.tokens = colikv_test::make_tokens(16, c.m.vocab, 3);
  next.fill(0, 16, 3);
  s.append("next", c.m, next.tokens.data(), 16, next.source());

  CHECK_FALSE(s.exists("gone"));
  // Deleted whole, not evicted: its token ids go with its values.
  CHECK(colikv_test::found_in_store_files(path, gone.payload_windows) == 0);
  CHECK(colikv_test::found_in_store_files(path, gone.token_windows) == 0);
  CHECK(reader.ask("SELECT count(*) FROM conversations;") == "2");  // keep and next
  CHECK(colikv_test::loads_as(s, "keep", c.keep, 64) == "");  // the shared chunks stay
  CHECK(s.verify().ok());
  reader.quit();
}

TEST_CASE_METHOD(EraseFixture,
                 "erase: retention applied inside write's and a queued turn's transaction erases once that commits",
                 "[erase][quotas]") {
  const bool queued = GENERATE(false, true);
  INFO((queued ? "append_async" : "write"));
  colikv::Store& s = store();
  c.write(s);
  const StoredBytes gone = own_stored_bytes(path, "gone");
  idle_for_two_days(path, "gone");
  s.set_tenant_limits({std::nullopt, 86400000});
  ShellReader reader(path, dir.file("shell.err"));
  REQUIRE(reader.ask("SELECT count(*) FROM conversations;") == "2");
  REQUIRE(colikv_test::found_in_store_files(path, gone.payload_windows) >= 32);

  if (queued) {
    EngineBuffers next(c.m, 16);
    next.tokens = colikv_test::make_tokens(16, c.m.vocab, 3);
    next.fill(0, 16, 3);
    s.append_async("next", c.m, next.tokens.data(), 16, next.source());
    s.wait("next");
  } else {
    s.write("keep", c.m, c.keep.tokens.data(), 48, 64, c.keep.source());  // a truncate and an append, one transaction
  }
  CHECK_FALSE(s.exists("gone"));
  CHECK(colikv_test::found_in_store_files(path, gone.payload_windows) == 0);
  CHECK(colikv_test::found_in_store_files(path, gone.token_windows) == 0);
  CHECK(colikv_test::loads_as(s, "keep", c.keep, 64) == "");
  reader.quit();
}

TEST_CASE_METHOD(EraseFixture, "erase: expire (colikv gc --max-idle) erases what it deletes as rm does", "[erase][quotas]") {
  colikv::Store& s = store();
  c.write(s);
  const StoredBytes gone = own_stored_bytes(path, "gone");
  idle_for_two_days(path, "gone");
  ShellReader reader(path, dir.file("shell.err"));
  REQUIRE(reader.ask("SELECT count(*) FROM conversations;") == "2");
  REQUIRE(colikv_test::found_in_store_files(path, gone.payload_windows) >= 32);

  const colikv::ExpiryReport r = s.expire(86400000);
  CHECK(r.conversations == std::vector<std::string>{"gone"});
  CHECK(r.chunks == 4);
  CHECK(colikv_test::found_in_store_files(path, gone.payload_windows) == 0);
  CHECK(colikv_test::found_in_store_files(path, gone.token_windows) == 0);
  CHECK(colikv_test::loads_as(s, "keep", c.keep, 64) == "");
  reader.quit();
}

TEST_CASE_METHOD(EraseFixture, "erase: colikv_delete of the C API erases as rm does", "[erase]") {
  c.write(store());
  close();
  const StoredBytes gone = own_stored_bytes(path, "gone");
  ShellReader reader(path, dir.file("shell.err"));
  REQUIRE(reader.ask("SELECT count(*) FROM conversations;") == "2");
  colikv_store* st = nullptr;
  REQUIRE(colikv_open(path.c_str(), 0, &st) == COLIKV_OK);
  REQUIRE(colikv_delete(st, "gone") == COLIKV_OK);
  CHECK(colikv_test::found_in_store_files(path, gone.payload_windows) == 0);
  CHECK(colikv_test::found_in_store_files(path, gone.token_windows) == 0);
  colikv_close(st);
  reader.quit();
}

namespace {

std::string unhex(const std::string& hex) {
  std::string out;
  for (size_t i = 2; i + 1 < hex.size(); i += 2) out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;  // from "\x..." (bytea's text form)
}

// The server's files of the store's tables, their TOAST tables and indexes,
// under the test server's data directory (COLIKV_TEST_PG_DIR).
std::vector<std::string> pg_relation_files(const std::string& store) {
  const char* dir = std::getenv("COLIKV_TEST_PG_DIR");
  REQUIRE(dir != nullptr);  // tools/dev.sh test sets it: the server's files are scanned
  const colikv_test::SqlRows rows = colikv_test::store_query(
      store,
      "SELECT pg_relation_filepath(c.oid) FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace "
      "OR c.oid IN (SELECT reltoastrelid FROM pg_class WHERE relnamespace = current_schema()::regnamespace) "
      "OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid IN (SELECT reltoastrelid FROM pg_class WHERE "
      "relnamespace = current_schema()::regnamespace))");
  std::vector<std::string> files;
  for (const auto& r : rows)
    if (!r[0].empty()) files.push_back(std::string(dir) + "/data/" + r[0]);
  return files;
}

int64_t found_in(const std::vector<std::string>& files, const std::vector<std::string>& windows) {
  int64_t n = 0;
  for (const std::string& f : files) {
    const std::string bytes = colikv_test::file_size(f) > 0 ? colikv_test::read_file(f) : "";
    for (const std::string& w : windows)
      for (size_t at = bytes.find(w); at != std::string::npos; at = bytes.find(w, at + 1)) ++n;
  }
  return n;
}

}  // namespace

TEST_CASE("erase: on PostgreSQL rm vacuums the tables, and vacuum leaves no byte of the conversation in their files",
          "[postgres]") {
  const std::string store = colikv_test::fresh_pg_store();
  TwoConversations c;
  colikv::Store s(store, erase_options(c.m));
  c.write(s);
  const colikv_test::SqlRows own = colikv_test::store_query(
      store,
      "SELECT ch.payload, ch.tokens FROM conversation_chunks cc JOIN chunks ch ON ch.chunk_id = cc.chunk_id "
      "JOIN conversations v ON v.conversation_id = cc.conversation_id WHERE v.name = 'gone' AND NOT EXISTS "
      "(SELECT 1 FROM conversation_chunks o WHERE o.chunk_id = cc.chunk_id AND o.conversation_id <> v.conversation_id)");
  REQUIRE(own.size() == 4);
  StoredBytes gone;
  for (const auto& r : own) {
    const std::string payload = unhex(r[0]);
    for (size_t k = 0; k < 8; ++k) gone.payload_windows.push_back(payload.substr((payload.size() - 64) * k / 7, 64));
    for (size_t k = 0; k < 3; ++k) gone.token_windows.push_back(r[1].substr((r[1].size() - 24) * k / 2, 24));
  }
  colikv_test::store_exec(store, "CHECKPOINT");  // shared buffers onto the files scanned
  const std::vector<std::string> before = pg_relation_files(store);
  REQUIRE(found_in(before, gone.payload_windows) >= 32);
  REQUIRE(found_in(before, gone.token_windows) >= 12);

  s.remove("gone");
  colikv_test::store_exec(store, "CHECKPOINT");
  CHECK(colikv_test::store_int(store, "SELECT count(*) FROM conversations") == 1);
  // gone's own chunks are the last rows of the TOAST table: the VACUUM that
  // rm runs cuts their pages off its file. Rows in the middle of a table
  // would stay in its free space until reused, or until vacuum().
  CHECK(found_in(pg_relation_files(store), gone.payload_windows) == 0);

  s.vacuum();  // VACUUM FULL: the tables rewritten into new files
  colikv_test::store_exec(store, "CHECKPOINT");
  std::vector<std::string> files = pg_relation_files(store);
  files.insert(files.end(), before.begin(), before.end());  // the old files are emptied, then unlinked
  CHECK(found_in(files, gone.payload_windows) == 0);
  CHECK(found_in(files, gone.token_windows) == 0);
  CHECK(colikv_test::loads_as(s, "keep", c.keep, 64) == "");
}
