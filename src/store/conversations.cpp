// What a store says of its conversations (count, exists, info, list,
// conversation_count, stats), and the calls that change only a
// conversation's row (rename, set_title, set_metadata).
#include "store/store_impl.h"

#include <algorithm>

#include "catalog/backend_error.h"
#include "core/text_argument.h"
#include "store/upkeep/eviction.h"
#include "store/store_call.h"

namespace colikv {

using detail::ModelRow;
using detail::now_ms;

int64_t Store::count(const std::string& id) {
  return detail::StoreCall::run(*impl_, id, [&](Store::Impl& s) REQUIRES(s.mu) {
    auto c = s.find_conversation(id);
    return c ? c->count : 0;
  });
}

bool Store::exists(const std::string& id) {
  return detail::StoreCall::run(*impl_, id, [&](Store::Impl& s) REQUIRES(s.mu) {
    return s.find_conversation(id).has_value();
  });
}

namespace {

void update_text_column(Store::Impl& s, const std::string& id, detail::ConversationText column,
                        const std::string& value) REQUIRES(s.mu) {
  detail::require_no_nul(id, "conversation id", s.where());
  detail::require_no_nul(value, detail::text_column_name(column), s.where());
  const std::string here = s.where(id);
  s.require_writable(std::string("set ") + detail::text_column_name(column) + " of conversation '" + id + "'");
  const auto txn = s.catalog().begin(detail::Catalog::Access::kWrite, here);
  if (!s.catalog().set_text(id, column, value, now_ms()))
    throw Error(ErrorCode::kNotFound, here + ": no such conversation");
  txn->commit();
}

}  // namespace

void Store::rename(const std::string& old_id, const std::string& new_id) {
  detail::StoreCall::run(*impl_, [&](Store::Impl& s) REQUIRES(s.mu) {
    if (new_id.empty()) throw Error(ErrorCode::kInvalidArgument, s.where(old_id) + ": the new id is empty");
    if (old_id == new_id) {
      s.get_conversation(old_id);
      return;
    }
    s.require_writable("rename conversation '" + old_id + "'");
    s.get_conversation(old_id);
    // Checked here for a clear message; the UNIQUE constraint catches a race.
    if (s.find_conversation(new_id))
      throw Error(ErrorCode::kConflict, s.where(new_id) + ": cannot rename '" + old_id + "' to it: the id is taken");
    update_text_column(s, old_id, detail::ConversationText::kName, new_id);
  });
}

void Store::set_title(const std::string& id, const std::string& title) {
  detail::StoreCall::run(*impl_, id, [&](Store::Impl& s) REQUIRES(s.mu) {
    update_text_column(s, id, detail::ConversationText::kTitle, title);
  });
}

void Store::set_metadata(const std::string& id, const std::string& metadata_json) {
  detail::StoreCall::run(*impl_, id, [&](Store::Impl& s) REQUIRES(s.mu) {
    if (!s.is_json(metadata_json)) throw Error(ErrorCode::kInvalidArgument, s.where(id) + ": metadata is not valid JSON text");
    update_text_column(s, id, detail::ConversationText::kMetadata, metadata_json);
  });
}

namespace {

// Sizes derived from a store's counts: a hostile count (one no colikv
// writes) must not overflow them, which would be undefined and then shown.
int64_t checked_product(int64_t a, int64_t b, const std::string& what) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out))
    throw Error(ErrorCode::kCorrupt, what + ": " + std::to_string(a) + " tokens of " + std::to_string(b) +
                                         " bytes overflow a 64-bit size (a count no colikv writes)");
  return out;
}

int64_t checked_sum(int64_t a, int64_t b, const std::string& what) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out))
    throw Error(ErrorCode::kCorrupt, what + ": the totals overflow a 64-bit size (counts no colikv writes)");
  return out;
}

