// The PrefixIndex (catalog.h) over chunk_meta's indexes, with its statements
// prepared once per store.
#ifndef COLIKV_SRC_SQLITE_SQLITE_PREFIX_INDEX_H
#define COLIKV_SRC_SQLITE_SQLITE_PREFIX_INDEX_H

#include "catalog.h"
#include "sqlite/sqlite_statement_cache.h"

namespace colikv {
namespace detail {

// The first evicted entry of a chunk list (shared with the catalog's own).
extern const char* const kFirstEvictedSql;

// Binds the chain hash before a chunk, or for none (position 0) the tenant's
// anchor (tenant_anchor: a zero-length blob for the default tenant), as
// chunk_meta.prev_hash stores it.
void bind_prev(SQLite::Statement& q, int index, const ChunkHash* prev, const std::string& anchor);

class SqlitePrefixIndex : public PrefixIndex {
 public:
  // Over the conversations of tenant tenant_id, whose regions at position 0
  // chunk_meta indexes after `anchor`.
  SqlitePrefixIndex(StatementCache& cache, int64_t tenant_id, std::string anchor)
      : cache_(cache), tenant_id_(tenant_id), anchor_(std::move(anchor)) {}

  std::optional<std::string> next_precision(int64_t model_id, const std::string& after) override;
  bool chain_stored(int64_t model_id, const ChunkHash& chain) override;
  bool follower_in_range(int64_t model_id, const std::string& precision, const ChunkHash* prev,
                         const std::string& from, const std::string& to) override;
  bool follower_equal(int64_t model_id, const std::string& precision, const ChunkHash* prev,
                      const std::string& exact) override;
  std::optional<ChainEntry> chain_at(int64_t conversation_id, int64_t seq) override;
  std::optional<std::string> indexed_tokens(int64_t chunk_id, int64_t model_id, const std::string& precision,
                                            const ChunkHash* prev) override;
  std::vector<ListedTokens> token_lists_from(int64_t conversation_id, int64_t seq, int64_t limit) override;
  std::optional<int64_t> first_evicted_pos(int64_t conversation_id, int64_t end_pos) override;
  std::optional<std::pair<int64_t, int64_t>> last_used(const std::string& name) override;
  void visit_recent(int64_t limit, const ConversationVisitor& f) override;
  void visit_users_of_chain(int64_t model_id, const ChunkHash& chain, int64_t seq,
                            const ConversationVisitor& f) override;
  void visit_users_of_prefix(int64_t model_id, const std::string& precision, const ChunkHash* prev,
                             const std::string& from, const std::string& to, const std::string& exact, int64_t seq,
                             const ConversationVisitor& f) override;

 private:
  StatementCache& cache_;
  int64_t tenant_id_;
  std::string anchor_;
};

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_SQLITE_SQLITE_PREFIX_INDEX_H
