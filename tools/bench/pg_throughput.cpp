// pg-throughput: K writers of their own conversations on PostgreSQL against
// K plain libpq clients inserting the same payload bytes.
#include <atomic>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <thread>

#include "bench.h"
#include "bench_access.h"

#if COLIKV_WITH_POSTGRES
#include <libpq-fe.h>
#endif

namespace colikv_bench {

#if COLIKV_WITH_POSTGRES
namespace {

// The payloads conversation `name` stores, each turn's apart (by the position
// its chunk starts at), on a libpq connection of the benchmark's own.
// Returns their bytes.
int64_t stored_payloads(PgSession& conn, const std::string& name, int64_t turn, int64_t turns,
                        std::vector<std::vector<std::string>>& by_turn) {
  by_turn.assign(static_cast<size_t>(turns), {});
  const char* v[1] = {name.c_str()};
  PGresult* r = PQexecParams(conn.handle(),
                             "SELECT ch.first_pos::text, ch.payload FROM conversations c JOIN conversation_chunks cc "
                             "ON cc.conversation_id = c.conversation_id JOIN chunks ch ON ch.chunk_id = cc.chunk_id "
                             "WHERE c.name = $1 ORDER BY cc.seq",
                             1, nullptr, v, nullptr, nullptr, 1);
  if (PQresultStatus(r) != PGRES_TUPLES_OK) {
    const std::string why = PQresultErrorMessage(r);
    PQclear(r);
    throw colikv::Error(colikv::ErrorCode::kIO, "bench: reading payloads: " + why);
  }
  int64_t stored = 0;
  for (int i = 0; i < PQntuples(r); ++i) {
    // In a binary result a text value is its characters, followed by a zero byte.
    const int64_t first_pos = std::atoll(PQgetvalue(r, i, 0));
    const size_t t = static_cast<size_t>(std::min<int64_t>(first_pos / turn, turns - 1));
    by_turn[t].emplace_back(PQgetvalue(r, i, 1), static_cast<size_t>(PQgetlength(r, i, 1)));
    stored += PQgetlength(r, i, 1);
  }
  PQclear(r);
  return stored;
}

// K plain libpq clients, each inserting `turns[k]` (one transaction each, the
// payloads as binary bytea parameters) into a plain table: the server's own
// cost of storing the bytes colikv stored. Returns the wall time in seconds.
double plain_bytea_inserts(const std::string& uri, const std::vector<std::vector<std::vector<std::string>>>& turns) {
  {
    PgSession conn(uri);
    conn.exec("DROP TABLE IF EXISTS plain_payloads; CREATE TABLE plain_payloads (id bigserial PRIMARY KEY, "
              "payload bytea NOT NULL); ALTER TABLE plain_payloads ALTER COLUMN payload SET STORAGE EXTERNAL",
              "bench: plain table");
  }
  std::vector<PGconn*> conns;
  for (size_t k = 0; k < turns.size(); ++k) conns.push_back(PQconnectdb(uri.c_str()));
  std::atomic<bool> failed{false};
  const auto t0 = Clock::now();
  std::vector<std::thread> ts;
  for (size_t k = 0; k < turns.size(); ++k)
    ts.emplace_back([&, k] {
      PGconn* c = conns[k];
      if (PQstatus(c) != CONNECTION_OK) return void(failed = true);
      for (const auto& turn : turns[k]) {
        PQclear(PQexec(c, "BEGIN"));
        for (const std::string& payload : turn) {
          const char* v[1] = {payload.data()};
          const int len[1] = {static_cast<int>(payload.size())}, fmt[1] = {1};
          PGresult* r = PQexecParams(c, "INSERT INTO plain_payloads (payload) VALUES ($1)", 1, nullptr, v, len, fmt, 1);
          if (PQresultStatus(r) != PGRES_COMMAND_OK) failed = true;
          PQclear(r);
        }
        PQclear(PQexec(c, "COMMIT"));
      }
    });
  for (auto& t : ts) t.join();
  const double secs = since(t0);
  for (PGconn* c : conns) PQfinish(c);
  if (failed) throw std::runtime_error("bench: the plain bytea inserts failed");
  return secs;
}

}  // namespace
#endif

// pg-throughput: K writers (threads, each with its own Store and connection)
// append `turns` 256-token turns of 78x576 to a conversation of their own;
// against K plain libpq clients inserting the same payload bytes as bytea.
void bench_pg_throughput(const Config& cfg, const Shape& big) {
#if !COLIKV_WITH_POSTGRES
  (void)cfg, (void)big;
  throw std::runtime_error("--only pg-throughput needs the PostgreSQL backend");
#else
  if (cfg.pg.empty()) throw std::runtime_error("--only pg-throughput needs --pg URI");
  const int64_t turn = cfg.turn_set ? cfg.turn : 256, turns = cfg.quick ? 2 : 4, n = turn * turns;
  // One set of values; each writer its own token ids, so that no two share a chunk.
  Engine src(big.m, n);
  src.compute(0, n, 21, Kind::kFull);
  const double record_mb = static_cast<double>(big.m.record_bytes()) / 1e6;
  for (int k : {1, 2, 4}) {
    std::vector<std::vector<int32_t>> tokens(static_cast<size_t>(k));
    for (int w = 0; w < k; ++w) {
      Engine t(big.m, n);
      t.compute(0, n, 100 + static_cast<uint64_t>(w), Kind::kFull);
      tokens[static_cast<size_t>(w)] = t.tokens;
    }
    const std::string name = "throughput" + std::to_string(k);
    const std::string uri = pg_store(cfg, name);
    { colikv::Store warm(uri, store_options(colikv::Synchronous::kFull));  // the model row
      warm.append("warm", big.m, tokens[0].data(), 1, src.source()); }
    std::vector<std::unique_ptr<colikv::Store>> stores;
    for (int w = 0; w < k; ++w)
      stores.push_back(std::make_unique<colikv::Store>(uri, store_options(colikv::Synchronous::kFull)));
    // The writers' round trips to the server over their turns, and their links'.
    auto trips = [&](int64_t (*count)(colikv::Store&)) {
      int64_t sum = 0;
      for (auto& s : stores) sum += count(*s);
      return sum;
    };
    const int64_t trips0 = trips(access::round_trips), link0 = trips(access::link_round_trips);
    std::atomic<bool> failed{false};
    const auto t0 = Clock::now();
    std::vector<std::thread> ts;
    for (int w = 0; w < k; ++w)
      ts.emplace_back([&, w] {
        try {
          for (int64_t len = turn; len <= n; len += turn)
            stores[static_cast<size_t>(w)]->append("w" + std::to_string(w), big.m, tokens[static_cast<size_t>(w)].data(),
                                                   len, src.source());
        } catch (const std::exception& e) {
          std::fprintf(stderr, "pg-throughput writer %d: %s\n", w, e.what());
          failed = true;
        }
      });
    for (auto& t : ts) t.join();
    const double secs = since(t0);
    if (failed) throw std::runtime_error("bench: a pg-throughput writer failed");
    const double turns_written = static_cast<double>(k * turns);
    const double turn_trips = static_cast<double>(trips(access::round_trips) - trips0) / turns_written;
    const double link_trips = static_cast<double>(trips(access::link_round_trips) - link0) / turns_written;
    stores.clear();
    // The payloads each writer stored, turn by turn, for the plain clients.
    std::vector<std::vector<std::vector<std::string>>> plain(static_cast<size_t>(k));
    int64_t stored = 0;
    {
      PgSession conn(uri);
      for (int w = 0; w < k; ++w)
        stored += stored_payloads(conn, "w" + std::to_string(w), turn, turns, plain[static_cast<size_t>(w)]);
    }
    const double plain_secs = plain_bytea_inserts(uri, plain);
    drop_pg_store(cfg, name);
    const double records = static_cast<double>(k * n) * record_mb;
    const std::string kw = std::to_string(k) + (k == 1 ? " writer" : " writers");
    add({"pgthru", big.name, "full", "f32", "FULL", "K=" + std::to_string(k) + " records", "MB/s", records / secs,
         records / plain_secs, true, "", -1,
         kw + ", " + std::to_string(turns) + " turns of " + std::to_string(turn) + " each; baseline: plain bytea clients"});
    add({"pgthru", big.name, "full", "f32", "FULL", "K=" + std::to_string(k) + " stored", "MB/s", stored / 1e6 / secs,
         stored / 1e6 / plain_secs, true, "", -1,
         "the same payload bytes, one transaction per turn each"});
    // The mean over the writers' turns, each first one preparing its connection's statements.
    char link_note[64];
    std::snprintf(link_note, sizeof link_note, "of which the link: %.1f", link_trips);
    add({"pgthru", big.name, "full", "f32", "FULL", "K=" + std::to_string(k) + " round trips a turn", "", turn_trips, 0,
         false, "", -1, link_note});
  }
#endif
}

}  // namespace colikv_bench
