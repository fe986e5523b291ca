// copy_conversation (colikv/copy.h): the destination's append pulls chunks
// from the source's catalog in one read snapshot of it; both sides are then
// read back and compared.
#include "colikv/copy.h"

#include <algorithm>
#include <cstring>
#include <mutex>

#include "store/write/async_writer.h"
#include "catalog/backend_error.h"
#include "core/chunk_codec.h"
#include "core/sha256.h"
#include "store/kv_planes.h"
#include "store/store_call.h"
#include "store/store_impl.h"
#include "core/chunk_layout.h"

namespace colikv {

namespace {

using detail::ChunkSummary;

// The source conversation's chunks, read from the worker threads of the
// destination's append (one at a time: a catalog is one connection). Those
// threads hold no lock of the source: the reader keeps the source's catalog,
// taken in the copy's call, which holds the source's lock for as long as the
// reader lives (copy_conversation), so no other call uses that connection.
class SourceReader {
 public:
  SourceReader(Store::Impl& s, const detail::ConversationRow& conv, const ModelSignature& model) REQUIRES(s.mu)
      : catalog_(s.catalog()), conv_(conv), model_(model), here_(s.where(conv.name)) {
    chunks_ = catalog_.chunk_list(conv_.id);
    int64_t covered = 0;
    for (const ChunkSummary& c : chunks_) {
      if (c.first_pos != covered)
        throw Error(ErrorCode::kCorrupt, here_ + ": its chunk list does not cover position " + std::to_string(covered));
      if (c.evicted && evicted_from_ < 0) evicted_from_ = c.first_pos;
      covered += c.n_tokens;
    }
    if (covered < conv_.count)
      throw Error(ErrorCode::kCorrupt, here_ + ": its chunks cover " + std::to_string(covered) + " of " +
                                           std::to_string(conv_.count) + " tokens");
  }

  // The first position of the first chunk whose values were evicted; -1: none.
  int64_t evicted_from() const { return evicted_from_; }

  // Positions [first, first + n) as .coli_kv records, and their token ids;
  // false (records unset) when some of their values were evicted.
  bool read(int64_t first, int64_t n, std::vector<uint8_t>& records, std::vector<int32_t>& tokens) {
    const int64_t rb = model_.record_bytes();
    records.resize(static_cast<size_t>(n * rb));
    tokens.resize(static_cast<size_t>(n));
    bool values = true;
    std::lock_guard<std::mutex> lock(mu_);
    for (const ChunkSummary& c : chunks_) {
      const int64_t from = std::max(first, c.first_pos), to = std::min(first + n, c.first_pos + c.n_tokens);
      if (from >= to) continue;
      if (c.evicted) {
        const std::vector<int32_t> t = token_ids(c);
        std::memcpy(tokens.data() + (from - first), t.data() + (from - c.first_pos), static_cast<size_t>(to - from) * 4);
        values = false;
        continue;
      }
      decode(c);
      std::memcpy(records.data() + (from - first) * rb, chunk_records_.data() + (from - c.first_pos) * rb,
                  static_cast<size_t>((to - from) * rb));
      std::memcpy(tokens.data() + (from - first), chunk_tokens_.data() + (from - c.first_pos),
                  static_cast<size_t>(to - from) * 4);
    }
    return values;
  }

 private:
  // An evicted chunk's token ids, which it keeps.
  std::vector<int32_t> token_ids(const ChunkSummary& c) {
    const std::string what = here_ + ": chunk " + std::to_string(c.seq);
    std::vector<int32_t> t;
    bool read = false;
    catalog_.for_each_token_list(conv_.id, c.seq, detail::saturating_add(c.first_pos, 1),
                                    [&](int64_t chunk_id, int64_t, std::string_view json) {
                                      if (chunk_id == c.chunk_id)
                                        read = detail::parse_tokens_json(json.data(), json.size(), t) &&
                                               static_cast<int64_t>(t.size()) == c.n_tokens;
                                    });
    if (!read) throw Error(ErrorCode::kCorrupt, what + ": its token list is missing or malformed");
    return t;
  }

