// What only a server store has: connection errors, a client killed mid-turn,
// a server stopped and restarted mid-turn. Run only as postgres:... tests
// (tag [postgres], tests/backend.h), one at a time: the restart stops the server all of them use; the restart needs the test server's
// directory (COLIKV_TEST_PG_DIR, set by tools/dev.sh test).
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <thread>

#include "append_hook.h"
#include "backend.h"
#include "cli_run.h"
#include "colikv/coli_kv.h"
#include "colikv/colikv.h"
#include "colikv/error.h"
#include "colikv/store.h"
#include "proc_util.h"
#include "test_support.h"

using colikv_test::loads_as;

using colikv::ErrorCode;
using colikv::ModelSignature;
using colikv_test::EngineBuffers;

namespace {

// What colikv_store_child uses: tiny_model(), 4-token chunks, histories by seed.
colikv::Options child_options() {
  colikv::Options o;
  o.chunk_target_bytes = 4 * colikv_test::tiny_model().record_bytes();
  return o;
}

// The password of a postgresql://user:password@host URI.
std::string password_of(const std::string& uri) {
  const size_t at = uri.find('@');
  const size_t colon = uri.find(':', uri.find("://") + 3);
  return colon < at ? uri.substr(colon + 1, at - colon - 1) : "";
}

std::string with_database(const std::string& uri, const std::string& db) {
  const size_t slash = uri.find('/', uri.find('@'));
  const size_t query = uri.find('?', slash);
  return uri.substr(0, slash + 1) + db + (query == std::string::npos ? "" : uri.substr(query));
}

struct Failure {
  ErrorCode code = ErrorCode::kOk;
  std::string message;
};
template <class F>
Failure failure_of(F&& f) {
  Failure r;
  try {
    f();
  } catch (const colikv::Error& e) {
    r = {e.code(), e.what()};
  }
  return r;
}

// tools/postgres.sh pg_ctl on the test server.
void pg_ctl(const std::string& args) {
  const char* dir = std::getenv("COLIKV_TEST_PG_DIR");
  REQUIRE(dir != nullptr);  // tools/dev.sh test sets it; a server of one's own cannot be restarted here
  const std::string cmd = std::string(COLIKV_SOURCE_DIR) + "/tools/postgres.sh pg_ctl " + dir + " " + args + " > /dev/null";
  REQUIRE(std::system(cmd.c_str()) == 0);
}

}  // namespace

TEST_CASE("postgres: connection errors name the server, never the password", "[postgres]") {
  const std::string uri = colikv_test::test_pg_uri();
  const std::string password = password_of(uri);
  REQUIRE(password.size() >= 8);

  Failure no_db = failure_of([&] { colikv::Store s(with_database(uri, "no_such_database"), child_options()); });
  CHECK(no_db.code == ErrorCode::kNotFound);
  CHECK(no_db.message.find("127.0.0.1") != std::string::npos);
  CHECK(no_db.message.find("no_such_database") != std::string::npos);
  CHECK(no_db.message.find(password) == std::string::npos);

  std::string wrong = uri;
  wrong.replace(wrong.find(password), password.size(), "not-the-password");
  Failure auth = failure_of([&] { colikv::Store s(wrong, child_options()); });
  CHECK(auth.code == ErrorCode::kIO);
  CHECK(auth.message.find("not-the-password") == std::string::npos);
  CHECK(auth.message.find("127.0.0.1") != std::string::npos);

  // A store that does not exist yet, opened without create_if_missing.
  colikv::Options o = child_options();
  o.create_if_missing = false;
  Failure missing = failure_of([&] { colikv::Store s(colikv_test::fresh_pg_store(), o); });
  CHECK(missing.code == ErrorCode::kNotFound);
  CHECK(missing.message.find(password) == std::string::npos);
}

TEST_CASE("postgres: a store's path and messages never show the password", "[postgres]") {
  const std::string uri = colikv_test::fresh_pg_store();
  const std::string password = password_of(uri);
  colikv::Store s(uri, child_options());
  Failure f = failure_of([&] { s.truncate("nobody", 0); });
  CHECK(f.code == ErrorCode::kNotFound);
  CHECK(f.message.find(password) == std::string::npos);
  CHECK(f.message.find("conversation 'nobody'") != std::string::npos);
  CHECK(colikv::shown_store_location(uri).find(password) == std::string::npos);
}

