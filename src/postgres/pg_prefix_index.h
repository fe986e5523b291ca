// The PrefixIndex (catalog.h) over a PgCatalog's connection.
#ifndef COLIKV_SRC_POSTGRES_PG_PREFIX_INDEX_H
#define COLIKV_SRC_POSTGRES_PG_PREFIX_INDEX_H

#include <string>

#include "catalog.h"
#include "postgres/pg_connection.h"

namespace colikv {
namespace detail {

// The prefix lookup's queries (prefix_match.cpp) on a PgCatalog's connection.
class PgPrefixIndex : public PrefixIndex {
 public:
  // Over the conversations of tenant tenant_id, whose regions at position 0
  // chunk_meta indexes after `anchor`.
  PgPrefixIndex(PgConnection& conn, int64_t tenant_id, const std::string& anchor)
      : conn_(conn), tenant_id_(tenant_id), anchor_(anchor) {}
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
  // One statement each, whatever the prompt's length: the server walks.
  int64_t stored_chain_prefix(int64_t model_id, const std::vector<ChunkHash>& chains) override;
  int64_t longest_follower(int64_t model_id, const std::string& precision, const ChunkHash* prev,
                           const int32_t* region, int64_t r) override;
  // Each probe is a round trip: straight to the indexed join.
  int recent_probe() const override { return 0; }
  // A lookup in two statements: the model and its precisions, then every
  // walk, the users of what it matched and the rows that check them.
  bool start_lookup(const std::string& signature, LookupStart& out) override;
  bool read_lookup(const LookupRequest& req, LookupAnswers& out) override;

 private:
  PgConnection& conn_;
  int64_t tenant_id_;
  std::string anchor_;  // add_bytes does not copy: kept here
};

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_POSTGRES_PG_PREFIX_INDEX_H
