// The steps of applying a turn (turn_edit.h) that read the same on every
// backend: through the catalog's own calls, in the write transaction that
// applies the edit.
#include "catalog/turn_edit.h"

#include "catalog/catalog.h"
#include "colikv/error.h"

namespace colikv {
namespace detail {

void check_turn_conversation(Catalog& catalog, const TurnEdit& edit, const std::string& what) {
  if (edit.remove && (edit.create || edit.fork || edit.chunks || !edit.links.empty() || edit.unlink_from >= 0 ||
                      edit.count))
    throw Error(ErrorCode::kInternal, what + ": a removal's edit holds another change too");
  const std::optional<ConversationRow> now = catalog.find_conversation(edit.name);
  if (edit.create) {
    if (now) throw_name_taken(what);
    return;
  }
  if (!now || now->id != edit.conversation_id || now->generation != edit.generation)
    throw Error(ErrorCode::kConflict, what + ": another writer changed the conversation meanwhile; reload and retry");
  if (edit.fork && catalog.find_conversation(edit.fork->name))
    throw Error(ErrorCode::kConflict, what + ": cannot fork into '" + edit.fork->name +
                                          "': a conversation with this id exists already");
}

void throw_name_taken(const std::string& what) {
  throw Error(ErrorCode::kConflict, what + ": a conversation with this id exists already (another writer "
                                           "created it meanwhile)");
}

int64_t turn_model_id(Catalog& catalog, const TurnEdit& edit, const std::string& what) {
  // colikv never changes or deletes a model row once inserted: the one the
  // store's snapshot found stands, without another lookup.
  if (edit.model_id != 0) return edit.model_id;
  const std::string text = edit.model.to_string();
  std::optional<int64_t> id = catalog.find_model_id(text);
  if (!id) {
    catalog.insert_model(edit.model, edit.chunk_tokens, edit.now_ms);
    id = catalog.find_model_id(text);
    if (!id) throw Error(ErrorCode::kCorrupt, what + ": the model row just stored is missing");
    return *id;
  }
  const std::optional<StoredModel> m = catalog.read_model(*id);
  if (!m || m->chunk_tokens != edit.chunk_tokens)
    throw Error(ErrorCode::kConflict, what + ": the model's chunk size was set by another writer meanwhile; retry");
  return *id;
}

}  // namespace detail
}  // namespace colikv
