// The PrefixIndex (prefix_index.h) over a PgCatalog's connection.
#ifndef COLIKV_SRC_POSTGRES_PG_PREFIX_INDEX_H
#define COLIKV_SRC_POSTGRES_PG_PREFIX_INDEX_H

#include <string>

#include "catalog/catalog.h"
#include "postgres/pg_connection.h"

namespace colikv {
namespace detail {

// The prefix lookup's questions (prefix_match.cpp) on a PgCatalog's
// connection, each one statement: a lookup is one for the model and its
// precisions, then one for every precision's walk and its first holders.
class PgPrefixIndex : public PrefixIndex {
 public:
  // Over the conversations of tenant tenant_id, whose regions at position 0
  // chunk_meta indexes after `anchor`.
  PgPrefixIndex(PgConnection& conn, int64_t tenant_id, const std::string& anchor)
      : conn_(conn), tenant_id_(tenant_id), anchor_(anchor) {}
  std::unique_ptr<Lookup> lookup(const std::string& signature, const std::string& what) override;
  std::optional<int64_t> first_evicted_pos(int64_t conversation_id, int64_t end_pos) override;

  // The statements of a lookup (pg_prefix_index.cpp).
  std::vector<Walk> walks(int64_t model_id, int64_t chunk_tokens, const std::vector<Precision>& precisions,
                          const int32_t* tokens, int64_t len, int64_t limit);
  Holders holders(int64_t model_id, const std::string& precision, const Step& step, int64_t skip, int64_t limit);

 private:
  PgConnection& conn_;
  int64_t tenant_id_;
  std::string anchor_;  // add_bytes does not copy: kept here
};

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_POSTGRES_PG_PREFIX_INDEX_H