  // Decodes a chunk into chunk_records_ (kept: consecutive windows often share one).
  void decode(const ChunkSummary& c) {
    if (decoded_ == c.chunk_id) return;
    const std::string what = here_ + ": chunk " + std::to_string(c.seq);
    auto content = catalog_.read_chunk(c.chunk_id);
    if (!content || !content->payload) throw Error(ErrorCode::kCorrupt, what + ": missing or evicted meanwhile");
    detail::ChunkPrecision precision;
    bool compressed = false;
    if (!detail::parse_precision(content->precision, precision) ||
        !detail::parse_compression(content->compression, compressed) || content->n_tokens != c.n_tokens ||
        !detail::parse_tokens_json(content->tokens_json.data(), content->tokens_json.size(), chunk_tokens_) ||
        static_cast<int64_t>(chunk_tokens_.size()) != c.n_tokens)
      throw Error(ErrorCode::kCorrupt, what + ": its stored fields are malformed");
    const int64_t rb = model_.record_bytes();
    chunk_records_.assign(static_cast<size_t>(c.n_tokens * rb), 0);
    for (int64_t i = 0; i < c.n_tokens; ++i)
      std::memcpy(chunk_records_.data() + i * rb, &chunk_tokens_[static_cast<size_t>(i)], 4);
    detail::decode_chunk(content->payload->data(), content->payload->size(), compressed,
                         content->raw_size, static_cast<uint32_t>(content->checksum), c.n_tokens,
                         chunk_tokens_.data(), detail::record_planes(model_, chunk_records_.data()), precision);
    decoded_ = c.chunk_id;
  }

  detail::Catalog& catalog_;
  detail::ConversationRow conv_;
  ModelSignature model_;
  std::string here_;
  std::vector<ChunkSummary> chunks_;
  int64_t evicted_from_ = -1;
  std::mutex mu_;
  int64_t decoded_ = -1;
  std::vector<uint8_t> chunk_records_;
  std::vector<int32_t> chunk_tokens_;
};

// SHA-256 of a conversation's first `limit` records (all: limit < 0) as a
// load reads them (one snapshot).
std::string records_sha256(Store::Impl& s, const std::string& id, int64_t limit) REQUIRES(s.mu) {
  detail::Sha256 h;
  ModelSignature model;
  s.scan(
      id, nullptr, limit, [&](const detail::ScanStart& start) { model = start.model.sig; },
      [&](detail::StoredChunk& c) { detail::decode_records(model, c); },
      [&](detail::StoredChunk& c) { h.update(c.out.data(), static_cast<size_t>(c.wanted * model.record_bytes())); });
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (uint8_t b : h.finish()) {
    out += hex[b >> 4];
    out += hex[b & 15];
  }
  return out;
}

// The destination's options for one copy: the conversation keeps its
// precision, and a model new to the destination its chunk size (so that
// forks and shared prompts share chunks there as they did in the source).
class CopySettings {
 public:
  CopySettings(Store::Impl& d, Precision p, int64_t chunk_bytes) REQUIRES(d.mu) : d_(d), old_(d.new_layout()) {
    d.new_layout() = {p, chunk_bytes};
  }
  ~CopySettings() {
    d_.assert_in_call();  // the copy's: the analysis cannot name d_ there
    d_.new_layout() = old_;
  }

