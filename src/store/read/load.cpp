// Loading: the ChunkScan that checks and decodes a conversation's chunks in
// position order (Store::Impl::scan, also the export's and the copy's), and
// Store::load, Store::load_range and Store::tokens over it.
#include "store/store_impl.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <future>
#include <limits>

#include "store/write/async_writer.h"
#include "catalog/backend_error.h"
#include "core/chunk_layout.h"
#include "core/chunk_codec.h"
#include "core/store_limits.h"
#include "store/upkeep/eviction.h"
#include "store/kv_planes.h"
#include "store/store_call.h"

namespace colikv {

using detail::ChunkHash;
using detail::ConversationRow;
using detail::PlaneList;
using detail::StoredChunk;
using detail::check_kv_pointers;
using detail::now_ms;
using detail::parse_tokens_or_throw;
using detail::range_text;
using detail::throw_negative_count;
using detail::load_rows;
using detail::key_matches;

namespace {

// The rows of one scan, as steps: each chunk row is checked (its place in the
// list, its tokens, its chain hash, its sizes against the model) before its
// payload is read, then decoded on the pool a window at a time and consumed
// here in position order.
class ChunkScan {
 public:
  using ChunkFn = std::function<void(StoredChunk&)>;

  ChunkScan(Store::Impl& s, const detail::ScanStart& start, const std::string& here, const ChunkFn& decode,
            const ChunkFn& consume)
      : s_(s),
        start_(start),
        here_(here),
        chunk_tokens_(start.model.chunk_tokens),
        walk_(chunk_tokens_, start.conv.count),
        decode_(decode),
        consume_(consume),
        chain_(s.chain_seed(start.model.text, start.conv.precision)) {}

  // The jobs in flight point into owned_.
  ~ChunkScan() {
    for (auto& f : inflight_)
      if (f.second.valid()) f.second.wait();
  }

  void run() {
    s_.assert_in_call();  // Store::Impl::scan's: the analysis cannot name s_ there
    // No chunk of the model holds more (a row claiming more is rejected by
    // check_sizes), so a backend that sends payloads with the rows never
    // sends a larger one.
    const int64_t most = detail::max_payload_bytes(
        std::min(detail::kMaxChunkRawBytes, chunk_tokens_ * detail::token_raw_bytes(start_.model.sig)));
    const std::unique_ptr<detail::ChunkCursor> rows = s_.catalog().read_chunks(start_.conv.id, start_.n, most);
    detail::ChunkListRow row;
    while (rows->next(row)) {
      std::unique_ptr<StoredChunk> c = check_row(row);
      if (inflight_.size() >= s_.window()) finish_front();
      read_payload(*rows, *c);
      start_decoding(std::move(c));
    }
    if (walk_.covered() < start_.n)
      throw Error(ErrorCode::kCorrupt, here_ + ": the chunk list ends at position " + std::to_string(walk_.covered()) +
                                           " but the count is " + std::to_string(start_.conv.count));
    while (!inflight_.empty()) finish_front();
  }

 private:
  // A chunk's row, checked; its payload's size in payload_bytes_.
  std::unique_ptr<StoredChunk> check_row(const detail::ChunkListRow& row) {
    auto c = std::make_unique<StoredChunk>();
    c->seq = row.seq;
    c->chunk_id = row.chunk_id;
    c->first_pos = row.first_pos;
    c->n_tokens = row.n_tokens;
    cw_ = here_ + ": chunk " + std::to_string(c->chunk_id) + " (seq " + std::to_string(c->seq) + ", " +
          range_text(c->first_pos, detail::saturating_add(c->first_pos, c->n_tokens)) + ")";
    check_place(*c);
    c->wanted = std::min(c->n_tokens, start_.n - c->first_pos);
    c->tokens = parse_tokens_or_throw(row.tokens_json.data(), static_cast<int64_t>(row.tokens_json.size()),
                                      c->n_tokens, cw_);
    check_tokens(*c, row.key, row.digest);
    c->raw_size = row.raw_size;
    c->checksum = static_cast<uint32_t>(row.checksum);
    if (!detail::parse_precision(row.precision, c->precision))
      throw Error(ErrorCode::kCorrupt, cw_ + ": unknown precision '" + row.precision + "'");
    if (!row.payload_bytes)
      throw Error(ErrorCode::kEvicted, cw_ + ": its KV data was evicted; only its token ids are kept", c->first_pos);
    if (!detail::parse_compression(row.compression, c->compressed))
      throw Error(ErrorCode::kCorrupt, cw_ + ": unknown compression '" + row.compression + "'");
    payload_bytes_ = *row.payload_bytes;
    check_sizes(*c);
    return c;
  }

