// Store::Impl: opening a store, and what every call of the store's files
// shares: finding a conversation and its model, reading its chunk list.
#include "store/store_impl.h"

#include <algorithm>
#include <chrono>

#include "store/write/async_writer.h"
#include "catalog/backend_error.h"
#include "core/chunk_layout.h"
#include "core/store_limits.h"
#include "core/text_argument.h"
#include "catalog/location.h"

namespace colikv {

using detail::ChunkSummary;
using detail::ConversationRow;
using detail::ModelRow;
using detail::now_ms;
using detail::chunk_tokens_for;
using detail::parse_tokens_or_throw;
using detail::range_text;
using detail::throw_negative_count;
using detail::check_chunk_list;
using detail::chunk_tokens_of;
using detail::ConversationState;
using detail::read_state;

namespace detail {

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
             .count() +
         wall_clock_skew_ms().load(std::memory_order_relaxed);
}

std::atomic<int64_t>& wall_clock_skew_ms() {
  static std::atomic<int64_t> skew{0};
  return skew;
}

// The largest power of two of tokens whose chunk stays within target bytes.
int64_t chunk_tokens_for(const ModelSignature& m, int64_t target_bytes) {
  const int64_t per_token = detail::token_raw_bytes(m);
  target_bytes = std::min(target_bytes, detail::kMaxChunkRawBytes);
  int64_t c = 1;
  while (c < detail::kMaxChunkTokens && (c * 2) * per_token <= target_bytes) c *= 2;
  return c;
}

std::vector<int32_t> parse_tokens_or_throw(const char* text, int64_t bytes, int64_t expect_n,
                                           const std::string& where) {
  std::vector<int32_t> out;
  // Sizes first: a list longer than the library writes for expect_n ids is
  // not parsed (its ids would be held in memory).
  if (expect_n < 1 || expect_n > detail::kMaxChunkTokens || bytes > detail::max_tokens_json_bytes(expect_n))
    throw Error(ErrorCode::kCorrupt, where + ": token list of " + std::to_string(bytes) + " bytes for " +
                                         std::to_string(expect_n) + " token ids is not one colikv writes");
  if (!detail::parse_tokens_json(text ? text : "", static_cast<size_t>(bytes), out) ||
      static_cast<int64_t>(out.size()) != expect_n)
    throw Error(ErrorCode::kCorrupt, where + ": token list is not a JSON array of " +
                                         std::to_string(expect_n) + " token ids");
  return out;
}

std::string range_text(int64_t a, int64_t b) {
  return "positions [" + std::to_string(a) + ", " + std::to_string(b) + ")";
}

[[noreturn]] void throw_negative_count(const ConversationRow& conv, const std::string& here) {
  throw Error(ErrorCode::kCorrupt, here + ": its token count is negative (" + std::to_string(conv.count) + ")");
}

// The chunk list must cover exactly [0, count) as chunk_layout.h says: full
// chunks, then the tail's pieces. Checked before anything indexes the list by
// a position, so a count or a list altered by hand is reported, never
// followed out of bounds.
void check_chunk_list(const ConversationRow& conv, const ModelRow& model, const std::vector<ChunkSummary>& chunks,
                      const std::string& here) {
  if (conv.count < 0) throw_negative_count(conv, here);
  detail::ChunkListWalk walk(model.chunk_tokens, conv.count);
  for (const ChunkSummary& c : chunks) {
    const std::string why = walk.next(c.seq, c.first_pos, c.n_tokens);
    if (!why.empty())
      throw Error(ErrorCode::kCorrupt, here + ": chunk " + std::to_string(c.chunk_id) + " (seq " + std::to_string(c.seq) +
                                           ", " + range_text(c.first_pos, detail::saturating_add(c.first_pos, c.n_tokens)) + ") " + why);
  }
  if (walk.covered() != conv.count)
    throw Error(ErrorCode::kCorrupt, here + ": its chunks cover " + range_text(0, walk.covered()) +
                                         " but its count is " + std::to_string(conv.count));
}

std::vector<int32_t> chunk_tokens_of(detail::Catalog& catalog, int64_t conversation_id, const ChunkSummary& c,
                                     const std::string& where) {
  std::vector<int32_t> out;
  bool found = false;
  catalog.for_each_token_list(conversation_id, c.seq, detail::saturating_add(c.first_pos, 1),
                              [&](int64_t chunk_id, int64_t, std::string_view json) {
                                if (chunk_id != c.chunk_id) return;  // a later entry at the same place
                                found = true;
                                out = parse_tokens_or_throw(json.data(), static_cast<int64_t>(json.size()), c.n_tokens,
                                                            where + ": chunk " + std::to_string(c.chunk_id));
                              });
  if (!found) throw Error(ErrorCode::kCorrupt, where + ": chunk " + std::to_string(c.chunk_id) + " is missing");
  return out;
}

ConversationState read_state(Store::Impl& s, const std::string& id, const std::string& here) {
  const auto snapshot = s.catalog().begin(detail::Catalog::Access::kRead, here);
  ConversationState st;
  st.conv = s.get_conversation(id);
  st.model = s.model_by_id(st.conv.model_id);
  st.chunks = s.catalog().chunk_list(st.conv.id);
  check_chunk_list(st.conv, st.model, st.chunks, here);
  return st;
}

}  // namespace detail