TEST_CASE("postgres: a client SIGKILLed mid-append leaves whole turns and no lock", "[postgres]") {
  const std::string uri = colikv_test::fresh_pg_store();
  { colikv::Store s(uri, child_options()); }
  const int64_t per_turn = 400, turns = 200;
  colikv_test::ChildProcess child({COLIKV_STORE_CHILD_PATH, "append", uri, "victim", "5", std::to_string(turns),
                                   std::to_string(per_turn)});
  std::string line;
  int64_t acknowledged = 0;
  for (int i = 0; i < 3 && child.read_line(line); ++i) acknowledged = std::stoll(line);
  REQUIRE(acknowledged > 0);
  child.kill_now();
  child.wait();

  colikv::Store s(uri, child_options());
  const int64_t count = s.count("victim");
  CHECK(count >= acknowledged);
  CHECK(count % per_turn == 0);
  CHECK(loads_as(s, "victim", colikv_test::history(colikv_test::tiny_model(), count, 5), count) == "");
  CHECK(s.verify().ok());
  // The killed client's write lock went with its connection.
  const EngineBuffers more = colikv_test::history(colikv_test::tiny_model(), count + per_turn, 5);
  s.append("victim", more.model, more.tokens.data(), count + per_turn, more.source());
  CHECK(s.count("victim") == count + per_turn);
}

// The server is stopped while an append is held inside its turn (the sync
// point after a chunk): a stop timed by the clock alone can fall between two
// appends, where the next one just reconnects and no error is ever seen.
TEST_CASE("postgres: a server stopped mid-append and restarted loses nothing acknowledged", "[postgres][sync]") {
  const std::string uri = colikv_test::fresh_pg_store();
  const std::string password = password_of(uri);
  const int64_t per_turn = 64, turns = 60, stop_after = 10 * per_turn;
  const EngineBuffers h = colikv_test::history(colikv_test::tiny_model(), per_turn * turns, 9);
  colikv::Store s(uri, child_options());
  std::atomic<int64_t> acknowledged{0};
  std::atomic<int> io_errors{0};
  std::string first_error;
  std::exception_ptr failed;

  std::mutex mu;
  std::condition_variable cv;
  bool held = false, server_stopped = false;
  colikv_test::AppendHook hold_one_turn([&](const std::string& id, int64_t) {
    std::unique_lock<std::mutex> lock(mu);
    if (id != "turns" || held || acknowledged < stop_after) return;
    held = true;  // inside the eleventh turn, a chunk stored, nothing committed
    cv.notify_all();
    cv.wait(lock, [&] { return server_stopped; });
  });

  std::thread writer([&] {
    // An engine host: a turn that failed is retried until it is committed
    // (for at most two minutes: a loaded machine's recovery is slow).
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(2);
    try {
      for (int64_t t = 1; t <= turns; ++t) {
        for (;;) {
          try {
            s.append("turns", h.model, h.tokens.data(), t * per_turn, h.source());
            acknowledged = t * per_turn;
            break;
          } catch (const colikv::Error& e) {
            if ((e.code() != ErrorCode::kIO && e.code() != ErrorCode::kBusy) || std::chrono::steady_clock::now() > give_up)
              throw;
            if (io_errors++ == 0) first_error = e.what();
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
          }
        }
      }
    } catch (...) {
      failed = std::current_exception();
    }
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return held; });
  }
  const int64_t before_stop = acknowledged;
  pg_ctl("stop -m immediate -w");
  {
    std::lock_guard<std::mutex> lock(mu);
    server_stopped = true;
    cv.notify_all();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  pg_ctl("start -w -t 60");
  writer.join();
  if (failed) std::rethrow_exception(failed);

  CHECK(before_stop == stop_after);
  CHECK(io_errors > 0);  // the held turn saw the server go
  INFO(first_error);
  CHECK(first_error.find("127.0.0.1") != std::string::npos);
  CHECK(first_error.find(password) == std::string::npos);
  CHECK(acknowledged == per_turn * turns);
  CHECK(loads_as(s, "turns", h, per_turn * turns) == "");
  CHECK(s.verify().ok());
}