  // Full chunks, then the tail's pieces, as the count says (chunk_layout.h).
  void check_place(const StoredChunk& c) {
    const std::string why = walk_.next(c.seq, c.first_pos, c.n_tokens);
    if (!why.empty())
      throw Error(ErrorCode::kCorrupt, cw_ + ": " + why + " (the count is " + std::to_string(start_.conv.count) + ")");
  }

  // The hash chain ties each chunk to the token ids before it: a chunk list
  // pointing at another conversation's chunk is caught here, not loaded.
  void check_tokens(const StoredChunk& c, const ChunkHash& key, const std::optional<ChunkHash>& digest) {
    for (int32_t t : c.tokens)
      if (t < 0 || t >= start_.model.sig.vocab)
        throw Error(ErrorCode::kCorrupt, cw_ + ": token id " + std::to_string(t) + " is outside the vocabulary");
    chain_ = detail::chain_next(chain_, c.tokens.data(), c.n_tokens);
    if (!key_matches(key, digest, chain_))
      throw Error(ErrorCode::kCorrupt, cw_ + ": chunk hash does not match the token ids before and in it");
  }

  // Sizes are checked against the model before a byte is read, so a crafted
  // blob cannot make a load allocate more than a chunk's worth.
  void check_sizes(const StoredChunk& c) const {
    const int64_t expect_raw =
        c.n_tokens * start_.model.sig.floats_per_token() * detail::precision_value_bytes(c.precision);
    if (c.raw_size != expect_raw)
      throw Error(ErrorCode::kCorrupt, cw_ + ": raw_size is " + std::to_string(c.raw_size) + ", expected " +
                                           std::to_string(expect_raw) + " for its model and precision");
    if (payload_bytes_ > (c.compressed ? detail::max_payload_bytes(expect_raw) : expect_raw))
      throw Error(ErrorCode::kCorrupt, cw_ + ": payload is " + std::to_string(payload_bytes_) +
                                           " bytes, more than a " + std::to_string(expect_raw) +
                                           "-byte chunk can take");
  }

  // Into a buffer recycled from a consumed chunk.
  void read_payload(detail::ChunkCursor& rows, StoredChunk& c) {
    if (!spare_.empty()) {
      c.payload = std::move(spare_.back());
      spare_.pop_back();
    }
    rows.read_payload(c.chunk_id, payload_bytes_, c.payload, cw_);
  }

  // A lone or small chunk is decoded here when it is consumed: handing it to a
  // worker costs more than it saves (a thread wake-up on a busy machine costs
  // more than decoding it; docs/benchmarks.md, "Figures moved out of code
  // comments").
  void start_decoding(std::unique_ptr<StoredChunk> c) {
    StoredChunk* raw = c.get();
    owned_.push_back(std::move(c));
    auto job = [raw, decode = &decode_, cw = cw_] {
      try {
        (*decode)(*raw);
      } catch (const Error& e) {
        if (e.code() != ErrorCode::kCorrupt) throw;
        throw Error(ErrorCode::kCorrupt, cw + ": " + e.what());
      }
    };
    if (start_.n <= chunk_tokens_ || raw->raw_size < (int64_t{256} << 10))
      inflight_.emplace_back(raw, std::async(std::launch::deferred, job));
    else
      inflight_.emplace_back(raw, s_.pool().submit(job));
  }

  void finish_front() {
    inflight_.front().second.get();
    consume_(*inflight_.front().first);
    spare_.push_back(std::move(inflight_.front().first->payload));
    inflight_.pop_front();
  }

