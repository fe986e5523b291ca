// A turn (turn_edit.h) on SQLite: one write transaction, or, for a turn of
// several chunks large enough that holding the write lock for all of them
// would keep other writers out for long, objects first (docs/design.md,
// "Objects first"): each chunk in a short write transaction of its own, held
// by this writer (sqlite_held.cpp), then one transaction that links them all,
// the turn's one commit at the store's level.
#include <sqlite3.h>

#include "sqlite/sqlite_catalog.h"
#include "sqlite/sqlite_util.h"

namespace colikv {
namespace detail {

namespace {

// An append whose new chunks hold less than this (raw) keeps one
// transaction: its lock is short already, and the chunk phase's extra
// commits would add to its fixed cost.
constexpr int64_t kObjectsFirstMinBytes = int64_t{1} << 20;

}  // namespace

int64_t& objects_first_min_bytes() {
  static int64_t bytes = kObjectsFirstMinBytes;
  return bytes;
}

TurnResult SqliteCatalog::apply(const TurnEdit& edit, const std::string& what) {
  if (!edit.savepoint) {  // in the caller's transaction, rolled back whole if it fails
    if (sqlite3_get_autocommit(db_.getHandle()) != 0)
      throw Error(ErrorCode::kInternal, what + ": an edit without a savepoint outside a write transaction");
    return link_turn(edit, what, nullptr);
  }
  if (edit.chunks && edit.chunks->size() > 1 && edit.chunks->raw_bytes() >= objects_first_min_bytes() &&
      can_hold_chunks())
    return apply_objects_first(edit, what);
  if (edit.write_bytes >= 0) wait_before_write(edit.write_bytes);
  const auto txn = begin(Access::kWrite, what);
  TurnResult r = link_turn(edit, what, nullptr);
  txn->commit();
  return r;
}

TurnResult SqliteCatalog::link_turn(const TurnEdit& edit, const std::string& what, const Held* held) {
  // A new conversation's name is checked by its INSERT, which finds it
  // taken: a statement less than looking it up first.
  if (!edit.create || edit.remove) check_turn_conversation(*this, edit, what);
  if (edit.remove) {  // of no model: none is looked up
    remove_conversation(edit.conversation_id);
    free_unused_chunks(edit.free);
    if (edit.finish) edit.finish(edit.conversation_id);
    return TurnResult{edit.conversation_id, {}};
  }
  const int64_t model_id = turn_model_id(*this, edit, what);
  TurnResult r;
  if (edit.create) {
    NewConversation c = *edit.create;
    c.model_id = model_id;
    r.conversation_id = insert_conversation(c, edit.count, edit.now_ms, edit.used);
    if (r.conversation_id == 0) throw_name_taken(what);
  } else if (edit.fork) {
    r.conversation_id = insert_fork(*edit.fork);
  } else {
    r.conversation_id = edit.conversation_id;
  }
  const int64_t conv = r.conversation_id;
  if (edit.unlink_from >= 0) unlink_from(conv, edit.unlink_from);
  for (const TurnLink& l : edit.links) link_chunk(conv, l.seq, l.chunk_id);
  if (held) {
    // In the link's transaction: the held chunks are still this writer's
    // and the content they were, get their index rows, and are let go.
    check_held(held->ids, held->records, what);
    for (size_t i = 0; i < held->ids.size(); ++i) {
      index_chunk(held->ids[i], held->records[i]);
      link_chunk(conv, held->seqs[i], held->ids[i]);
    }
    release_held(held->ids);
    r.chunk_ids = held->ids;
  } else if (edit.chunks) {
    int64_t raw = 0;
    while (edit.chunks->next(raw)) {  // stored and linked as each encoding comes in
      const NewChunkLink c = edit.chunks->store(*this, model_id, nullptr);
      link_chunk(conv, c.seq, c.chunk_id);
      r.chunk_ids.push_back(c.chunk_id);
      edit.chunks->stored();
    }
  }
  if (edit.count && !edit.create) set_count(conv, *edit.count, edit.now_ms, edit.used);  // a new one has it
  if (edit.touch_parent) touch_used(edit.conversation_id, edit.now_ms);
  // A replaced chunk stays when it is linked still: by another conversation,
  // or by this one when the same content was re-saved into it.
  free_unused_chunks(edit.free);
  if (edit.finish) edit.finish(conv);
  return r;
}

TurnResult SqliteCatalog::apply_objects_first(const TurnEdit& edit, const std::string& what) {
  struct Phase {  // the holds go when the turn fails before its link commits
    SqliteCatalog& c;
    bool linked = false;
    ~Phase() {
      c.end_chunk_phase();
      if (!linked) c.drop_held();
    }
  } phase{*this};
  begin_chunk_phase(what);
  Held held;
  int64_t model_id = 0;
  int64_t raw = 0;
  while (edit.chunks->next(raw)) {
    wait_before_write(raw);
    const auto txn = begin(Access::kWrite, what);
    if (model_id == 0) model_id = turn_model_id(*this, edit, what);
    ChunkRecord record;
    const NewChunkLink c = edit.chunks->store(*this, model_id, &record);
    hold_chunk(c.chunk_id);
    txn->commit();
    chunk_committed();
    held.ids.push_back(c.chunk_id);
    held.records.push_back(std::move(record));
    held.seqs.push_back(c.seq);
    edit.chunks->stored();
  }
  end_chunk_phase();
  wait_before_write(0);
  TurnEdit link = edit;  // rows only now: the chunks are stored
  link.chunks = nullptr;
  link.model_id = model_id;
  const auto txn = begin(Access::kWrite, what);
  TurnResult r = link_turn(link, what, &held);
  txn->commit();
  phase.linked = true;
  return r;
}

}  // namespace detail
}  // namespace colikv
