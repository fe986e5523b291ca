// Store::append_async and Store::wait: the store's side of the background
// writer (async_writer.h), which commits each queued turn here.
#include "store/store_impl.h"

#include <vector>

#include "store/write/async_writer.h"
#include "core/chunk_codec.h"
#include "core/store_limits.h"
#include "store/kv_planes.h"
#include "store/store_call.h"

namespace colikv {

using detail::ChunkSummary;
using detail::ConversationRow;
using detail::ExpectedState;
using detail::QueuedAppend;

namespace detail {

namespace {

// A queued turn, on the writer thread: one transaction, as append's, that
// fails with kConflict unless the conversation holds exactly what the turn
// was validated against (another writer, or a call of this Store, changed it).
void commit_queued(Store::Impl& store, const QueuedAppend& job) {
  StoreCall::run(store, StoreCall::NoWait{}, [&](Store::Impl& s) REQUIRES(s.mu) {
    // No outer transaction: the append checks the committed count itself
    // (AppendRequest::expected_count), so that a queued turn of several
    // chunks stores them first, as append does (docs/design.md, "Objects first").
    const QueuedAppend::Source rows = job.source();
    append_rows(s, job.id, job.model, job.tokens.data(), job.from, job.len, rows.kv, job.staged_from, job.from);
    s.counters().async_durable_seconds.observe_since(job.queued_at);
  });
}

// What is stored of a conversation, from one read snapshot: what append_async validates against.
ExpectedState read_expected(Store::Impl& store, const std::string& id, const ModelSignature& model) {
  return StoreCall::run(store, StoreCall::NoWait{}, [&](Store::Impl& s) REQUIRES(s.mu) {
    const std::string here = s.where(id);
    const auto snapshot = s.catalog().begin(Catalog::Access::kRead, here);
    ExpectedState st;
    const std::optional<ConversationRow> conv = s.find_conversation(id);
    if (!conv) {
      st.chunk_tokens = s.chunk_tokens_of(model);
      return st;
    }
    st.exists = true;
    const ModelRow stored = s.model_by_id(conv->model_id);
    st.model = stored.sig;
    st.chunk_tokens = stored.chunk_tokens;
    for (const ChunkSummary& c : s.catalog().chunk_list(conv->id))
      if (c.evicted && st.evicted_from < 0) st.evicted_from = c.first_pos;
    std::vector<int32_t> t;
    // An entry naming a missing chunk is left out: the count check below finds it.
    s.catalog().for_each_token_list(conv->id, 0, INT64_MAX, [&](int64_t chunk_id, int64_t n_tokens, std::string_view json) {
      if (!parse_tokens_json(json.data(), json.size(), t) || static_cast<int64_t>(t.size()) != n_tokens)
        throw Error(ErrorCode::kCorrupt, here + ": the token list of chunk " + std::to_string(chunk_id) + " is malformed");
      st.tokens.insert(st.tokens.end(), t.begin(), t.end());
    });
    if (static_cast<int64_t>(st.tokens.size()) != conv->count)
      throw Error(ErrorCode::kCorrupt, here + ": its chunks hold " + std::to_string(st.tokens.size()) +
                                           " tokens but its count is " + std::to_string(conv->count));
    return st;
  });
}

}  // namespace

// Staging memory the writer thread faults in when a Store opens with
// Options::prefault_async_staging, as an engine's store does (within
// max_queued_bytes): a 512-token turn of a 78-layer, 576-float model with the
// chunk it starts in, so that the engine's first turn copies into memory
// already faulted in. Then held while the Store is open, used or not.
constexpr int64_t kReservedStagingBytes = int64_t{128} << 20;

std::unique_ptr<AsyncWriter> make_async_writer(Store::Impl& s) {
  return std::make_unique<AsyncWriter>(
      s.options().max_queued_bytes, kReservedStagingBytes, s.pool(),
      [&s](const QueuedAppend& job) { commit_queued(s, job); },
      [&s](const std::string& id, const ModelSignature& model) { return read_expected(s, id, model); });
}

}  // namespace detail

namespace {

void queue_turn(Store::Impl& s, const std::string& here, const std::string& id, const ModelSignature& model,
                const int32_t* tokens, int64_t len, const KvSource& kv) {
  s.require_writable("append to conversation '" + id + "'");
  model.validate();
  if (id.empty()) throw Error(ErrorCode::kInvalidArgument, s.where() + ": conversation id is empty");
  if (len < 0) throw Error(ErrorCode::kInvalidArgument, here + ": negative length " + std::to_string(len));
  if (detail::token_raw_bytes(model) > detail::kMaxChunkRawBytes)
    throw Error(ErrorCode::kInvalidArgument, here + ": one record of model [" + model.to_string() + "] takes " +
                                                 std::to_string(detail::token_raw_bytes(model)) +
                                                 " bytes, more than a stored chunk may hold");
  if (len > 0) {
    if (!tokens) throw Error(ErrorCode::kInvalidArgument, here + ": tokens is null");
    detail::check_kv_pointers(model, reinterpret_cast<const void* const*>(kv.Lc),
                              reinterpret_cast<const void* const*>(kv.Rc), reinterpret_cast<const void* const*>(kv.Ic),
                              here);
  }
  const size_t depth = s.async()->enqueue(id, model, tokens, len, kv, here);
  if (depth > 0) s.counters().async_queue_depth.observe(static_cast<int64_t>(depth));
}

// Errors of queued turns, counted by the call that reports them.
void counted_wait(Store::Impl& s, const std::string* id) {
  try {
    s.async()->wait(id);
  } catch (const Error& e) {
    s.counters().count_error(e.code());
    throw;
  }
}

}  // namespace

void Store::append_async(const std::string& id, const ModelSignature& model, const int32_t* tokens, int64_t len,
                         const KvSource& kv) {
  Impl& s = *impl_;
  const std::string here = s.where(id);
  detail::CallGate::Call in_flight(s.gate(), [&] { return here; });
  // Counted inside the gate: once it is left another thread may destroy the Store.
  const auto start = std::chrono::steady_clock::now();
  detail::StoreCounters::add(s.counters().appends, 1);
  try {
    queue_turn(s, here, id, model, tokens, len, kv);
  } catch (const Error& e) {
    s.counters().count_error(e.code());
    throw;
  } catch (...) {
    s.counters().count_error(ErrorCode::kInternal);
    throw;
  }
  s.counters().async_stall_seconds.observe_since(start);
}

void Store::wait(const std::string& id) {
  detail::CallGate::Call in_flight(impl_->gate(), [&] { return impl_->where(id); });
  if (impl_->async()) counted_wait(*impl_, &id);
}

void Store::wait() {
  detail::CallGate::Call in_flight(impl_->gate(), [&] { return impl_->where(); });
  if (impl_->async()) counted_wait(*impl_, nullptr);
}

}  // namespace colikv