  Store::Impl& s_;
  const detail::ScanStart& start_;
  const std::string& here_;
  const int64_t chunk_tokens_;
  detail::ChunkListWalk walk_;
  const ChunkFn& decode_;
  const ChunkFn& consume_;
  ChunkHash chain_;
  std::string cw_;              // the current chunk, for messages
  int64_t payload_bytes_ = 0;   // the current chunk's payload size
  std::vector<std::unique_ptr<StoredChunk>> owned_;
  std::deque<std::pair<StoredChunk*, std::future<void>>> inflight_;
  std::vector<std::vector<uint8_t>> spare_;
};

// A scan's conversation, model and length, checked.
detail::ScanStart scan_start(Store::Impl& s, const std::string& id, const ModelSignature* expect, int64_t limit,
                             const std::string& here) REQUIRES(s.mu) {
  detail::ScanStart start;
  start.conv = s.get_conversation(id);
  start.model = s.model_by_id(start.conv.model_id);
  if (start.conv.count < 0) throw_negative_count(start.conv, here);
  if (expect && *expect != start.model.sig)
    throw Error(ErrorCode::kModelMismatch, here + ": stored for model [" + start.model.text +
                                               "], but the caller's model is [" + expect->to_string() + "]");
  start.n = (limit >= 0 && limit < start.conv.count) ? limit : start.conv.count;
  return start;
}

}  // namespace

void Store::Impl::scan(const std::string& id, const ModelSignature* expect, int64_t limit,
                       const std::function<void(const detail::ScanStart&)>& on_start,
                       const std::function<void(StoredChunk&)>& decode,
                       const std::function<void(StoredChunk&)>& consume) {
  const std::string here = where(id);
  const auto snapshot = catalog().begin(detail::Catalog::Access::kRead, here);
  const detail::ScanStart start = scan_start(*this, id, expect, limit, here);
  on_start(start);
  if (start.n == 0) return;
  ChunkScan(*this, start, here, decode, consume).run();
}

namespace {

// One load of id (load, load_range) as a call of impl: counted and timed to
// its end, the model checked before body(s, here) reads, and the positions
// body returns counted as loaded.
template <class F>
int64_t load_call(Store::Impl& impl, const std::string& id, const ModelSignature& model, F&& body) {
  return detail::StoreCall::run(impl, id, [&](Store::Impl& s) REQUIRES(s.mu) {
    const detail::LatencyTimer timer(s.counters().load_seconds);
    detail::StoreCounters::add(s.counters().loads, 1);
    const std::string here = s.where(id);
    model.validate();
    const int64_t n = body.operator()(s, here);  // as StoreCall::run calls its body
    detail::StoreCounters::add(s.counters().load_tokens, static_cast<uint64_t>(n));
    detail::StoreCounters::add(s.counters().load_bytes, static_cast<uint64_t>(n * model.record_bytes()));
    return n;
  });
}

}  // namespace

int64_t Store::load(const std::string& id, const ModelSignature& model, int32_t* tokens, int64_t max_tokens,
                    const KvTarget& kv, int64_t limit) {
  return load_call(*impl_, id, model, [&](Store::Impl& s, const std::string& here) REQUIRES(s.mu) {
    int64_t n = 0;
    s.scan(
        id, &model, limit,
        [&](const detail::ScanStart& st) REQUIRES(s.mu) {  // on_start runs on the call's thread
          n = st.n;
          if (n > max_tokens)
            throw Error(ErrorCode::kTooLarge, here + ": " + std::to_string(n) + " tokens do not fit the caller's maximum of " +
                                                  std::to_string(max_tokens));
          if (n > 0) {
            if (!tokens) throw Error(ErrorCode::kInvalidArgument, here + ": tokens is null");
            check_kv_pointers(model, reinterpret_cast<const void* const*>(kv.Lc),
                              reinterpret_cast<const void* const*>(kv.Rc), reinterpret_cast<const void* const*>(kv.Ic),
                              here);
          }
          detail::throw_if_evicted(s, st, tokens);  // kEvicted with the token ids, before any KV byte
        },
        [&](StoredChunk& c) {
          if (c.wanted == c.n_tokens) {
            detail::decode_chunk(c.payload.data(), c.payload.size(), c.compressed, c.raw_size, c.checksum, c.n_tokens,
                                 c.tokens.data(), detail::engine_planes(model, kv, c.first_pos), c.precision);
            return;
          }
          // Only a prefix of this chunk is wanted: decode it aside, copy that part.
          std::vector<float> buf(static_cast<size_t>(c.n_tokens * model.floats_per_token()));
          PlaneList packed = detail::packed_planes(model, buf.data(), c.n_tokens);
          detail::decode_chunk(c.payload.data(), c.payload.size(), c.compressed, c.raw_size, c.checksum, c.n_tokens,
                               c.tokens.data(), packed, c.precision);
          PlaneList dst = detail::engine_planes(model, kv, c.first_pos);
          for (size_t p = 0; p < dst.size(); ++p)
            std::memcpy(dst[p].base, packed[p].base, static_cast<size_t>(c.wanted * packed[p].width) * 4);
        },
        [&](StoredChunk& c) { std::copy(c.tokens.begin(), c.tokens.begin() + c.wanted, tokens + c.first_pos); });
    if (!s.options().read_only) {
      // Recency for list() and eviction. It must neither fail the load nor wait
      // for another writer's lock: it is skipped when the database is busy.
      s.catalog().touch_used_if_idle(id, now_ms());
    }
    return n;
  });
}

std::vector<int32_t> Store::tokens(const std::string& id) {
  return detail::StoreCall::run(*impl_, id, [&](Store::Impl& s) REQUIRES(s.mu) {
    const std::string here = s.where(id);
    const auto snapshot = s.catalog().begin(detail::Catalog::Access::kRead, here);
    ConversationRow c = s.get_conversation(id);
    if (c.count < 0) throw_negative_count(c, here);
    // Grown by what the chunks hold, not reserved by what the count claims.
    std::vector<int32_t> out;
    s.catalog().for_each_token_list(c.id, 0, std::numeric_limits<int64_t>::max(), [&](int64_t chunk_id, int64_t n_tokens, std::string_view json) {
      auto t = parse_tokens_or_throw(json.data(), static_cast<int64_t>(json.size()), n_tokens,
                                     here + ": chunk " + std::to_string(chunk_id));
      out.insert(out.end(), t.begin(), t.end());
    });
    if (static_cast<int64_t>(out.size()) != c.count)
      throw Error(ErrorCode::kCorrupt, here + ": its chunks hold " + std::to_string(out.size()) + " tokens but its count is " +
                                           std::to_string(c.count));
    return out;
  });
}

namespace {

void require_range(const std::string& here, int64_t from, int64_t to) {
  if (from < 0 || to < from)
    throw Error(ErrorCode::kInvalidArgument, here + ": load of positions [" + std::to_string(from) + ", " +
                                                 std::to_string(to) + ") is not a range");
}

// Copies positions [lo, hi) of a chunk decoded aside into rows lo - origin.. of the engine's buffers.
void copy_rows(const PlaneList& packed, const PlaneList& engine, int64_t chunk_first, int64_t lo, int64_t hi,
               int64_t origin) {
  for (size_t p = 0; p < engine.size(); ++p)
    std::memcpy(engine[p].base + (lo - origin) * engine[p].stride, packed[p].base + (lo - chunk_first) * packed[p].stride,
                static_cast<size_t>((hi - lo) * packed[p].width) * 4);
}

}  // namespace

namespace detail {

// Fills positions [from, to) of a conversation into rows p - origin of the buffers.
int64_t load_rows(Store::Impl& s, const std::string& id, const ModelSignature& model, int64_t from, int64_t to,
                  int32_t* tokens, const KvTarget& kv, int64_t origin) {
  const std::string here = s.where(id);
  s.scan(
      id, &model, to,
      [&](const detail::ScanStart& st) REQUIRES(s.mu) {  // on_start runs on the call's thread
        if (st.n < to)
          throw Error(ErrorCode::kInvalidArgument, here + ": load of positions [" + std::to_string(from) + ", " +
                                                       std::to_string(to) + ") but only " + std::to_string(st.n) +
                                                       " tokens are committed");
        if (origin == 0) detail::throw_if_evicted(s, st, tokens);
        else detail::throw_if_evicted(s, st, nullptr);
      },
      [&](detail::StoredChunk& c) {
        const int64_t lo = std::max(from, c.first_pos), hi = std::min(to, c.first_pos + c.wanted);
        if (lo >= hi) return;  // before the range: its payload is not decoded
        if (lo == c.first_pos && hi == c.first_pos + c.n_tokens) {
          detail::decode_chunk(c.payload.data(), c.payload.size(), c.compressed, c.raw_size, c.checksum, c.n_tokens,
                               c.tokens.data(), detail::engine_planes(model, kv, c.first_pos - origin), c.precision);
          return;
        }
        std::vector<float> buf(static_cast<size_t>(c.n_tokens * model.floats_per_token()));
        PlaneList packed = detail::packed_planes(model, buf.data(), c.n_tokens);
        detail::decode_chunk(c.payload.data(), c.payload.size(), c.compressed, c.raw_size, c.checksum, c.n_tokens,
                             c.tokens.data(), packed, c.precision);
        copy_rows(packed, detail::engine_planes(model, kv, 0), c.first_pos, lo, hi, origin);
      },
      [&](detail::StoredChunk& c) {
        const int64_t lo = std::max(from, c.first_pos), hi = std::min(to, c.first_pos + c.wanted);
        for (int64_t p = lo; p < hi; ++p) tokens[p - origin] = c.tokens[static_cast<size_t>(p - c.first_pos)];
      });
  return to - from;
}

}  // namespace detail

int64_t Store::load_range(const std::string& id, const ModelSignature& model, int64_t from, int64_t to,
                          int32_t* tokens, const KvTarget& kv) {
  return load_call(*impl_, id, model, [&](Store::Impl& s, const std::string& here) REQUIRES(s.mu) {
    require_range(here, from, to);
    if (to > from && (!tokens || !kv.Lc || !kv.Rc || (model.n_indexed > 0 && !kv.Ic)))
      throw Error(ErrorCode::kInvalidArgument, here + ": tokens, Lc, Rc (and Ic for a model with an indexer) must not be null");
    return load_rows(s, id, model, from, to, tokens, kv, 0);
  });
}

}  // namespace colikv