namespace {

// The catalog, with what its connections do (reclaims, lock waits) counted as this Store's.
std::unique_ptr<detail::Catalog> open_counted(detail::StoreCounters& counters, const std::string& path,
                                              const Options& options, detail::StagedStore* staged) {
  return detail::open_catalog_staged(path, options, staged, &counters);
}

// where()'s text for the store.
std::string where_store(const std::string& path, const Options& o) {
  // A tenant's name holds no control character (require_tenant_name).
  return "store " + detail::shown_location(path) + (o.tenant.empty() ? std::string() : " tenant '" + o.tenant + "'");
}

}  // namespace

Store::Impl::Impl(const std::string& p, const Options& o)
    : path_(p),
      options_(o),
      where_store_(where_store(p, o)),
      new_layout_{o.new_conversation_precision, o.chunk_target_bytes},
      staged_(detail::stage_new_store(p, o)),
      catalog_(open_counted(counters_, p, o, staged_.get())),
      pool_(o.threads) {
  catalog_->errors().set_store(where());  // names what the catalog raises outside a transaction
  if (!options_.read_only) {
    async_ = detail::make_async_writer(*this);
    // An engine's first turn after a restart copies into memory already
    // faulted in, whether or not its slot had anything stored to load.
    if (options_.prefault_async_staging) async_->prepare();
  }
  detail::register_counters(&counters_, options_.tenant);  // last: ~Impl retires it
}

Store::Impl::~Impl() {
  async_.reset();  // what it commits is counted
  detail::retire_counters(&counters_);
}

void Store::Impl::stop_async() { async_.reset(); }

std::string Store::Impl::where(const std::string& id) const {
  return id.empty() ? where_store_ : where_store_ + ": conversation '" + id + "'";
}

bool Store::Impl::is_json(const std::string& text) {
  return detail::is_json(text);
}

void Store::Impl::require_writable(const std::string& op) const {
  if (options_.read_only)
    throw Error(ErrorCode::kReadOnly, where() + ": " + op + ": the store is opened read-only");
}

std::optional<ConversationRow> Store::Impl::find_conversation(const std::string& id) {
  detail::require_no_nul(id, "conversation id", where());
  return catalog().find_conversation(id);
}

ConversationRow Store::Impl::get_conversation(const std::string& id) {
  auto r = find_conversation(id);
  if (!r) throw Error(ErrorCode::kNotFound, where(id) + ": no such conversation");
  return *r;
}