 private:
  Store::Impl& d_;
  Store::Impl::NewLayout old_;
};


// The conversation dst holds under id already, against the source's: equal
// token ids, model, precision and loadable records (the same positions
// evicted or fewer), or kConflict naming what differs.
// s and d: src's and dst's internals.
void check_same(Store& src, Store& dst, Store::Impl& s, Store::Impl& d, const std::string& id,
                const detail::ConversationRow& conv, const ModelSignature& model, int64_t evicted_from, CopyResult& r)
    REQUIRES(s.mu, d.mu) {
  const std::string here = d.where(id);
  const detail::ConversationRow have = d.get_conversation(id);
  const auto differs = [&](const std::string& what) {
    throw Error(ErrorCode::kConflict, here + ": exists already with " + what + " than " + s.where(id) +
                                          "; nothing was written (delete it there to copy it again)");
  };
  if (d.model_by_id(have.model_id).sig != model) differs("another model");
  if (have.precision != conv.precision) differs("another precision");
  if (have.count != conv.count) differs(std::to_string(have.count) + " tokens rather than " + std::to_string(conv.count));
  if (dst.tokens(id) != src.tokens(id)) differs("other token ids");
  const std::optional<int64_t> gone = d.catalog().prefix_index().first_evicted_pos(have.id, have.count);
  r.evicted_from = gone ? *gone : -1;
  const int64_t limit = evicted_from < 0 ? -1 : evicted_from;
  const int64_t compared = gone ? (limit < 0 ? *gone : std::min(*gone, limit)) : limit;
  r.records_sha256 = records_sha256(s, id, compared);
  if (records_sha256(d, id, compared) != r.records_sha256) differs("other KV values");
}

}  // namespace

CopyResult copy_conversation(Store& src, Store& dst, const std::string& id, const CopyOptions& options) {
  Store::Impl& source = detail::StoreAccess::impl(src);
  Store::Impl& target = detail::StoreAccess::impl(dst);
  if (&source == &target)
    throw Error(ErrorCode::kInvalidArgument, source.where(id) + ": cannot copy a conversation into its own store");
  // Both stores' queued turns of id first, so that the copy reads and
  // replaces what their callers wrote; both gates, so that closing either
  // store waits for the copy; both locks in the one order every copy takes.
  return detail::StorePairCall::run(source, target, id, [&](Store::Impl& s, Store::Impl& d) REQUIRES(s.mu, d.mu) {
    d.require_writable("copy");
    const auto snapshot = s.catalog().begin(detail::Catalog::Access::kRead, s.where(id));
    const detail::ConversationRow conv = s.get_conversation(id);
    const detail::ModelRow model = s.model_by_id(conv.model_id);
    const auto info = s.catalog().conversation_info(id);
    if (!info) throw Error(ErrorCode::kNotFound, s.where(id) + ": no such conversation");
    detail::ChunkPrecision precision;
    if (!detail::parse_precision(conv.precision, precision))
      throw Error(ErrorCode::kCorrupt, s.where(id) + ": unknown precision '" + conv.precision + "'");
    SourceReader reader(s, conv, model.sig);

    CopyResult r;
    r.id = id;
    r.model = model.sig;
    r.tokens = conv.count;
    if (!options.skip_existing && d.find_conversation(id))
      throw Error(ErrorCode::kConflict, d.where(id) + ": exists already; nothing was written (skip_existing leaves it "
                                                      "when it is the same conversation)");
    if (options.skip_existing && d.find_conversation(id)) {
      check_same(src, dst, s, d, id, conv, model.sig, reader.evicted_from(), r);
      r.skipped = true;
      return r;
    }

    detail::AppendRequest req;
    req.id = id;
    req.model = model.sig;
    req.len = conv.count;
    req.must_create = true;
    req.title = info->title;
    req.metadata = info->metadata;
    req.progress = options.progress;
    req.max_staged_bytes = std::min<int64_t>(d.options().max_staged_bytes, int64_t{16} << 20);
    const int level = d.options().zstd_level;
    const ModelSignature sig = model.sig;
    req.produce = [&reader, sig, level](int64_t first, int64_t n, detail::ProducedChunk& out) {
      thread_local std::vector<uint8_t> records;
      if (!reader.read(first, n, records, out.tokens)) {
        // Evicted in the source: copied as it is there, token ids without values.
        out.encoded = detail::values_missing_chunk(n, sig.floats_per_token(), out.precision);
        return;
      }
      out.encoded = detail::encode_chunk(n, out.tokens.data(), detail::record_planes(sig, records.data()), level,
                                         out.precision, &out.stored_digests);
    };
    {
      CopySettings keep(d, precision == detail::ChunkPrecision::kBf16 ? Precision::kBf16 : Precision::kF32,
                        model.chunk_tokens * model.sig.record_bytes());
      d.append(req);
    }

    // What a load of the copy gives up to the first evicted position (of the
    // source, or earlier where a chunk of the copy spans evicted positions).
    const detail::ConversationRow copied_row = d.get_conversation(id);
    const std::optional<int64_t> gone =
        d.catalog().prefix_index().first_evicted_pos(copied_row.id, copied_row.count);
    r.evicted_from = gone ? *gone : -1;
    if (reader.evicted_from() >= 0 && (!gone || *gone > reader.evicted_from()))
      throw Error(ErrorCode::kCorrupt, d.where(id) + ": the copy holds values the source's evicted chunks lack");
    const int64_t limit = gone ? *gone : -1;
    r.records_sha256 = records_sha256(s, id, limit);
    const std::string copied = records_sha256(d, id, limit);
    if (copied != r.records_sha256)
      throw Error(ErrorCode::kCorrupt, d.where(id) + ": the copy reads back differently from " + s.where(id) +
                                           " (records SHA-256 " + copied + " against " + r.records_sha256 + ")");
    return r;
  });
}

}  // namespace colikv
