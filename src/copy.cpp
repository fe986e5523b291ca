// copy_conversation (colikv/copy.h): the destination's append pulls chunks
// from the source's catalog in one read snapshot of it; both sides are then
// read back and compared.
#include "colikv/copy.h"

#include <algorithm>
#include <cstring>
#include <mutex>

#include "async_writer.h"
#include "backend_error.h"
#include "core/chunk_codec.h"
#include "core/sha256.h"
#include "kv_planes.h"
#include "store_call.h"
#include "store_impl.h"

namespace colikv {

namespace {

using detail::ChunkSummary;

// The source conversation's chunks, read from the worker threads of the
// destination's append (one at a time: a catalog is one connection).
class SourceReader {
 public:
  SourceReader(Store::Impl& s, const detail::ConversationRow& conv, const ModelSignature& model)
      : s_(s), conv_(conv), model_(model), here_(s.where(conv.name)) {
    chunks_ = detail::with_context(here_, [&] { return s_.catalog->chunk_list(conv_.id); });
    int64_t covered = 0;
    for (const ChunkSummary& c : chunks_) {
      if (c.first_pos != covered)
        throw Error(ErrorCode::kCorrupt, here_ + ": its chunk list does not cover position " + std::to_string(covered));
      if (c.evicted && c.first_pos < conv_.count)
        throw Error(ErrorCode::kEvicted,
                    here_ + ": cannot copy it: its KV data from position " + std::to_string(c.first_pos) +
                        " was evicted (re-save it from its engine first)",
                    c.first_pos);
      covered += c.n_tokens;
    }
    if (covered < conv_.count)
      throw Error(ErrorCode::kCorrupt, here_ + ": its chunks cover " + std::to_string(covered) + " of " +
                                           std::to_string(conv_.count) + " tokens");
  }

  // Positions [first, first + n) as .coli_kv records, and their token ids.
  void read(int64_t first, int64_t n, std::vector<uint8_t>& records, std::vector<int32_t>& tokens) {
    const int64_t rb = model_.record_bytes();
    records.resize(static_cast<size_t>(n * rb));
    tokens.resize(static_cast<size_t>(n));
    std::lock_guard<std::mutex> lock(mu_);
    for (const ChunkSummary& c : chunks_) {
      const int64_t from = std::max(first, c.first_pos), to = std::min(first + n, c.first_pos + c.n_tokens);
      if (from >= to) continue;
      decode(c);
      std::memcpy(records.data() + (from - first) * rb, chunk_records_.data() + (from - c.first_pos) * rb,
                  static_cast<size_t>((to - from) * rb));
      std::memcpy(tokens.data() + (from - first), chunk_tokens_.data() + (from - c.first_pos),
                  static_cast<size_t>(to - from) * 4);
    }
  }

 private:
  // Decodes a chunk into chunk_records_ (kept: consecutive windows often share one).
  void decode(const ChunkSummary& c) {
    if (decoded_ == c.chunk_id) return;
    const std::string what = here_ + ": chunk " + std::to_string(c.seq);
    auto content = detail::read_rows(what, [&] { return s_.catalog->read_chunk(c.chunk_id); });
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

  Store::Impl& s_;
  detail::ConversationRow conv_;
  ModelSignature model_;
  std::string here_;
  std::vector<ChunkSummary> chunks_;
  std::mutex mu_;
  int64_t decoded_ = -1;
  std::vector<uint8_t> chunk_records_;
  std::vector<int32_t> chunk_tokens_;
};

// SHA-256 of a conversation's records as a load reads them (one snapshot).
std::string records_sha256(Store::Impl& s, const std::string& id) {
  detail::Sha256 h;
  ModelSignature model;
  s.scan(
      id, nullptr, -1, [&](const detail::ScanStart& start) { model = start.model.sig; },
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
  CopySettings(Options& o, Precision p, int64_t chunk_bytes) : o_(o), old_(o) {
    o.new_conversation_precision = p;
    o.chunk_target_bytes = chunk_bytes;
  }
  ~CopySettings() {
    o_.new_conversation_precision = old_.new_conversation_precision;
    o_.chunk_target_bytes = old_.chunk_target_bytes;
  }

 private:
  Options& o_;
  Options old_;
};

}  // namespace

CopyResult copy_conversation(Store& src, Store& dst, const std::string& id, const CopyOptions& options) {
  Store::Impl& s = detail::StoreAccess::impl(src);
  Store::Impl& d = detail::StoreAccess::impl(dst);
  if (&s == &d) throw Error(ErrorCode::kInvalidArgument, s.where(id) + ": cannot copy a conversation into its own store");
  // Both stores' queued turns of id first, so that the copy reads and
  // replaces what their callers wrote (a nested StoreCall would not wait).
  if (d.async) d.async->drain(&id);
  detail::StoreCall src_call(s, id);
  std::lock_guard<std::recursive_mutex> dst_lock(d.mu);
  d.require_writable("copy");
  const auto snapshot = s.catalog->begin(detail::Catalog::Access::kRead, s.where(id));
  const detail::ConversationRow conv = s.get_conversation(id);
  const detail::ModelRow model = s.model_by_id(conv.model_id);
  const auto info = detail::with_context(s.where(id), [&] { return s.catalog->conversation_info(id); });
  if (!info) throw Error(ErrorCode::kNotFound, s.where(id) + ": no such conversation");
  detail::ChunkPrecision precision;
  if (!detail::parse_precision(conv.precision, precision))
    throw Error(ErrorCode::kCorrupt, s.where(id) + ": unknown precision '" + conv.precision + "'");
  SourceReader reader(s, conv, model.sig);

  detail::AppendRequest req;
  req.id = id;
  req.model = model.sig;
  req.len = conv.count;
  req.must_create = true;
  req.title = info->title;
  req.metadata = info->metadata;
  req.progress = options.progress;
  req.max_staged_bytes = std::min<int64_t>(d.options.max_staged_bytes, int64_t{16} << 20);
  const int level = d.options.zstd_level;
  const ModelSignature sig = model.sig;
  req.produce = [&reader, sig, level](int64_t first, int64_t n, detail::ProducedChunk& out) {
    thread_local std::vector<uint8_t> records;
    reader.read(first, n, records, out.tokens);
    out.encoded = detail::encode_chunk(n, out.tokens.data(), detail::record_planes(sig, records.data()), level,
                                       out.precision, &out.stored_digests);
  };
  {
    CopySettings keep(d.options, precision == detail::ChunkPrecision::kBf16 ? Precision::kBf16 : Precision::kF32,
                      model.chunk_tokens * model.sig.record_bytes());
    d.append(req);
  }

  CopyResult r;
  r.id = id;
  r.model = model.sig;
  r.tokens = conv.count;
  r.records_sha256 = records_sha256(s, id);
  const std::string copied = records_sha256(d, id);
  if (copied != r.records_sha256)
    throw Error(ErrorCode::kCorrupt, d.where(id) + ": the copy reads back differently from " + s.where(id) +
                                         " (records SHA-256 " + copied + " against " + r.records_sha256 + ")");
  return r;
}

}  // namespace colikv