ModelRow Store::Impl::model_by_id(int64_t model_id) {
  // A model row this Store's own write recorded, then rolled back, may be
  // kept here, and SQLite gives its id to the next model recorded: the
  // conversations of that one would be read as the gone model's (their token
  // ids and chain hashes checked against another signature).
  const uint64_t rollbacks = catalog().write_rollbacks();
  if (rollbacks != models_rollbacks_) {
    models_by_id_.clear();
    models_rollbacks_ = rollbacks;
  }
  auto it = models_by_id_.find(model_id);
  if (it != models_by_id_.end()) return it->second;
  const std::optional<detail::StoredModel> stored = catalog().read_model(model_id);
  if (!stored) throw Error(ErrorCode::kCorrupt, where() + ": model row " + std::to_string(model_id) + " is missing");
  ModelRow r;
  r.id = model_id;
  r.sig = stored->sig;
  r.chunk_tokens = stored->chunk_tokens;
  r.text = r.sig.to_string();
  try {
    r.sig.validate();
  } catch (const Error& e) {
    throw Error(ErrorCode::kCorrupt, where() + ": model row " + std::to_string(model_id) + ": " + e.what());
  }
  // Everything a read allocates follows from chunk_tokens: it must be a
  // size the library itself could have chosen.
  if (!detail::chunk_tokens_allowed(r.sig, r.chunk_tokens))
    throw Error(ErrorCode::kCorrupt, where() + ": model row " + std::to_string(model_id) + ": chunk_tokens " +
                                         std::to_string(r.chunk_tokens) + " is not a chunk size colikv writes (a power of two up to " +
                                         std::to_string(detail::kMaxChunkTokens) + ", at most " +
                                         std::to_string(detail::kMaxChunkRawBytes >> 20) + " MiB a chunk)");
  if (r.text != stored->signature)
    throw Error(ErrorCode::kCorrupt, where() + ": model row " + std::to_string(model_id) +
                                         " is inconsistent (its signature text does not match its fields)");
  models_by_id_[model_id] = r;
  return r;
}

std::optional<ModelRow> Store::Impl::find_model(const ModelSignature& sig) {
  // A model row is never changed or deleted once stored: one this Store has
  // read stands without another lookup (model_by_id keeps it while no write
  // of its rolled back), as an append of a new conversation asks each time.
  if (catalog().write_rollbacks() == models_rollbacks_)
    for (const auto& known : models_by_id_)
      if (known.second.sig == sig) return known.second;
  const std::optional<int64_t> id = catalog().find_model_id(sig.to_string());
  if (!id) return std::nullopt;
  return model_by_id(*id);
}

ModelRow Store::Impl::ensure_model(const ModelSignature& sig) {
  if (auto m = find_model(sig)) return *m;
  catalog().insert_model(sig, chunk_tokens_for(sig, new_layout_.chunk_target_bytes), now_ms());
  return *find_model(sig);
}

int64_t Store::Impl::chunk_tokens_of(const ModelSignature& sig) {
  const std::optional<detail::ModelRow> m = find_model(sig);
  return m ? m->chunk_tokens : chunk_tokens_for(sig, new_layout_.chunk_target_bytes);
}

void Store::Impl::erase_if_due() noexcept {
  if (!erase_due_) return;
  erase_due_ = false;
  try {
    if (catalog_) catalog_->erase_deleted(where());
  } catch (...) {  // erase_deleted never throws; where() could only fail to allocate
  }
}

namespace {

detail::TurnEdit removal(int64_t id, const std::string& name, int64_t generation) {
  detail::TurnEdit e;
  e.name = name;
  e.conversation_id = id;
  e.generation = generation;
  e.remove = true;
  e.now_ms = now_ms();
  return e;
}

}  // namespace

std::vector<int64_t> Store::Impl::delete_whole(const detail::ConversationRow& c) {
  detail::TurnEdit e = removal(c.id, c.name, c.generation);
  for (const auto& ch : catalog().chunk_list(c.id)) e.free.push_back(ch.chunk_id);
  catalog().apply(e, where(c.name));
  return e.free;
}

void Store::Impl::delete_idle(const detail::IdleConversation& c, const std::vector<detail::PayloadChunk>& chunks) {
  detail::TurnEdit e = removal(c.id, c.name, c.generation);
  e.savepoint = false;
  for (const detail::PayloadChunk& p : chunks) e.free.push_back(p.chunk_id);
  catalog().apply(e, where(c.name));
}

void Store::Impl::free_unused_chunks(const std::vector<int64_t>& chunk_ids) {
  catalog().free_unused_chunks(chunk_ids);
}

}  // namespace colikv
