// A turn (turn_edit.h) on PostgreSQL: one transaction, whose writers run side
// by side (row locks: docs/postgres.md "Concurrent writers"). The new chunks
// are stored as their encodings come in; the chunk list and the count are
// then written by one statement, a single round trip however many entries.
#include <limits>

#include "postgres/pg_catalog.h"

namespace colikv {
namespace detail {

TurnResult PgCatalog::apply(const TurnEdit& edit, const std::string& what) {
  if (!edit.savepoint) {  // in the caller's transaction, rolled back whole if it fails
    if (!writing_)
      throw Error(ErrorCode::kInternal, what + ": an edit without a savepoint outside a write transaction");
    return apply_edit(edit, what);
  }
  const auto txn = begin(Access::kWrite, what);
  TurnResult r = apply_edit(edit, what);
  txn->commit();
  return r;
}

TurnResult PgCatalog::apply_edit(const TurnEdit& edit, const std::string& what) {
  // Locks the conversation (find_conversation in a write transaction): a
  // second writer of it waits here for this one's commit.
  check_turn_conversation(*this, edit, what);
  if (edit.remove) {  // of no model: none is looked up
    remove_conversation(edit.conversation_id);
    free_unused_chunks(edit.free);
    if (edit.finish) edit.finish(edit.conversation_id);
    return TurnResult{edit.conversation_id, {}};
  }
  const int64_t model_id = turn_model_id(*this, edit, what);
  TurnResult r;
  int64_t generation = edit.generation;
  if (edit.create) {
    NewConversation c = *edit.create;
    c.model_id = model_id;
    r.conversation_id = insert_conversation(c);
    generation = -1;  // its own, created just now
  } else if (edit.fork) {
    r.conversation_id = insert_fork(*edit.fork);
    generation = -1;
  } else {
    r.conversation_id = edit.conversation_id;
  }
  std::vector<TurnLink> links = edit.links;
  if (edit.chunks) {
    int64_t raw = 0;
    while (edit.chunks->next(raw)) {
      const NewChunkLink c = edit.chunks->store(*this, model_id, nullptr);
      links.push_back({c.seq, c.chunk_id});
      r.chunk_ids.push_back(c.chunk_id);
      edit.chunks->stored();
    }
  }
  link_turn(r.conversation_id, edit, links, generation);
  if (edit.touch_parent) touch_used(edit.conversation_id, edit.now_ms);
  // A replaced chunk stays when it is linked still: by another conversation,
  // or by this one when the same content was re-saved into it.
  free_unused_chunks(edit.free);
  if (edit.finish) edit.finish(r.conversation_id);
  return r;
}

void PgCatalog::link_turn(int64_t conversation_id, const TurnEdit& edit, const std::vector<TurnLink>& links,
                          int64_t generation) {
  if (edit.unlink_from < 0 && links.empty() && !edit.count) return;
  std::vector<int64_t> seqs, ids;
  for (const TurnLink& l : links) {
    seqs.push_back(l.seq);
    ids.push_back(l.chunk_id);
  }
  PgParams p;
  p.add(conversation_id).add(edit.unlink_from < 0 ? std::numeric_limits<int64_t>::max() : edit.unlink_from);
  p.add(id_array(seqs)).add(id_array(ids));
  // The entries dropped and those written are different rows (a statement
  // may not change one row twice): an entry re-linked is updated in place.
  std::string sql =
      "WITH dropped AS (DELETE FROM conversation_chunks WHERE conversation_id = $1 AND seq >= $2 "
      "AND NOT (seq = ANY($3::bigint[]))), "
      "linked AS (INSERT INTO conversation_chunks (conversation_id, seq, chunk_id) "
      "SELECT $1, l.seq, l.chunk_id FROM unnest($3::bigint[], $4::bigint[]) AS l(seq, chunk_id) "
      "ON CONFLICT (conversation_id, seq) DO UPDATE SET chunk_id = excluded.chunk_id) ";
  if (edit.count) {
    p.add(*edit.count).add(edit.now_ms).add(static_cast<int64_t>(edit.used ? 1 : 0)).add(generation);
    sql += "UPDATE conversations SET token_count = $5, generation = generation + 1, updated_ms = $6, "
           "last_used_ms = CASE WHEN $7::bigint <> 0 THEN " COLIKV_PG_SERVER_MS " ELSE last_used_ms END "
           "WHERE conversation_id = $1 AND ($8::bigint < 0 OR generation = $8) RETURNING generation";
  } else {
    sql += "SELECT 1";
  }
  const int64_t before = conn_.round_trips();
  const PgRows r = run(sql.c_str(), p, "linking chunks");
  link_round_trips_ += conn_.round_trips() - before;
  if (edit.count && r.size() == 0)
    conn_.raise(PgError(ErrorCode::kConflict, "another writer changed the conversation meanwhile; reload and retry"));
}

}  // namespace detail
}  // namespace colikv
