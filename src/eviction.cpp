// Eviction of KV data under a byte budget: Store::gc, the budget enforced
// after each append (Options::max_store_bytes), loading an evicted
// conversation (kEvicted with its token ids), Store::vacuum.
//
// An evicted chunk keeps its row and token ids; only chunks.payload becomes
// NULL (and chunk_meta.payload_bytes 0). A conversation is evicted when one of
// its chunks is: that state is derived from the chunks, never stored apart,
// so it cannot disagree with them. A chunk's payload is freed only when every
// conversation that uses it is being evicted.
#include "eviction.h"

#include <sqlite3.h>

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "sqlite/open_store.h"
#include "sqlite_util.h"
#include "store_impl.h"

namespace colikv {

using detail::SqlTransaction;
using detail::with_context;

namespace {

// A zero-length blob marks "no predecessor" (a chunk at position 0); binding a
// null pointer would bind NULL instead.
const uint8_t kNoPrev = 0;

void bind_prev(SQLite::Statement& q, int index, int64_t first_pos, const detail::ChunkHash& prev) {
  if (first_pos == 0)
    q.bind(index, &kNoPrev, 0);
  else
    q.bind(index, prev.data(), static_cast<int>(prev.size()));
}

}  // namespace

namespace detail {

void record_chunk_meta(SQLite::Database& db, int64_t chunk_id, const ChunkMeta& meta) {
  SQLite::Statement q(db,
                      "INSERT OR REPLACE INTO chunk_meta (chunk_id, model_id, precision, prev_hash, tokens, payload_bytes, "
                      "chain_hash, digest) VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
  q.bind(1, chunk_id);
  q.bind(2, meta.model_id);
  q.bind(3, meta.precision);
  bind_prev(q, 4, meta.first_pos, meta.prev);
  q.bind(5, meta.tokens_json);
  q.bind(6, meta.payload_bytes);
  q.bind(7, meta.chain.data(), static_cast<int>(meta.chain.size()));
  q.bind(8, meta.digest.data(), static_cast<int>(meta.digest.size()));
  q.exec();
}

void record_chunk_payload(SQLite::Database& db, int64_t chunk_id, const ChunkMeta& meta) {
  SQLite::Statement u(db, "UPDATE chunk_meta SET payload_bytes = ? WHERE chunk_id = ?");
  u.bind(1, meta.payload_bytes);
  u.bind(2, chunk_id);
  if (u.exec() == 0) record_chunk_meta(db, chunk_id, meta);
}

void throw_if_evicted(Store::Impl& s, const ScanStart& st, int32_t* tokens) {
  if (st.n <= 0) return;
  const std::string here = s.where(st.conv.name);
  const int64_t C = st.model.chunk_tokens;
  const int64_t n_chunks = (st.n + C - 1) / C;
  int64_t first_gone = -1;
  with_context(here, [&] {
    SQLite::Statement q(s.db,
                        "SELECT cc.seq FROM conversation_chunks cc JOIN chunks ch INDEXED BY chunks_evicted "
                        "ON ch.chunk_id = cc.chunk_id WHERE cc.conversation_id = ? AND cc.seq < ? AND ch.payload IS NULL "
                        "ORDER BY cc.seq LIMIT 1");
    q.bind(1, st.conv.id);
    q.bind(2, n_chunks);
    if (q.executeStep()) first_gone = q.getColumn(0).getInt64() * C;
  });
  if (first_gone < 0) return;
  int64_t filled = 0;
  if (tokens) {
    with_context(here, [&] {
      SQLite::Statement q(s.db,
                          "SELECT ch.n_tokens, ch.tokens FROM conversation_chunks cc JOIN chunks ch "
                          "ON ch.chunk_id = cc.chunk_id WHERE cc.conversation_id = ? AND cc.seq < ? ORDER BY cc.seq");
      q.bind(1, st.conv.id);
      q.bind(2, n_chunks);
      std::vector<int32_t> t;
      while (q.executeStep() && filled < st.n) {
        SQLite::Column col = q.getColumn(1);
        const char* text = static_cast<const char*>(col.getBlob());
        if (!parse_tokens_json(text ? text : "", static_cast<size_t>(col.getBytes()), t) ||
            static_cast<int64_t>(t.size()) != q.getColumn(0).getInt64())
          throw Error(ErrorCode::kCorrupt, here + ": a chunk's token list is not a JSON array of its token ids");
        const int64_t take = std::min<int64_t>(static_cast<int64_t>(t.size()), st.n - filled);
        std::copy(t.begin(), t.begin() + take, tokens + filled);
        filled += take;
      }
    });
    if (filled != st.n)
      throw Error(ErrorCode::kCorrupt, here + ": its chunks hold " + std::to_string(filled) + " of the " +
                                           std::to_string(st.n) + " token ids its count says");
  }
  throw Error(ErrorCode::kEvicted,
              here + ": its KV data from position " + std::to_string(first_gone) +
                  " on was evicted to keep the store within its byte budget; " +
                  (tokens ? "its " + std::to_string(st.n) + " token ids were returned: " : "") +
                  "load the first " + std::to_string(first_gone) +
                  " positions, recompute the rest and append to re-save it",
              first_gone);
}

EvictionReport evict_to_fit(Store::Impl& s, int64_t max_bytes, int64_t protect_id) {
  EvictionReport r;
  const std::string here = s.where();
  return with_context(here, [&] {
    r.stored_bytes_before = query_int(s.db, "SELECT coalesce(sum(payload_bytes), 0) FROM chunk_meta", here);
    int64_t total = r.stored_bytes_before;
    if (total > max_bytes) {
      // Least recently used first.
      struct Victim {
        int64_t id;
        std::string name;
        std::vector<int64_t> chunks;  // its chunks that still had a payload
      };
      std::vector<Victim> victims;
      std::unordered_map<int64_t, int64_t> holders;  // chunk -> conversations not yet evicted that use it
      std::set<int64_t> freed;
      SQLite::Statement lru(s.db,
                            "SELECT conversation_id, name FROM conversations "
                            "ORDER BY last_used_ms ASC, conversation_id ASC");
      SQLite::Statement its(s.db,
                            "SELECT k.chunk_id, k.payload_bytes FROM conversation_chunks cc JOIN chunk_meta k "
                            "ON k.chunk_id = cc.chunk_id WHERE cc.conversation_id = ? AND k.payload_bytes > 0");
      SQLite::Statement users(s.db, "SELECT count(*) FROM conversation_chunks WHERE chunk_id = ?");
      SQLite::Statement drop(s.db, "UPDATE chunks SET payload = NULL WHERE chunk_id = ?");
      SQLite::Statement drop_meta(s.db, "UPDATE chunk_meta SET payload_bytes = 0 WHERE chunk_id = ?");
      // Stepped lazily: a budget just exceeded costs a few rows, not a list
      // of every conversation. Only chunks change while it is open.
      while (total > max_bytes && lru.executeStep()) {
        const int64_t conv_id = lru.getColumn(0).getInt64();
        if (conv_id == protect_id) continue;
        Victim v{conv_id, lru.getColumn(1).getString(), {}};
        its.bind(1, conv_id);
        std::vector<std::pair<int64_t, int64_t>> present;
        while (its.executeStep()) present.emplace_back(its.getColumn(0).getInt64(), its.getColumn(1).getInt64());
        its.reset();
        for (auto& [chunk_id, bytes] : present) {
          v.chunks.push_back(chunk_id);
          auto h = holders.find(chunk_id);
          if (h == holders.end()) {
            users.bind(1, chunk_id);
            users.executeStep();
            h = holders.emplace(chunk_id, users.getColumn(0).getInt64()).first;
            users.reset();
          }
          if (--h->second > 0) continue;  // a conversation that is kept still uses it
          drop.bind(1, chunk_id);
          drop.exec();
          drop.reset();
          drop_meta.bind(1, chunk_id);
          drop_meta.exec();
          drop_meta.reset();
          freed.insert(chunk_id);
          total -= bytes;
          ++r.chunks;
        }
        victims.push_back(std::move(v));
      }
      lru.reset();
      // A conversation that lost KV data is evicted; its generation changes
      // so that a writer that prepared an append before this sees a conflict.
      SQLite::Statement bump(s.db, "UPDATE conversations SET generation = generation + 1 WHERE conversation_id = ?");
      for (auto& v : victims) {
        bool lost = std::any_of(v.chunks.begin(), v.chunks.end(), [&](int64_t c) { return freed.count(c) > 0; });
        if (!lost) continue;
        r.conversations.push_back(v.name);
        bump.bind(1, v.id);
        bump.exec();
        bump.reset();
      }
    }
    r.stored_bytes_after = total;
    r.freed_bytes = r.stored_bytes_before - total;
    r.fits = total <= max_bytes;
    return r;
  });
}

void fill_eviction_stats(Store::Impl& s, StoreStats& out) {
  const std::string here = s.where();
  out.evicted_chunks =
      query_int(s.db, "SELECT count(*) FROM chunks INDEXED BY chunks_evicted WHERE payload IS NULL", here);
  out.evicted_conversations = query_int(s.db,
                                        "SELECT count(DISTINCT cc.conversation_id) FROM chunks ch INDEXED BY chunks_evicted "
                                        "JOIN conversation_chunks cc ON cc.chunk_id = ch.chunk_id WHERE ch.payload IS NULL",
                                        here);
}

}  // namespace detail

EvictionReport Store::gc(int64_t max_bytes) {
  detail::StoreCall call(*impl_);
  Impl& s = *impl_;
  s.require_writable("gc");
  if (max_bytes < 0)
    throw Error(ErrorCode::kInvalidArgument, s.where() + ": gc: negative byte budget " + std::to_string(max_bytes));
  SqlTransaction txn(s.db, s.where() + ": gc");
  EvictionReport r = detail::evict_to_fit(s, max_bytes, -1);
  txn.commit();
  return r;
}

VacuumReport Store::vacuum() {
  detail::StoreCall call(*impl_);
  Impl& s = *impl_;
  s.require_writable("vacuum");
  VacuumReport r;
  r.file_bytes_before = detail::file_size_or_zero(s.path) + detail::file_size_or_zero(s.path + "-wal");
  detail::exec(s.db, "VACUUM", s.where() + ": vacuum");
  // The rewritten pages are in the WAL: copy them back and shrink both files.
  // A reader that holds an old snapshot may keep the WAL from being reset;
  // that is not an error (the space is given back at a later checkpoint).
  sqlite3_wal_checkpoint_v2(s.db.getHandle(), nullptr, SQLITE_CHECKPOINT_TRUNCATE, nullptr, nullptr);
  r.file_bytes_after = detail::file_size_or_zero(s.path) + detail::file_size_or_zero(s.path + "-wal");
  return r;
}

}  // namespace colikv