// A call finding its connection gone reconnects, reads included; while the
// server is restarting it tries again until the busy timeout, never longer.
TEST_CASE("postgres: a call during a server restart waits for it up to the busy timeout, and no longer", "[postgres]") {
  const std::string uri = colikv_test::fresh_pg_store();
  const EngineBuffers h = colikv_test::history(colikv_test::tiny_model(), 12, 6);
  colikv::Options patient = child_options();
  patient.busy_timeout_ms = 60000;
  colikv::Store s(uri, patient);
  s.append("c", h.model, h.tokens.data(), 12, h.source());
  colikv::Options quick = child_options();
  quick.busy_timeout_ms = 300;
  colikv::Store q(uri, quick);
  CHECK(q.count("c") == 12);

  pg_ctl("stop -m fast -w");
  const std::string start = std::string(COLIKV_SOURCE_DIR) + "/tools/postgres.sh pg_ctl " +
                            std::getenv("COLIKV_TEST_PG_DIR") + " start -w -t 60 > /dev/null";
  int started = -1;
  std::thread starter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    started = std::system(start.c_str());
  });
  const Failure waited = failure_of([&] { CHECK(s.count("c") == 12); });
  starter.join();
  REQUIRE(started == 0);
  INFO(waited.message);
  CHECK(waited.code == ErrorCode::kOk);

  pg_ctl("stop -m fast -w");
  const auto t0 = std::chrono::steady_clock::now();
  const Failure gave_up = failure_of([&] { q.count("c"); });
  const auto took = std::chrono::steady_clock::now() - t0;
  pg_ctl("start -w -t 60");
  INFO(gave_up.message);
  CHECK(gave_up.code == ErrorCode::kIO);
  CHECK(gave_up.message.find("reconnecting") != std::string::npos);
  CHECK(took >= std::chrono::milliseconds(100));
  CHECK(took < std::chrono::seconds(5));
  CHECK(q.count("c") == 12);
}

TEST_CASE("postgres: colikv copy moves a store onto the server and back, byte for byte", "[postgres]") {
  colikv_test::TempDir dir;
  const ModelSignature m = colikv_test::tiny_model();
  const std::string file = dir.file("from.db"), back = dir.file("back.db");
  const std::string server = colikv_test::fresh_pg_store();
  const EngineBuffers a = colikv_test::history(colikv_test::tiny_model(), 40, 1), b = colikv_test::history(colikv_test::tiny_model(), 30, 2);
  {
    colikv::Options o = child_options();
    colikv::Store s(file, o);
    s.append("a", m, a.tokens.data(), 40, a.source());
    s.fork("a", "a-half", 20);
    s.append("b", m, b.tokens.data(), 30, b.source());
    s.set_title("b", "the title");
    o.new_conversation_precision = colikv::Precision::kBf16;
    colikv::Store lossy(file, o);
    lossy.append("c", m, b.tokens.data(), 12, b.source());
  }
  colikv_test::Run there = colikv_test::tool({"copy", file, server, "--json"});
  INFO(there.err);
  REQUIRE(there.code == 0);
  CHECK(there.out.find(password_of(server)) == std::string::npos);
  CHECK(there.out.find("\"tokens\": 102") != std::string::npos);
  colikv_test::Run again = colikv_test::tool({"copy", file, server, "a"});
  CHECK(again.code != 0);  // nothing is overwritten
  CHECK(colikv_test::tool({"copy", server, back}).code == 0);

  colikv::Store from(file), onto(server), home(back);
  for (const std::string id : {"a", "a-half", "b", "c"}) {
    const std::string x = dir.file(id + ".x.coli_kv"), y = dir.file(id + ".y.coli_kv");
    colikv::export_coli_kv(from, id, x);
    colikv::export_coli_kv(home, id, y);
    INFO(id);
    CHECK(colikv_test::read_file(x) == colikv_test::read_file(y));
    CHECK(onto.info(id).precision == from.info(id).precision);
  }
  CHECK(onto.info("b").title == "the title");
  // a-half shares a's chunks on the server too (stored once).
  CHECK(onto.stats().total.stored_bytes == from.stats().total.stored_bytes);
  CHECK(onto.verify().ok());
  CHECK(home.verify().ok());
}

