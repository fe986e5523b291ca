// Store::write and Store::load_range: the calls an engine makes when its
// buffers and the stored conversation part ways (a rewritten tail, rows
// adopted from another conversation). Built from the store's own steps.
#include <algorithm>
#include <cstring>
#include <mutex>
#include <vector>

#include "chunk_codec.h"
#include "colikv/store.h"
#include "eviction.h"
#include "sqlite_util.h"
#include "store_impl.h"

namespace colikv {

using detail::PlaneList;
using detail::SqlTransaction;

void Store::write(const std::string& id, const ModelSignature& model, const int32_t* tokens, int64_t from, int64_t len,
                  const KvSource& kv) {
  std::lock_guard<std::recursive_mutex> lock(impl_->mu);
  Impl& s = *impl_;
  const std::string here = s.where(id);
  s.require_writable("write conversation '" + id + "'");
  if (from < 0 || from > len)
    throw Error(ErrorCode::kInvalidArgument, here + ": write from position " + std::to_string(from) + " of " +
                                                 std::to_string(len) + " tokens is outside [0, len]");
  // The truncate and the append below are savepoints of this one transaction:
  // a divergence or a model mismatch found by the append undoes the truncate.
  SqlTransaction txn(s.db, here);
  const int64_t committed = count(id);
  if (from > committed)
    throw Error(ErrorCode::kInvalidArgument, here + ": write from position " + std::to_string(from) +
                                                 " but only " + std::to_string(committed) + " tokens are committed");
  if (from < committed) truncate(id, from);
  append(id, model, tokens, len, kv);
  txn.commit();
}

namespace {

void require_range(const std::string& here, int64_t from, int64_t to) {
  if (from < 0 || to < from)
    throw Error(ErrorCode::kInvalidArgument, here + ": load of positions [" + std::to_string(from) + ", " +
                                                 std::to_string(to) + ") is not a range");
}

// Copies rows [lo, hi) (absolute positions) of a chunk decoded aside into the engine's buffers.
void copy_rows(const PlaneList& packed, const PlaneList& engine, int64_t chunk_first, int64_t lo, int64_t hi) {
  for (size_t p = 0; p < engine.size(); ++p)
    std::memcpy(engine[p].base + lo * engine[p].stride, packed[p].base + (lo - chunk_first) * packed[p].stride,
                static_cast<size_t>((hi - lo) * packed[p].width) * 4);
}

}  // namespace

int64_t Store::load_range(const std::string& id, const ModelSignature& model, int64_t from, int64_t to,
                          int32_t* tokens, const KvTarget& kv) {
  std::lock_guard<std::recursive_mutex> lock(impl_->mu);
  Impl& s = *impl_;
  const std::string here = s.where(id);
  model.validate();
  require_range(here, from, to);
  if (to > from && (!tokens || !kv.Lc || !kv.Rc || (model.n_indexed > 0 && !kv.Ic)))
    throw Error(ErrorCode::kInvalidArgument, here + ": tokens, Lc, Rc (and Ic for a model with an indexer) must not be null");
  s.scan(
      id, &model, to,
      [&](const detail::ScanStart& st) {
        if (st.n < to)
          throw Error(ErrorCode::kInvalidArgument, here + ": load of positions [" + std::to_string(from) + ", " +
                                                       std::to_string(to) + ") but only " + std::to_string(st.n) +
                                                       " tokens are committed");
        detail::throw_if_evicted(s, st, tokens);
      },
      [&](detail::StoredChunk& c) {
        const int64_t lo = std::max(from, c.first_pos), hi = std::min(to, c.first_pos + c.wanted);
        if (lo >= hi) return;  // before the range: its payload is not decoded
        if (lo == c.first_pos && hi == c.first_pos + c.n_tokens) {
          detail::decode_chunk(c.payload.data(), c.payload.size(), c.compressed, c.raw_size, c.checksum, c.n_tokens,
                               c.tokens.data(), detail::engine_planes(model, kv, c.first_pos), c.precision);
          return;
        }
        std::vector<float> buf(static_cast<size_t>(c.n_tokens * model.floats_per_token()));
        PlaneList packed = detail::packed_planes(model, buf.data(), c.n_tokens);
        detail::decode_chunk(c.payload.data(), c.payload.size(), c.compressed, c.raw_size, c.checksum, c.n_tokens,
                             c.tokens.data(), packed, c.precision);
        copy_rows(packed, detail::engine_planes(model, kv, 0), c.first_pos, lo, hi);
      },
      [&](detail::StoredChunk& c) {
        const int64_t lo = std::max(from, c.first_pos), hi = std::min(to, c.first_pos + c.wanted);
        for (int64_t p = lo; p < hi; ++p) tokens[p] = c.tokens[static_cast<size_t>(p - c.first_pos)];
      });
  return to - from;
}

}  // namespace colikv