ConversationInfo info_from_row(Store::Impl& s, detail::ConversationInfoRow&& r) REQUIRES(s.mu) {
  ConversationInfo i;
  i.id = std::move(r.name);
  ModelRow m = s.model_by_id(r.model_id);
  i.model = m.sig;
  i.tokens = r.count;
  i.title = std::move(r.title);
  i.metadata = std::move(r.metadata);
  i.parent = std::move(r.parent);
  i.forked_at = r.forked_at;
  i.created_ms = r.created_ms;
  i.updated_ms = r.updated_ms;
  i.last_used_ms = r.last_used_ms;
  i.stored_bytes = r.stored_bytes;
  i.raw_bytes = checked_product(i.tokens, m.sig.record_bytes(), s.where(i.id));
  i.evicted = r.evicted;
  i.precision = std::move(r.precision);
  return i;
}

}  // namespace

ConversationInfo Store::info(const std::string& id) {
  return detail::StoreCall::run(*impl_, id, [&](Store::Impl& s) REQUIRES(s.mu) {
    detail::require_no_nul(id, "conversation id", s.where());
    // No transaction (one statement reads the row): the conversation names its errors.
    const detail::ErrorContext::Scope named(s.catalog().errors(), s.where(id), detail::Reading::kStoredRows);
    std::optional<detail::ConversationInfoRow> row = s.catalog().conversation_info(id);
    if (!row) throw Error(ErrorCode::kNotFound, s.where(id) + ": no such conversation");
    return info_from_row(s, std::move(*row));
  });
}

std::vector<ConversationInfo> Store::list(const ListOptions& options) {
  return detail::StoreCall::run(*impl_, [&](Store::Impl& s) REQUIRES(s.mu) {
    const detail::ErrorContext::Scope named(s.catalog().errors(), s.where(), detail::Reading::kStoredRows);
    std::vector<ConversationInfo> out;
    for (auto& row : s.catalog().list_conversations(options.limit, std::max<int64_t>(0, options.offset)))
      out.push_back(info_from_row(s, std::move(row)));
    return out;
  });
}

int64_t Store::conversation_count() {
  return detail::StoreCall::run(*impl_, [&](Store::Impl& s) REQUIRES(s.mu) {
    return s.catalog().conversation_count();
  });
}

StoreStats Store::stats() {
  return detail::StoreCall::run(*impl_, [&](Store::Impl& s) REQUIRES(s.mu) {
    StoreStats out;
    const auto snapshot = s.catalog().begin(detail::Catalog::Access::kRead, s.where());
    const detail::TenantUsage usage = s.catalog().usage();
    for (const detail::ModelUsageRow& row : usage.models) {
      // Another tenant's model is none of this one's business.
      if (!s.options().tenant.empty() && row.conversations == 0 && row.chunks == 0) continue;
      UsageStats u;
      u.model = s.model_by_id(row.model_id).sig;
      u.chunk_tokens = row.chunk_tokens;
      // The model's own record size, not the stored column no check covers.
      const int64_t rb = u.model.record_bytes();
      const std::string what = s.where() + ": model row " + std::to_string(row.model_id);
      u.conversations = row.conversations;
      u.tokens = row.tokens;
      u.chunks = row.chunks;
      u.logical_bytes = checked_product(u.tokens, rb, what);
      u.unique_bytes = checked_product(row.chunk_tokens_sum, rb, what);
      u.stored_bytes = row.stored_bytes;
      out.total.conversations += u.conversations;
      out.total.tokens = checked_sum(out.total.tokens, u.tokens, what);
      out.total.chunks += u.chunks;
      out.total.logical_bytes = checked_sum(out.total.logical_bytes, u.logical_bytes, what);
      out.total.unique_bytes = checked_sum(out.total.unique_bytes, u.unique_bytes, what);
      out.total.stored_bytes += u.stored_bytes;
      out.models.push_back(u);
    }
    out.evicted_chunks = usage.evicted_chunks;
    out.evicted_conversations = usage.evicted_conversations;
    out.file_bytes = s.catalog().file_bytes();  // a server's query can fail
    return out;
  });
}

}  // namespace colikv
