// The PrefixIndex (prefix_index.h) over chunk_meta's indexes, with its
// statements prepared once per store: each question answered by a few local
// queries in one read transaction.
#ifndef COLIKV_SRC_SQLITE_SQLITE_PREFIX_INDEX_H
#define COLIKV_SRC_SQLITE_SQLITE_PREFIX_INDEX_H

#include "catalog/catalog.h"
#include "sqlite/sqlite_query.h"
#include "sqlite/sqlite_statement_cache.h"

namespace colikv {
namespace detail {

// The first evicted entry of a chunk list (shared with the catalog's own).
extern const char* const kFirstEvictedSql;

// Binds the chain hash before a chunk, or for none (position 0) the tenant's
// anchor (tenant_anchor: a zero-length blob for the default tenant), as
// chunk_meta.prev_hash stores it.
void bind_prev(Query& q, int index, const ChunkHash* prev, const std::string& anchor);

class SqlitePrefixIndex : public PrefixIndex {
 public:
  // Over the conversations of tenant tenant_id, whose regions at position 0
  // chunk_meta indexes after `anchor`; a lookup reads in one of catalog's
  // read transactions.
  SqlitePrefixIndex(Catalog& catalog, StatementCache& cache, int64_t tenant_id, std::string anchor)
      : catalog_(catalog), cache_(cache), tenant_id_(tenant_id), anchor_(std::move(anchor)) {}

  std::unique_ptr<Lookup> lookup(const std::string& signature, const std::string& what) override;
  std::optional<int64_t> first_evicted_pos(int64_t conversation_id, int64_t end_pos) override;

  // The queries a lookup's answers are made of (sqlite_prefix_index.cpp).
  std::optional<std::string> next_precision(int64_t model_id, const std::string& after);
  bool chain_stored(int64_t model_id, const ChunkHash& chain);
  int64_t longest_follower(int64_t model_id, const std::string& precision, const ChunkHash* prev,
                           const int32_t* region, int64_t r);
  Holders holders(int64_t model_id, const std::string& precision, const Step& step, int64_t skip, int64_t limit);

 private:
  // The cache's statement of `sql`, its errors named by the catalog's errors().
  Query cached(std::string_view sql);
  bool follows(int64_t model_id, const std::string& precision, const ChunkHash* prev, const TokenRegion& region);
  bool uses(int64_t conversation_id, int64_t model_id, const std::string& precision, const Step& step);
  std::optional<std::vector<Holder>> recent_users(int64_t model_id, const std::string& precision, const Step& step,
                                                  int64_t want);
  std::optional<ChainEntry> chain_at(int64_t conversation_id, int64_t seq);
  std::vector<ListedTokens> lists_from(int64_t conversation_id, int64_t model_id, const std::string& precision,
                                       const Step& step);

  Catalog& catalog_;
  StatementCache& cache_;
  int64_t tenant_id_;
  std::string anchor_;
};

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_SQLITE_SQLITE_PREFIX_INDEX_H