TEST_CASE("postgres: gc and vacuum give a server store's space back", "[postgres]") {
  colikv::Store s(colikv_test::fresh_pg_store(), child_options());
  const EngineBuffers h = colikv_test::history(colikv_test::tiny_model(), 400, 3);
  s.append("big", h.model, h.tokens.data(), 400, h.source());
  const colikv::StoreStats before = s.stats();
  CHECK(before.file_bytes > 0);
  CHECK(s.gc(1).conversations == std::vector<std::string>{"big"});
  const colikv::VacuumReport v = s.vacuum();
  CHECK(v.file_bytes_after < v.file_bytes_before);
  CHECK(s.stats().total.stored_bytes == 0);
  CHECK(s.tokens("big") == std::vector<int32_t>(h.tokens.begin(), h.tokens.begin() + 400));
}

TEST_CASE("postgres: the C API opens a server store by URI", "[postgres]") {
  const std::string uri = colikv_test::fresh_pg_store();
  colikv_store* s = nullptr;
  REQUIRE(colikv_open(uri.c_str(), COLIKV_CREATE, &s) == COLIKV_OK);
  {
    colikv::Store writer(uri, child_options());
    const EngineBuffers h = colikv_test::history(colikv_test::tiny_model(), 12, 4);
    writer.append("c", h.model, h.tokens.data(), 12, h.source());
  }
  CHECK(colikv_count(s, "c") == 12);  // what another connection committed
  CHECK(colikv_truncate(s, "c", 8) == COLIKV_OK);
  CHECK(colikv_count(s, "c") == 8);
  colikv_close(s);

  std::string wrong = uri;
  const std::string password = password_of(uri);
  wrong.replace(wrong.find(password), password.size(), "wrong-password");
  s = nullptr;
  CHECK(colikv_open(wrong.c_str(), COLIKV_CREATE, &s) == COLIKV_ERR_IO);
  const std::string msg = colikv_errmsg(s);
  CHECK(msg.find("127.0.0.1") != std::string::npos);
  CHECK(msg.find("wrong-password") == std::string::npos);
  colikv_close(s);
}

TEST_CASE("postgres: every colikv command takes a server store", "[postgres]") {
  colikv_test::TempDir dir;
  const std::string uri = colikv_test::fresh_pg_store();
  const std::string password = password_of(uri);
  const std::string sample = std::string(COLIKV_SAMPLE_DIR) + "/glm_tiny_nodsa_51.coli_kv";
  const std::string prompt = dir.file("prompt.txt");
  colikv_test::write_file(prompt, "1 2 3\n");
  const std::vector<std::vector<std::string>> commands = {
      {"import", uri, sample, "--id", "s"},
      {"ls", uri, "--json"},
      {"info", uri, "s", "--json"},
      {"export", uri, "s", dir.file("out.coli_kv")},
      {"verify", uri, "--json"},
      {"stats", uri, "--json"},
      {"fork", uri, "s", "f", "--at", "20"},
      {"truncate", uri, "f", "10"},
      {"rename", uri, "f", "g"},
      {"match", uri, "--model-of", "s", "--tokens", prompt, "--json"},
      {"gc", uri, "--max-bytes", "1000000000"},
      {"rm", uri, "g"},
      {"vacuum", uri},
  };
  for (const auto& args : commands) {
    const colikv_test::Run r = colikv_test::tool(args);
    INFO(args[0] << ": " << r.err);
    CHECK(r.code == 0);
    CHECK(r.out.find(password) == std::string::npos);
    CHECK(r.err.find(password) == std::string::npos);
  }
  CHECK(colikv_test::read_file(dir.file("out.coli_kv")) == colikv_test::read_file(sample));
  const colikv_test::Run missing = colikv_test::tool({"info", uri, "nobody"});
  CHECK(missing.code != 0);
  CHECK(missing.err.find(password) == std::string::npos);
}
