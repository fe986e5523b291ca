// The internals bench_access.h offers, and the only file of the benchmark
// that includes src/ headers.
#include "bench_access.h"

#include "core/chunk_codec.h"
#include "sqlite/sqlite_connection.h"
#include "store/store_impl.h"
#if COLIKV_WITH_POSTGRES
#include "postgres/pg_catalog.h"
#endif

namespace colikv_bench {
namespace access {

namespace {

colikv::detail::PlaneList plane_list(const std::vector<CodecPlane>& planes) {
  colikv::detail::PlaneList out;
  out.reserve(planes.size());
  for (const CodecPlane& p : planes) out.push_back({p.base, p.width, p.stride});
  return out;
}

}  // namespace

CodecChunk encode_chunk(int64_t n_tokens, const int32_t* tokens, const std::vector<CodecPlane>& planes,
                        int zstd_level) {
  colikv::detail::EncodedChunk e = colikv::detail::encode_chunk(n_tokens, tokens, plane_list(planes), zstd_level);
  CodecChunk out;
  out.payload = std::move(e.payload);
  out.compressed = e.compressed;
  out.raw_size = e.raw_size;
  out.checksum = e.checksum;
  return out;
}

void decode_chunk(const CodecChunk& chunk, int64_t n_tokens, const int32_t* tokens,
                  const std::vector<CodecPlane>& planes) {
  colikv::detail::decode_chunk(chunk.payload.data(), chunk.payload.size(), chunk.compressed, chunk.raw_size,
                               chunk.checksum, n_tokens, tokens, plane_list(planes));
}

struct StoreConnection::Impl {
  SQLite::Database db;
};

StoreConnection::StoreConnection(const std::string& path, const colikv::Options& options)
    : impl_(new Impl{colikv::detail::open_store(path, options)}) {}

StoreConnection::~StoreConnection() = default;

sqlite3* StoreConnection::handle() const { return impl_->db.getHandle(); }

int64_t round_trips(colikv::Store& store) {
#if COLIKV_WITH_POSTGRES
  if (auto* pg = dynamic_cast<colikv::detail::PgCatalog*>(&colikv::detail::StoreAccess::catalog(store)))
    return pg->connection().round_trips();
#else
  (void)store;
#endif
  return -1;
}

int64_t link_round_trips(colikv::Store& store) {
#if COLIKV_WITH_POSTGRES
  if (auto* pg = dynamic_cast<colikv::detail::PgCatalog*>(&colikv::detail::StoreAccess::catalog(store)))
    return pg->link_round_trips();
#else
  (void)store;
#endif
  return -1;
}

}  // namespace access
}  // namespace colikv_bench
