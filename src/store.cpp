#include "colikv/store.h"

#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cerrno>
#include <cstring>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "chunk_codec.h"
#include "eviction.h"
#include "migrations.h"
#include "sqlite_util.h"
#include "store_impl.h"
#include "store_limits.h"

namespace colikv {

using detail::ChunkHash;
using detail::ConversationRow;
using detail::EncodedChunk;
using detail::ModelRow;
using detail::PlaneList;
using detail::PlaneRef;
using detail::SqlTransaction;
using detail::StoredChunk;
using detail::with_context;

namespace {

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t file_size_or_zero(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
}

int open_flags(const Options& o) {
  if (o.read_only) return SQLite::OPEN_READONLY;
  return SQLite::OPEN_READWRITE | (o.create_if_missing ? SQLite::OPEN_CREATE : 0);
}

std::string file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

std::string parent_dir(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// Reports a refusal plainly ("permission denied") instead of SQLite's
// "unable to open database file". access(), not open(): closing a descriptor
// of the file would drop the POSIX locks of this process's other connections.
void check_access(const std::string& path, bool write, const std::string& what) {
  if (::access(path.c_str(), R_OK) != 0)
    throw Error(ErrorCode::kIO, what + ": cannot read it: " + std::strerror(errno));
  if (write && ::access(path.c_str(), W_OK) != 0)
    throw Error(ErrorCode::kReadOnly, what + ": cannot write it: " + std::strerror(errno) + "; open it read-only to read it");
}

// SQLite blocks forever opening a FIFO, answers "disk I/O error" for a
// directory and "unable to open database file" for a missing directory: the
// path is checked first, so the library (and the C API) say what is wrong.
// The -wal and -shm files SQLite opens beside it are held to the same rule.
void check_store_path(const std::string& path, const Options& o) {
  const std::string what = "store " + path;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno != ENOENT)
      throw Error(ErrorCode::kIO, what + ": cannot look at it: " + std::strerror(errno));
    if (o.read_only) throw Error(ErrorCode::kNotFound, what + ": no such file (opened read-only)");
    if (!o.create_if_missing) throw Error(ErrorCode::kNotFound, what + ": no such file");
    const std::string dir = parent_dir(path);
    struct stat ds;
    if (::stat(dir.c_str(), &ds) != 0)
      throw Error(ErrorCode::kNotFound, what + ": cannot create it: directory " + dir + ": " + std::strerror(errno));
    if (!S_ISDIR(ds.st_mode))
      throw Error(ErrorCode::kInvalidArgument, what + ": cannot create it: " + dir + " is not a directory");
    return;
  }
  if (!S_ISREG(st.st_mode))
    throw Error(ErrorCode::kInvalidArgument, what + ": " + file_kind(st.st_mode) + ", not a store file");
  for (const char* suffix : {"-wal", "-shm"}) {
    struct stat side;
    if (::stat((path + suffix).c_str(), &side) == 0 && !S_ISREG(side.st_mode))
      throw Error(ErrorCode::kInvalidArgument, what + ": " + path + suffix + " is " + file_kind(side.st_mode) +
                                                   ", not SQLite's " + (suffix[1] == 'w' ? "WAL" : "shared-memory") +
                                                   " file");
  }
  check_access(path, !o.read_only, what);
}

SQLite::Database open_database(const std::string& path, const Options& o) {
  check_store_path(path, o);
  return with_context("store " + path + ": open", [&] {
    return SQLite::Database(path, open_flags(o), o.busy_timeout_ms, o.vfs_name);
  });
}

// The largest power of two of tokens whose chunk stays within target bytes.
int64_t chunk_tokens_for(const ModelSignature& m, int64_t target_bytes) {
  const int64_t per_token = detail::token_raw_bytes(m);
  target_bytes = std::min(target_bytes, detail::kMaxChunkRawBytes);
  int64_t c = 1;
  while (c < detail::kMaxChunkTokens && (c * 2) * per_token <= target_bytes) c *= 2;
  return c;
}

ChunkHash blob_to_hash(const SQLite::Column& col) {
  ChunkHash h{};
  if (col.getBytes() == static_cast<int>(h.size())) std::memcpy(h.data(), col.getBlob(), h.size());
  return h;
}

// A chunk's content digest column (chunk_meta.digest): absent (NULL) for a
// chunk written before schema 5, whose chunks.hash is its chain hash.
std::optional<ChunkHash> digest_column(const SQLite::Column& col) {
  if (col.isNull()) return std::nullopt;
  return blob_to_hash(col);
}

// Does a stored chunk's key (chunks.hash) say it sits at chain hash `chain`?
bool key_matches(const ChunkHash& stored, const std::optional<ChunkHash>& digest, const ChunkHash& chain) {
  return stored == (digest ? detail::chunk_key(chain, *digest) : chain);
}

std::vector<int32_t> parse_tokens_or_throw(const SQLite::Column& col, int64_t expect_n,
                                           const std::string& where) {
  std::vector<int32_t> out;
  // Sizes first: a list longer than the library writes for expect_n ids is
  // not parsed (its ids would be held in memory).
  if (expect_n < 1 || expect_n > detail::kMaxChunkTokens || col.getBytes() > detail::max_tokens_json_bytes(expect_n))
    throw Error(ErrorCode::kCorrupt, where + ": token list of " + std::to_string(col.getBytes()) + " bytes for " +
                                         std::to_string(expect_n) + " token ids is not one colikv writes");
  const char* text = static_cast<const char*>(col.getBlob());
  if (!detail::parse_tokens_json(text ? text : "", static_cast<size_t>(col.getBytes()), out) ||
      static_cast<int64_t>(out.size()) != expect_n)
    throw Error(ErrorCode::kCorrupt, where + ": token list is not a JSON array of " +
                                         std::to_string(expect_n) + " token ids");
  return out;
}

// Runs a read of stored rows. SQLITE_TOOBIG there means a value over the
// connection's SQLITE_LIMIT_LENGTH: one no colikv writes, so the store is
// damaged or hostile, not the caller's argument.
template <class F>
auto read_rows(const std::string& what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const SQLite::Exception& e) {
    if ((e.getErrorCode() & 0xff) == SQLITE_TOOBIG)
      throw Error(ErrorCode::kCorrupt, what + ": a stored value is larger than any colikv writes (" +
                                           std::to_string(detail::kMaxStoredValueBytes) + " bytes)");
    detail::rethrow_sqlite(e, what);
  }
}

std::string range_text(int64_t a, int64_t b) {
  return "positions [" + std::to_string(a) + ", " + std::to_string(b) + ")";
}

void check_kv_pointers(const ModelSignature& m, const void* const* lc, const void* const* rc,
                       const void* const* ic, const std::string& where) {
  if (!lc || !rc) throw Error(ErrorCode::kInvalidArgument, where + ": Lc and Rc must not be null");
  int64_t indexed = 0;
  for (int l = 0; l < m.n_layers; ++l) {
    if (!lc[l] || !rc[l])
      throw Error(ErrorCode::kInvalidArgument, where + ": Lc[" + std::to_string(l) + "] or Rc[" +
                                                   std::to_string(l) + "] is null");
    if (ic && ic[l]) ++indexed;
  }
  if (indexed != m.n_indexed)
    throw Error(ErrorCode::kInvalidArgument,
                where + ": Ic has " + std::to_string(indexed) + " non-null layers but the model has n_indexed=" +
                    std::to_string(m.n_indexed));
}

template <class Ptr>
PlaneList engine_planes_of(const ModelSignature& m, Ptr const* lc, Ptr const* rc, Ptr const* ic, int64_t first) {
  PlaneList planes;
  planes.reserve(static_cast<size_t>(2 * m.n_layers + m.n_indexed));
  for (int l = 0; l < m.n_layers; ++l) {
    planes.push_back({const_cast<float*>(lc[l]) + first * m.kv_lora, m.kv_lora, m.kv_lora});
    planes.push_back({const_cast<float*>(rc[l]) + first * m.qk_rope, m.qk_rope, m.qk_rope});
  }
  if (m.n_indexed > 0)
    for (int l = 0; l < m.n_layers; ++l)
      if (ic[l]) planes.push_back({const_cast<float*>(ic[l]) + first * m.index_hd, m.index_hd, m.index_hd});
  return planes;
}

}  // namespace

namespace detail {

PlaneList engine_planes(const ModelSignature& m, const KvSource& kv, int64_t first_pos) {
  return engine_planes_of(m, kv.Lc, kv.Rc, kv.Ic, first_pos);
}

PlaneList engine_planes(const ModelSignature& m, const KvTarget& kv, int64_t first_pos) {
  return engine_planes_of(m, kv.Lc, kv.Rc, kv.Ic, first_pos);
}

PlaneList record_planes(const ModelSignature& m, uint8_t* records) {
  const int64_t stride = m.record_bytes() / 4;
  float* f = reinterpret_cast<float*>(records + 4);
  PlaneList planes;
  for (int l = 0; l < m.n_layers; ++l) {
    planes.push_back({f, m.kv_lora, stride});
    f += m.kv_lora;
    planes.push_back({f, m.qk_rope, stride});
    f += m.qk_rope;
  }
  for (int k = 0; k < m.n_indexed; ++k) {
    planes.push_back({f, m.index_hd, stride});
    f += m.index_hd;
  }
  return planes;
}

PlaneList packed_planes(const ModelSignature& m, float* buf, int64_t n) {
  PlaneList planes;
  for (int l = 0; l < m.n_layers; ++l) {
    planes.push_back({buf, m.kv_lora, m.kv_lora});
    buf += n * m.kv_lora;
    planes.push_back({buf, m.qk_rope, m.qk_rope});
    buf += n * m.qk_rope;
  }
  for (int k = 0; k < m.n_indexed; ++k) {
    planes.push_back({buf, m.index_hd, m.index_hd});
    buf += n * m.index_hd;
  }
  return planes;
}

}  // namespace detail

// ---------------------------------------------------------------------------
// Background checkpoints

namespace detail {

// Copies the WAL back into the database file on its own thread and
// connection, so that a commit does not wait for that second write of every
// byte and its fsync (measured on 2.5 MB blobs: 353 MB/s of SQL writes with
// SQLite's inline auto-checkpoint, 944 MB/s without it). It replaces SQLite's
// auto-checkpoint (the WAL hook is ours): at kSoftPages WAL pages after a
// commit the thread is woken for a PASSIVE checkpoint, which blocks neither
// readers nor the writer; at kHardPages the committing thread waits for it and
// checkpoints inline, so the WAL stays bounded when writes outrun it.
//
// SQLite rewrites the WAL from its start only when a write transaction
// begins on a WAL whose every frame was copied back; an append that begins
// while the previous one's checkpoint runs makes the WAL grow instead, until
// kHardPages stalls a commit (measured: every 4th 92 MB turn took +280 ms).
// So an append waits for a running checkpoint before it begins (its chunks
// keep encoding meanwhile): wait_before_write().
class Checkpointer {
 public:
  static constexpr int kSoftPages = 1000;  // SQLite's default auto-checkpoint
  static constexpr int kHardPages = 4000;

  Checkpointer(sqlite3* main, std::string path) : main_(main), path_(std::move(path)) {
    thread_ = std::thread([this] { run(); });
    sqlite3_wal_hook(main_, &Checkpointer::on_commit, this);
  }
  ~Checkpointer() {
    sqlite3_wal_hook(main_, nullptr, nullptr);
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
    if (db_) sqlite3_close(db_);
  }
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  // Waits until no checkpoint is pending or running, if the last commit left
  // at least kSoftPages in the WAL.
  void wait_before_write() {
    if (wal_pages_.load() < kSoftPages || failed_) return;
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return stop_ || (!pending_ && !busy_); });
  }

 private:
  static int on_commit(void* arg, sqlite3* h, const char* name, int pages) {
    auto* self = static_cast<Checkpointer*>(arg);
    self->wal_pages_ = pages;
    if (pages >= kHardPages || (pages >= kSoftPages && self->failed_)) {
      std::unique_lock<std::mutex> lock(self->mu_);
      self->cv_.wait(lock, [self] { return !self->busy_; });
      lock.unlock();
      sqlite3_wal_checkpoint_v2(h, name, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
    } else if (pages >= kSoftPages) {
      {
        std::lock_guard<std::mutex> lock(self->mu_);
        self->pending_ = true;
      }
      self->cv_.notify_all();
    }
    return SQLITE_OK;
  }

  void run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [this] { return stop_ || pending_; });
      if (stop_) return;
      pending_ = false;
      busy_ = true;
      lock.unlock();
      if (!db_ && !failed_) {
        if (sqlite3_open_v2(path_.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr) != SQLITE_OK) {
          sqlite3_close(db_);
          db_ = nullptr;
          failed_ = true;  // the committing thread checkpoints inline from now on
        } else if (sqlite3_exec(db_, "SELECT count(*) FROM sqlite_schema", nullptr, nullptr, nullptr) != SQLITE_OK) {
          // A connection learns that the file is in WAL mode from its first
          // read; until then sqlite3_wal_checkpoint_v2 does nothing and says
          // SQLITE_OK. Not readable now (busy): try again next time.
          sqlite3_close(db_);
          db_ = nullptr;
        }
      }
      // Errors (busy, I/O) leave the frames in the WAL, where they are safe;
      // the next commit past kSoftPages tries again.
      if (db_) sqlite3_wal_checkpoint_v2(db_, "main", SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
      lock.lock();
      busy_ = false;
      cv_.notify_all();
    }
  }

  sqlite3* main_;
  std::string path_;
  sqlite3* db_ = nullptr;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false, pending_ = false, busy_ = false;
  std::atomic<bool> failed_{false};
  std::atomic<int> wal_pages_{0};
  std::thread thread_;
};

}  // namespace detail

// ---------------------------------------------------------------------------
// Opening

Store::Impl::Impl(const std::string& p, const Options& o)
    : path(p), options(o), db(open_database(p, o)), pool(o.threads) {
  const std::string what = "store " + path;
  sqlite3* h = db.getHandle();
  if (options.defensive) {
    // A store may come from someone else: no schema-defined code runs, and
    // SQL cannot corrupt the file on purpose.
    sqlite3_db_config(h, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
    sqlite3_db_config(h, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, nullptr);
    sqlite3_db_config(h, SQLITE_DBCONFIG_ENABLE_TRIGGER, 0, nullptr);
    sqlite3_db_config(h, SQLITE_DBCONFIG_ENABLE_VIEW, 0, nullptr);
  }
  // No value larger than any the library writes is ever loaded, whatever a
  // store holds or computes; and the page cache has SQLite's default size,
  // not the one the file's header suggests.
  sqlite3_limit(h, SQLITE_LIMIT_LENGTH, static_cast<int>(detail::kMaxStoredValueBytes));
  detail::exec(db, "PRAGMA cache_size=-2000", what);
  // Setting up a new store races other processes opening it: switching to
  // WAL and the first migration need locks that SQLite may refuse at once
  // (SQLITE_BUSY without calling the busy handler, to avoid a deadlock), so
  // the setup is retried until the busy timeout has passed.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(options.busy_timeout_ms);
  for (;;) {
    try {
      // Any read fails here on a file that is not a database.
      // Version and schema are read in one snapshot: another process may be
      // creating or migrating the schema right now.
      int64_t version = 0, tables = 0;
      {
        SqlTransaction snapshot(db, what, SqlTransaction::kRead);
        with_context(what, [&] {
          SQLite::Statement q(db, "SELECT (SELECT user_version FROM pragma_user_version), (SELECT count(*) FROM sqlite_schema)");
          q.executeStep();
          version = q.getColumn(0).getInt64();
          tables = q.getColumn(1).getInt64();
        });
        if (version == 0 && tables > 0)
          throw Error(ErrorCode::kCorrupt, what + ": not a colikv store (schema version 0 with " +
                                               std::to_string(tables) + " objects of another application)");
        if (version > detail::latest_schema_version())
          throw Error(ErrorCode::kVersion, what + ": schema version " + std::to_string(version) +
                                               " is newer than this library's " +
                                               std::to_string(detail::latest_schema_version()) +
                                               "; upgrade colikv to open it");
        if (version < 0)
          throw Error(ErrorCode::kCorrupt, what + ": not a colikv store (schema version " + std::to_string(version) + ")");
        detail::check_schema(db, static_cast<int>(version), what);
        snapshot.commit();
      }
      if (options.read_only && version == 0)
        throw Error(ErrorCode::kCorrupt, what + ": not a colikv store (" +
                                             (file_size_or_zero(path) == 0 ? std::string("an empty file")
                                                                           : std::string("an SQLite database without colikv's tables")) +
                                             ")");
      if (options.read_only) {
        if (version < detail::latest_schema_version())
          throw Error(ErrorCode::kVersion, what + ": schema version " + std::to_string(version) +
                                               " needs migrating to " +
                                               std::to_string(detail::latest_schema_version()) +
                                               ", which a read-only open cannot do");
      } else {
        if (version == 0 && tables == 0) {
          int ps = std::clamp(options.page_size, 512, 65536);
          detail::exec(db, "PRAGMA page_size=" + std::to_string(ps), what);
        }
        std::string mode = with_context(what, [&] { return db.execAndGet("PRAGMA journal_mode=WAL").getString(); });
        if (mode != "wal")
          throw Error(ErrorCode::kIO, what + ": cannot use the WAL journal (PRAGMA journal_mode answered '" + mode + "')");
      }
      detail::exec(db, options.synchronous == Synchronous::kFull ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL",
                   what);
      detail::exec(db, "PRAGMA foreign_keys=ON", what);
      if (!options.read_only) detail::apply_migrations(db, what);
      break;
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kBusy || std::chrono::steady_clock::now() >= deadline) throw;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  if (!options.read_only) {
    // A WAL that grew while a long reader blocked checkpoints is cut back to
    // the auto-checkpoint size (1000 pages) when it is next restarted.
    const int64_t ps = detail::query_int(db, "PRAGMA page_size", what);
    detail::exec(db, "PRAGMA journal_size_limit=" + std::to_string(ps * 1000), what);
    // Checkpoints run in the background; with a custom VFS (fault injection)
    // SQLite's inline auto-checkpoint stays, so its I/O sequence is the caller's.
    if (options.vfs_name.empty()) checkpointer = std::make_shared<detail::Checkpointer>(h, path);
  }
}

std::string Store::Impl::where(const std::string& id) const {
  return id.empty() ? "store " + path : "store " + path + ": conversation '" + id + "'";
}

bool Store::Impl::is_json(const std::string& text) {
  return with_context(where(), [&] {
    SQLite::Statement q(db, "SELECT json_valid(?)");
    q.bind(1, text);
    q.executeStep();
    return q.getColumn(0).getInt() == 1;
  });
}

void Store::Impl::require_writable(const std::string& op) const {
  if (options.read_only)
    throw Error(ErrorCode::kReadOnly, "store " + path + ": " + op + ": the store is opened read-only");
}

std::optional<ConversationRow> Store::Impl::find_conversation(const std::string& id) {
  return with_context(where(id), [&]() -> std::optional<ConversationRow> {
    SQLite::Statement q(db,
                        "SELECT conversation_id, model_id, token_count, generation, precision "
                        "FROM conversations WHERE name = ?");
    q.bind(1, id);
    if (!q.executeStep()) return std::nullopt;
    ConversationRow r;
    r.id = q.getColumn(0).getInt64();
    r.name = id;
    r.model_id = q.getColumn(1).getInt64();
    r.count = q.getColumn(2).getInt64();
    r.generation = q.getColumn(3).getInt64();
    r.precision = q.getColumn(4).getString();
    return r;
  });
}

ConversationRow Store::Impl::get_conversation(const std::string& id) {
  auto r = find_conversation(id);
  if (!r) throw Error(ErrorCode::kNotFound, where(id) + ": no such conversation");
  return *r;
}

ModelRow Store::Impl::model_by_id(int64_t model_id) {
  auto it = models_by_id_.find(model_id);
  if (it != models_by_id_.end()) return it->second;
  return with_context(where(), [&] {
    SQLite::Statement q(db,
                        "SELECT n_layers, kv_lora, qk_rope, index_hd, n_indexed, vocab, weights_id, "
                        "chunk_tokens, signature FROM models WHERE model_id = ?");
    q.bind(1, model_id);
    if (!q.executeStep())
      throw Error(ErrorCode::kCorrupt, where() + ": model row " + std::to_string(model_id) + " is missing");
    ModelRow r;
    r.id = model_id;
    r.sig.n_layers = q.getColumn(0).getInt();
    r.sig.kv_lora = q.getColumn(1).getInt();
    r.sig.qk_rope = q.getColumn(2).getInt();
    r.sig.index_hd = q.getColumn(3).getInt();
    r.sig.n_indexed = q.getColumn(4).getInt();
    r.sig.vocab = q.getColumn(5).getInt();
    r.sig.weights_id = q.getColumn(6).getString();
    r.chunk_tokens = q.getColumn(7).getInt64();
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
    if (r.text != q.getColumn(8).getString())
      throw Error(ErrorCode::kCorrupt, where() + ": model row " + std::to_string(model_id) +
                                           " is inconsistent (its signature text does not match its fields)");
    models_by_id_[model_id] = r;
    return r;
  });
}

std::optional<ModelRow> Store::Impl::find_model(const ModelSignature& sig) {
  int64_t id = with_context(where(), [&]() -> int64_t {
    SQLite::Statement q(db, "SELECT model_id FROM models WHERE signature = ?");
    q.bind(1, sig.to_string());
    return q.executeStep() ? q.getColumn(0).getInt64() : 0;
  });
  if (id == 0) return std::nullopt;
  return model_by_id(id);
}

ModelRow Store::Impl::ensure_model(const ModelSignature& sig) {
  if (auto m = find_model(sig)) return *m;
  with_context(where(), [&] {
    SQLite::Statement q(db,
                        "INSERT INTO models (signature, n_layers, kv_lora, qk_rope, index_hd, n_indexed, vocab, "
                        "weights_id, record_bytes, chunk_tokens, created_ms) VALUES (?,?,?,?,?,?,?,?,?,?,?)");
    q.bind(1, sig.to_string());
    q.bind(2, sig.n_layers);
    q.bind(3, sig.kv_lora);
    q.bind(4, sig.qk_rope);
    q.bind(5, sig.index_hd);
    q.bind(6, sig.n_indexed);
    q.bind(7, sig.vocab);
    q.bind(8, sig.weights_id);
    q.bind(9, static_cast<int64_t>(sig.record_bytes()));
    q.bind(10, static_cast<int64_t>(chunk_tokens_for(sig, options.chunk_target_bytes)));
    q.bind(11, static_cast<int64_t>(now_ms()));
    q.exec();
  });
  return *find_model(sig);
}

void Store::Impl::free_unused_chunks(const std::vector<int64_t>& chunk_ids) {
  if (chunk_ids.empty()) return;
  with_context(where(), [&] {
    SQLite::Statement del(db,
                          "DELETE FROM chunks WHERE chunk_id = ?1 AND NOT EXISTS "
                          "(SELECT 1 FROM conversation_chunks WHERE chunk_id = ?1)");
    for (int64_t id : chunk_ids) {
      del.bind(1, id);
      del.exec();
      del.reset();
    }
  });
}

// ---------------------------------------------------------------------------
// Append

namespace {

// What a conversation holds before an append, read outside the write lock.
struct ChunkSummary {
  int64_t chunk_id;
  ChunkHash key;    // chunks.hash
  ChunkHash chain;  // chunk_meta.chain_hash
  std::optional<ChunkHash> digest;  // chunk_meta.digest
  int64_t n_tokens;
  bool evicted;  // its payload was evicted (only token ids are kept)
  int64_t seq;
  int64_t first_pos;
};

std::vector<ChunkSummary> chunk_summaries(SQLite::Database& db, int64_t conversation_id) {
  std::vector<ChunkSummary> out;
  // length(payload), not "payload IS NULL": as a result column the latter
  // makes SQLite 3.40 read the whole blob through its overflow pages (every
  // append paid ~15 ms per 100 MB committed); length() reads only the header.
  SQLite::Statement q(db,
                      "SELECT ch.chunk_id, ch.hash, k.chain_hash, k.digest, ch.n_tokens, length(ch.payload) IS NULL, "
                      "cc.seq, ch.first_pos FROM conversation_chunks cc JOIN chunks ch ON ch.chunk_id = cc.chunk_id "
                      "LEFT JOIN chunk_meta k ON k.chunk_id = ch.chunk_id WHERE cc.conversation_id = ? ORDER BY cc.seq");
  q.bind(1, conversation_id);
  while (q.executeStep())
    out.push_back({q.getColumn(0).getInt64(), blob_to_hash(q.getColumn(1)), blob_to_hash(q.getColumn(2)),
                   digest_column(q.getColumn(3)), q.getColumn(4).getInt64(), q.getColumn(5).getInt() != 0,
                   q.getColumn(6).getInt64(), q.getColumn(7).getInt64()});
  return out;
}

[[noreturn]] void throw_negative_count(const ConversationRow& conv, const std::string& here) {
  throw Error(ErrorCode::kCorrupt, here + ": its token count is negative (" + std::to_string(conv.count) + ")");
}

// The chunk list must cover exactly [0, count): chunks seq 0, 1, ..., each
// full but the last, which ends at the count. Checked before anything indexes
// the list by a position, so a count or a list altered by hand is reported,
// never followed out of bounds.
void check_chunk_list(const ConversationRow& conv, const ModelRow& model, const std::vector<ChunkSummary>& chunks,
                      const std::string& here) {
  if (conv.count < 0) throw_negative_count(conv, here);
  const int64_t C = model.chunk_tokens;
  const int64_t wanted = conv.count / C + (conv.count % C != 0 ? 1 : 0);
  if (static_cast<int64_t>(chunks.size()) != wanted)
    throw Error(ErrorCode::kCorrupt, here + ": its count of " + std::to_string(conv.count) + " tokens needs " +
                                         std::to_string(wanted) + " chunks but its chunk list has " +
                                         std::to_string(chunks.size()));
  for (int64_t k = 0; k < wanted; ++k) {
    const ChunkSummary& c = chunks[static_cast<size_t>(k)];
    const int64_t n = k + 1 < wanted ? C : conv.count - k * C;
    if (c.seq != k || c.first_pos != k * C || c.n_tokens != n)
      throw Error(ErrorCode::kCorrupt, here + ": chunk " + std::to_string(c.chunk_id) + " (seq " + std::to_string(c.seq) +
                                           ") does not cover " + range_text(k * C, k * C + n) + " as the count of " +
                                           std::to_string(conv.count) + " says");
  }
}

std::vector<int32_t> chunk_tokens_by_id(SQLite::Database& db, int64_t chunk_id, int64_t n, const std::string& where) {
  SQLite::Statement q(db, "SELECT tokens FROM chunks WHERE chunk_id = ?");
  q.bind(1, chunk_id);
  if (!q.executeStep()) throw Error(ErrorCode::kCorrupt, where + ": chunk " + std::to_string(chunk_id) + " is missing");
  return parse_tokens_or_throw(q.getColumn(0), n, where + ": chunk " + std::to_string(chunk_id));
}

// Content digests of the chunks stored with values at chain hash `chain`: an
// append whose chunk has one of them links that chunk instead of encoding.
std::vector<ChunkHash> stored_digests(SQLite::Database& db, int64_t model_id, const ChunkHash& chain) {
  SQLite::Statement q(db,
                      "SELECT digest FROM chunk_meta WHERE model_id = ? AND chain_hash = ? AND payload_bytes > 0 "
                      "AND digest IS NOT NULL");
  q.bind(1, model_id);
  q.bind(2, chain.data(), static_cast<int>(chain.size()));
  std::vector<ChunkHash> out;
  while (q.executeStep()) out.push_back(blob_to_hash(q.getColumn(0)));
  return out;
}

// A conversation's row, model and chunk list, from one read snapshot.
struct ConversationState {
  ConversationRow conv;
  ModelRow model;
  std::vector<ChunkSummary> chunks;
};

ConversationState read_state(Store::Impl& s, const std::string& id, const std::string& here) {
  SqlTransaction snapshot(s.db, here, SqlTransaction::kRead);
  ConversationState st;
  st.conv = s.get_conversation(id);
  st.model = s.model_by_id(st.conv.model_id);
  st.chunks = with_context(here, [&] { return chunk_summaries(s.db, st.conv.id); });
  check_chunk_list(st.conv, st.model, st.chunks, here);
  return st;
}

struct WriteChunk {
  int64_t seq = 0;
  int64_t first_pos = 0;
  ChunkHash hash{};  // its chain hash
  detail::ProducedChunk produced;
  ChunkHash prev{};  // the chain hash before this chunk (unused at seq 0), for chunk_meta
};

// A token-only chunk: cut from an evicted one, its values are unknown.
bool token_only(const EncodedChunk& e) { return e.payload.empty() && !e.skipped; }

// Stores one chunk, or finds the stored chunk with the same key (the same
// place and the same content), and returns its id; 0 when the chunk was
// skipped as stored already but is no longer there with its values (the
// caller encodes it and calls again).
int64_t put_chunk(SQLite::Database& db, int64_t model_id, const WriteChunk& w, const std::string& precision) {
  const EncodedChunk& e = w.produced.encoded;
  const ChunkHash key = detail::chunk_key(w.hash, token_only(e) ? detail::kNoValuesDigest : e.digest);
  detail::ChunkMeta meta;
  meta.model_id = model_id;
  meta.precision = precision;
  meta.first_pos = w.first_pos;
  meta.prev = w.prev;
  meta.chain = w.hash;
  meta.digest = token_only(e) ? detail::kNoValuesDigest : e.digest;
  meta.payload_bytes = static_cast<int64_t>(e.payload.size());
  {
    SQLite::Statement q(db, "SELECT chunk_id, length(payload) IS NULL FROM chunks WHERE model_id = ? AND hash = ?");
    q.bind(1, model_id);
    q.bind(2, key.data(), static_cast<int>(key.size()));
    if (q.executeStep()) {
      int64_t id = q.getColumn(0).getInt64();
      bool evicted = q.getColumn(1).getInt() != 0;
      if (!evicted || token_only(e)) return id;
      if (e.skipped) return 0;  // evicted meanwhile: the caller encodes it
      // The same content evicted: its values come back for every conversation using it.
      SQLite::Statement u(db, "UPDATE chunks SET compression = ?, raw_size = ?, checksum = ?, payload = ? WHERE chunk_id = ?");
      u.bind(1, e.compressed ? "zstd" : "none");
      u.bind(2, static_cast<int64_t>(e.raw_size));
      u.bind(3, static_cast<int64_t>(e.checksum));
      u.bindNoCopy(4, e.payload.data(), static_cast<int>(e.payload.size()));
      u.bind(5, id);
      u.exec();
      meta.tokens_json = detail::tokens_to_json(w.produced.tokens.data(), static_cast<int64_t>(w.produced.tokens.size()));
      detail::record_chunk_payload(db, id, meta);
      return id;
    }
  }
  if (e.skipped) return 0;  // vanished meanwhile: the caller re-encodes it
  SQLite::Statement ins(db,
                        "INSERT INTO chunks (model_id, hash, first_pos, n_tokens, tokens, precision, compression, "
                        "raw_size, checksum, payload) VALUES (?,?,?,?,?,?,?,?,?,?)");
  ins.bind(1, model_id);
  ins.bind(2, key.data(), static_cast<int>(key.size()));
  ins.bind(3, static_cast<int64_t>(w.first_pos));
  ins.bind(4, static_cast<int64_t>(w.produced.tokens.size()));
  meta.tokens_json = detail::tokens_to_json(w.produced.tokens.data(), static_cast<int64_t>(w.produced.tokens.size()));
  ins.bind(5, meta.tokens_json);
  ins.bind(6, precision);
  ins.bind(7, e.compressed ? "zstd" : "none");
  ins.bind(8, static_cast<int64_t>(e.raw_size));
  ins.bind(9, static_cast<int64_t>(e.checksum));
  if (e.payload.empty())
    ins.bind(10);  // a token-only chunk (a truncate or fork inside an evicted chunk): evicted too
  else
    ins.bindNoCopy(10, e.payload.data(), static_cast<int>(e.payload.size()));
  ins.exec();
  const int64_t new_id = db.getLastInsertRowid();
  detail::record_chunk_meta(db, new_id, meta);
  return new_id;
}

}  // namespace

void Store::Impl::append(const detail::AppendRequest& req) {
  const std::string here = where(req.id);
  require_writable("append to conversation '" + req.id + "'");
  req.model.validate();
  if (detail::token_raw_bytes(req.model) > detail::kMaxChunkRawBytes)
    throw Error(ErrorCode::kInvalidArgument, here + ": one record of model [" + req.model.to_string() + "] takes " +
                                                 std::to_string(detail::token_raw_bytes(req.model)) +
                                                 " bytes, more than the " + std::to_string(detail::kMaxChunkRawBytes >> 20) +
                                                 " MiB a stored chunk may hold");
  if (req.id.empty()) throw Error(ErrorCode::kInvalidArgument, where() + ": conversation id is empty");
  if (req.len < 0) throw Error(ErrorCode::kInvalidArgument, here + ": negative length " + std::to_string(req.len));
  if (req.len > 0 && req.tokens == nullptr && !req.must_create)
    throw Error(ErrorCode::kInvalidArgument, here + ": tokens is null");
  if (req.tokens)
    for (int64_t p = 0; p < req.len; ++p)
      if (req.tokens[p] < 0 || req.tokens[p] >= req.model.vocab)
        throw Error(ErrorCode::kInvalidArgument, here + ": token id " + std::to_string(req.tokens[p]) +
                                                     " at position " + std::to_string(p) + " is outside [0, " +
                                                     std::to_string(req.model.vocab) + ")");

  // 1. Read what is committed, outside the write lock.
  std::optional<ConversationRow> conv;
  std::vector<ChunkSummary> existing;
  std::optional<ModelRow> model;
  // One read snapshot through the divergence check below: a chunk it names
  // cannot be freed by another writer before its tokens are compared.
  std::optional<SqlTransaction> snapshot;
  snapshot.emplace(db, here, SqlTransaction::kRead);
  {
    conv = find_conversation(req.id);
    if (conv && req.must_create)
      throw Error(ErrorCode::kConflict, here + ": a conversation with this id exists already");
    if (conv) {
      model = model_by_id(conv->model_id);
      if (model->sig != req.model)
        throw Error(ErrorCode::kModelMismatch, here + ": stored for model [" + model->text +
                                                   "], but the caller's model is [" + req.model.to_string() + "]");
      existing = with_context(here, [&] { return chunk_summaries(db, conv->id); });
      check_chunk_list(*conv, *model, existing, here);
    } else {
      model = find_model(req.model);
    }
  }
  const int64_t committed = conv ? conv->count : 0;
  if (req.len < committed)
    throw Error(ErrorCode::kInvalidArgument, here + ": append of " + std::to_string(req.len) +
                                                 " tokens is shorter than the " + std::to_string(committed) +
                                                 " committed; truncate first");
  const int64_t C = model ? model->chunk_tokens : chunk_tokens_for(req.model, options.chunk_target_bytes);
  const std::string precision =
      conv ? conv->precision
           : detail::precision_name(options.new_conversation_precision == Precision::kBf16 ? detail::ChunkPrecision::kBf16
                                                                                           : detail::ChunkPrecision::kF32);
  detail::ChunkPrecision chunk_precision;
  if (!detail::parse_precision(precision, chunk_precision))
    throw Error(ErrorCode::kCorrupt, here + ": unknown precision '" + precision + "'");

  // 2. The caller's tokens [0, committed) must be the stored ones: compare
  // chunk hashes, then the tokens of the first chunk that differs.
  const ChunkHash seed = detail::chain_seed(req.model.to_string(), precision);
  ChunkHash chain = seed;
  const int64_t keep_chunks = committed / C;  // full chunks that stay as they are
  std::vector<ChunkHash> existing_chains;      // the chain hash of each existing chunk
  for (size_t k = 0; k < existing.size(); ++k) {
    const int64_t first = static_cast<int64_t>(k) * C;
    const int64_t n = existing[k].n_tokens;
    ChunkHash h = detail::chain_next(existing_chains.empty() ? seed : existing_chains.back(), req.tokens + first, n);
    existing_chains.push_back(h);
    if (!key_matches(existing[k].key, existing[k].digest, h)) {
      std::vector<int32_t> stored = with_context(here, [&] {
        return chunk_tokens_by_id(db, existing[k].chunk_id, n, here);
      });
      for (int64_t i = 0; i < n; ++i)
        if (stored[i] != req.tokens[first + i])
          throw Error(ErrorCode::kDiverged,
                      here + ": the caller's token at position " + std::to_string(first + i) + " is " +
                          std::to_string(req.tokens[first + i]) + " but the stored one is " +
                          std::to_string(stored[i]) + "; truncate to " + std::to_string(first + i) +
                          " before appending",
                      first + i);
      throw Error(ErrorCode::kCorrupt, here + ": chunk " + std::to_string(existing[k].chunk_id) + " (" +
                                           range_text(first, first + n) +
                                           ") does not match its hash: its token list was altered");
    }
    if (static_cast<int64_t>(k) < keep_chunks) chain = h;
  }
  snapshot.reset();
  // Full chunks whose KV data was evicted are re-saved from the caller's
  // buffers, which hold every position (an append of len == committed re-saves).
  bool resave = false;
  for (int64_t k = 0; k < keep_chunks && k < static_cast<int64_t>(existing.size()); ++k) resave |= existing[k].evicted;
  if (!existing.empty() && existing.back().evicted) resave = true;
  if (resave && !req.tokens) throw Error(ErrorCode::kInvalidArgument, here + ": tokens is null");
  if (req.len == committed && !req.must_create && !resave) return;

  // 3. Plan the chunks to write: the partial last chunk is re-encoded whole.
  std::vector<WriteChunk> plan;
  for (int64_t k = 0; k < keep_chunks && k < static_cast<int64_t>(existing.size()); ++k) {
    if (!existing[k].evicted) continue;
    WriteChunk w;
    w.seq = k;
    w.first_pos = k * C;
    plan.push_back(std::move(w));
  }
  for (int64_t first = keep_chunks * C; first < req.len; first += C) {
    WriteChunk w;
    w.seq = first / C;
    w.first_pos = first;
    w.produced.tokens.clear();
    plan.push_back(std::move(w));
  }
  // With tokens known up front, hash now and skip encoding chunks stored already.
  if (req.tokens) {
    ChunkHash h = chain;
    SqlTransaction hash_snapshot(db, here, SqlTransaction::kRead);
    for (auto& w : plan) {
      const int64_t n = std::min(C, req.len - w.first_pos);
      if (w.seq < keep_chunks) {  // an evicted full chunk, re-saved from the caller's values
        w.prev = w.seq > 0 ? existing_chains[w.seq - 1] : seed;
        w.hash = existing_chains[w.seq];
        w.produced.tokens.assign(req.tokens + w.first_pos, req.tokens + w.first_pos + n);
        continue;
      }
      w.prev = h;
      h = detail::chain_next(h, req.tokens + w.first_pos, n);
      w.hash = h;
      w.produced.tokens.assign(req.tokens + w.first_pos, req.tokens + w.first_pos + n);
      if (model) w.produced.stored_digests = with_context(here, [&] { return stored_digests(db, model->id, w.hash); });
    }
  }

  // Producers always compute the content digest; they skip compressing when
  // an equal chunk is stored at the same place already.
  auto produce = [&](size_t i) -> detail::ProducedChunk {
    WriteChunk& w = plan[i];
    detail::ProducedChunk out;
    out.tokens = w.produced.tokens;
    out.precision = chunk_precision;
    out.stored_digests = w.produced.stored_digests;
    req.produce(w.first_pos, std::min(C, req.len - w.first_pos), out);
    return out;
  };

  // Encoding starts now on the pool and runs up to max_staged_bytes (raw) ahead
  // of the writer: it overlaps taking the write lock and writing the earlier
  // chunks. The encoder outpaces SQLite's writes (docs/benchmarks.md,
  // "bounds"), so the lock is held for about the SQL writes alone.
  const int64_t chunk_raw = std::max<int64_t>(1, C * 4 * req.model.floats_per_token());
  const int64_t ahead_bytes = req.max_staged_bytes >= 0 ? req.max_staged_bytes : options.max_staged_bytes;
  const size_t ahead = std::max<size_t>(window(), static_cast<size_t>(std::max<int64_t>(0, ahead_bytes / chunk_raw)));
  detail::OrderedJobs<detail::ProducedChunk> encoded(pool, plan.size(), ahead, produce);

  // 4. One write transaction: chunks, chunk list and count together.
  if (checkpointer) checkpointer->wait_before_write();
  SqlTransaction txn(db, here);
  with_context(here, [&] {
    auto now_conv = find_conversation(req.id);
    if (conv.has_value() != now_conv.has_value() || (conv && now_conv->generation != conv->generation))
      throw Error(ErrorCode::kConflict, here + ": another writer changed the conversation while this append was "
                                               "prepared; reload and retry");
    ModelRow m = ensure_model(req.model);
    if (m.chunk_tokens != C)
      throw Error(ErrorCode::kConflict, here + ": the model's chunk size was set by another writer meanwhile; retry");
    int64_t conv_id;
    if (!conv) {
      SQLite::Statement ins(db,
                            "INSERT INTO conversations (name, model_id, precision, created_ms, updated_ms, "
                            "last_used_ms, title, metadata) VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
      const int64_t t = now_ms();
      ins.bind(1, req.id);
      ins.bind(2, m.id);
      ins.bind(3, precision);
      ins.bind(4, t);
      ins.bind(5, t);
      ins.bind(6, t);
      ins.bind(7, req.title);
      ins.bind(8, req.metadata);
      ins.exec();
      conv_id = db.getLastInsertRowid();
    } else {
      conv_id = conv->id;
    }
    // The chunks rewritten at their seq (the partial last one, evicted ones
    // re-saved): freed below unless another conversation uses them.
    std::vector<int64_t> replaced;
    for (const WriteChunk& w : plan)
      if (w.seq < static_cast<int64_t>(existing.size())) replaced.push_back(existing[w.seq].chunk_id);
    SQLite::Statement link(db, "INSERT OR REPLACE INTO conversation_chunks (conversation_id, seq, chunk_id) VALUES (?, ?, ?)");
    ChunkHash h = chain;
    while (!encoded.done()) {
      detail::ProducedChunk r;
      WriteChunk& w = plan[encoded.next(r)];
      w.produced = std::move(r);
      if (!req.tokens) {  // hashes follow the tokens the producer read
        w.prev = h;
        h = detail::chain_next(h, w.produced.tokens.data(), static_cast<int64_t>(w.produced.tokens.size()));
        w.hash = h;
      }
      int64_t id = put_chunk(db, m.id, w, precision);
      if (id == 0) {  // a shared chunk was freed or evicted between our read and our lock
        w.produced.stored_digests.clear();
        req.produce(w.first_pos, static_cast<int64_t>(w.produced.tokens.size()), w.produced);
        id = put_chunk(db, m.id, w, precision);
      }
      link.bind(1, conv_id);
      link.bind(2, static_cast<int64_t>(w.seq));
      link.bind(3, id);
      link.exec();
      link.reset();
      if (req.progress) req.progress(w.first_pos + static_cast<int64_t>(w.produced.tokens.size()), req.len);
      w.produced = detail::ProducedChunk();  // bounded memory: drop it once written
    }
    SQLite::Statement upd(db,
                          "UPDATE conversations SET token_count = ?, generation = generation + 1, updated_ms = ?, "
                          "last_used_ms = ? WHERE conversation_id = ?");
    const int64_t t = now_ms();
    upd.bind(1, static_cast<int64_t>(req.len));
    upd.bind(2, t);
    upd.bind(3, t);
    upd.bind(4, conv_id);
    upd.exec();
    // A replaced chunk stays when it is linked still: by another conversation,
    // or by this one when the same content was re-saved into it.
    free_unused_chunks(replaced);
    // The byte budget: evict least recently used conversations, not this one.
    if (options.max_store_bytes > 0) detail::evict_to_fit(*this, options.max_store_bytes, conv_id);
  });
  txn.commit();
}

// ---------------------------------------------------------------------------
// Scan (load, export)

void Store::Impl::scan(const std::string& id, const ModelSignature* expect, int64_t limit,
                       const std::function<void(const detail::ScanStart&)>& on_start,
                       const std::function<void(StoredChunk&)>& decode,
                       const std::function<void(StoredChunk&)>& consume) {
  const std::string here = where(id);
  SqlTransaction snapshot(db, here, SqlTransaction::kRead);
  detail::ScanStart start;
  start.conv = get_conversation(id);
  start.model = model_by_id(start.conv.model_id);
  if (start.conv.count < 0) throw_negative_count(start.conv, here);
  if (expect && *expect != start.model.sig)
    throw Error(ErrorCode::kModelMismatch, here + ": stored for model [" + start.model.text +
                                               "], but the caller's model is [" + expect->to_string() + "]");
  start.n = (limit >= 0 && limit < start.conv.count) ? limit : start.conv.count;
  on_start(start);
  if (start.n == 0) return;
  const int64_t C = start.model.chunk_tokens;
  const int64_t n_chunks = (start.n + C - 1) / C;

  read_rows(here, [&] {
    SQLite::Statement q(db,
                        "SELECT cc.seq, ch.chunk_id, ch.first_pos, ch.n_tokens, ch.tokens, ch.compression, "
                        "ch.raw_size, ch.checksum, length(ch.payload), ch.hash, ch.precision, k.digest "
                        "FROM conversation_chunks cc JOIN chunks ch ON ch.chunk_id = cc.chunk_id "
                        "LEFT JOIN chunk_meta k ON k.chunk_id = ch.chunk_id "
                        "WHERE cc.conversation_id = ? AND cc.seq < ? ORDER BY cc.seq");
    q.bind(1, start.conv.id);
    q.bind(2, static_cast<int64_t>(n_chunks));
    // Rows are stepped on this thread; decoding runs on the pool, a window at a time.
    std::deque<std::pair<StoredChunk*, std::future<void>>> inflight;
    std::vector<std::unique_ptr<StoredChunk>> owned;
    struct Drain {
      std::deque<std::pair<StoredChunk*, std::future<void>>>& q;
      ~Drain() {
        for (auto& f : q)
          if (f.second.valid()) f.second.wait();
      }
    } drain{inflight};
    // Payloads are read with incremental blob I/O (one copy, straight into a
    // buffer: selecting the column would assemble it in SQLite's own buffer
    // first), into buffers recycled once their chunk is consumed.
    std::vector<std::vector<uint8_t>> spare;
    struct BlobHandle {
      sqlite3_blob* b = nullptr;
      ~BlobHandle() {
        if (b) sqlite3_blob_close(b);
      }
    } blob;
    auto read_payload = [&](StoredChunk& c, int64_t bytes, const std::string& cw) {
      sqlite3* h = db.getHandle();
      int rc = blob.b ? sqlite3_blob_reopen(blob.b, c.chunk_id)
                      : sqlite3_blob_open(h, "main", "chunks", "payload", c.chunk_id, 0, &blob.b);
      if (rc == SQLITE_OK && sqlite3_blob_bytes(blob.b) != bytes) rc = SQLITE_CORRUPT;
      if (!spare.empty()) {
        c.payload = std::move(spare.back());
        spare.pop_back();
      }
      c.payload.resize(static_cast<size_t>(bytes));
      if (rc == SQLITE_OK && bytes > 0) rc = sqlite3_blob_read(blob.b, c.payload.data(), static_cast<int>(bytes), 0);
      if (rc != SQLITE_OK)
        throw Error(detail::error_code_for_sqlite(rc), cw + ": reading its payload: " + sqlite3_errstr(rc));
    };
    auto finish_front = [&] {
      inflight.front().second.get();
      consume(*inflight.front().first);
      spare.push_back(std::move(inflight.front().first->payload));
      inflight.pop_front();
    };
    int64_t expected_seq = 0;
    // The hash chain ties each chunk to the token ids before it: a chunk list
    // pointing at another conversation's chunk is caught here, not loaded.
    ChunkHash chain = detail::chain_seed(start.model.text, start.conv.precision);
    while (q.executeStep()) {
      auto c = std::make_unique<StoredChunk>();
      c->seq = q.getColumn(0).getInt64();
      c->chunk_id = q.getColumn(1).getInt64();
      c->first_pos = q.getColumn(2).getInt64();
      c->n_tokens = q.getColumn(3).getInt64();
      const std::string cw = here + ": chunk " + std::to_string(c->chunk_id) + " (seq " + std::to_string(c->seq) + ", " +
                             range_text(c->seq * C, c->seq * C + c->n_tokens) + ")";
      if (c->seq != expected_seq || c->first_pos != c->seq * C || c->n_tokens < 1 || c->n_tokens > C ||
          (c->first_pos + c->n_tokens < start.n && c->n_tokens != C) ||
          c->first_pos + c->n_tokens > start.conv.count)
        throw Error(ErrorCode::kCorrupt, cw + ": the chunk list does not cover positions [" +
                                             std::to_string(expected_seq * C) + ", ...) as the count of " +
                                             std::to_string(start.conv.count) + " says");
      ++expected_seq;
      c->wanted = std::min(c->n_tokens, start.n - c->first_pos);
      c->tokens = parse_tokens_or_throw(q.getColumn(4), c->n_tokens, cw);
      for (int32_t t : c->tokens)
        if (t < 0 || t >= start.model.sig.vocab)
          throw Error(ErrorCode::kCorrupt, cw + ": token id " + std::to_string(t) + " is outside the vocabulary");
      chain = detail::chain_next(chain, c->tokens.data(), c->n_tokens);
      if (!key_matches(blob_to_hash(q.getColumn(9)), digest_column(q.getColumn(11)), chain))
        throw Error(ErrorCode::kCorrupt, cw + ": chunk hash does not match the token ids before and in it");
      const std::string compression = q.getColumn(5).getString();
      c->compressed = compression == "zstd";
      c->raw_size = q.getColumn(6).getInt64();
      c->checksum = static_cast<uint32_t>(q.getColumn(7).getInt64());
      if (!detail::parse_precision(q.getColumn(10).getString(), c->precision))
        throw Error(ErrorCode::kCorrupt, cw + ": unknown precision '" + q.getColumn(10).getString() + "'");
      SQLite::Column payload = q.getColumn(8);
      if (payload.isNull())
        throw Error(ErrorCode::kEvicted, cw + ": its KV data was evicted; only its token ids are kept", c->first_pos);
      if (!c->compressed && compression != "none")
        throw Error(ErrorCode::kCorrupt, cw + ": unknown compression '" + compression + "'");
      // Sizes are checked against the model before a byte is read, so a
      // crafted blob cannot make a load allocate more than a chunk's worth.
      const int64_t expect_raw =
          c->n_tokens * start.model.sig.floats_per_token() * detail::precision_value_bytes(c->precision);
      if (c->raw_size != expect_raw)
        throw Error(ErrorCode::kCorrupt, cw + ": raw_size is " + std::to_string(c->raw_size) + ", expected " +
                                             std::to_string(expect_raw) + " for its model and precision");
      const int64_t stored = payload.getInt64();
      if (stored > (c->compressed ? expect_raw + expect_raw / 64 + 4096 : expect_raw))
        throw Error(ErrorCode::kCorrupt, cw + ": payload is " + std::to_string(stored) + " bytes, more than a " +
                                             std::to_string(expect_raw) + "-byte chunk can take");
      if (inflight.size() >= window()) finish_front();
      read_payload(*c, stored, cw);
      StoredChunk* raw = c.get();
      owned.push_back(std::move(c));
      auto job = [raw, &decode, cw] {
        try {
          decode(*raw);
        } catch (const Error& e) {
          if (e.code() != ErrorCode::kCorrupt) throw;
          throw Error(ErrorCode::kCorrupt, cw + ": " + e.what());
        }
      };
      // A lone or small chunk is decoded here when it is consumed: handing it
      // to a worker costs more than it saves (a thread wake-up, measured up to
      // milliseconds on a busy machine, against ~0.1 ms of decoding).
      if (n_chunks == 1 || raw->raw_size < (int64_t{256} << 10))
        inflight.emplace_back(raw, std::async(std::launch::deferred, job));
      else
        inflight.emplace_back(raw, pool.submit(job));
    }
    if (expected_seq != n_chunks)
      throw Error(ErrorCode::kCorrupt, here + ": the chunk list ends at seq " + std::to_string(expected_seq) +
                                           " but " + std::to_string(n_chunks) + " chunks cover the count of " +
                                           std::to_string(start.conv.count));
    while (!inflight.empty()) finish_front();
  });
}

// ---------------------------------------------------------------------------
// Store

Store::Store(const std::string& path, const Options& options) : impl_(new Impl(path, options)) {}
Store::~Store() = default;
Store::Store(Store&&) noexcept = default;
Store& Store::operator=(Store&&) noexcept = default;

const std::string& Store::path() const { return impl_->path; }
const Options& Store::options() const { return impl_->options; }

int Store::schema_version() const {
  std::lock_guard<std::recursive_mutex> lock(impl_->mu);
  return static_cast<int>(detail::query_int(impl_->db, "PRAGMA user_version", impl_->where()));
}

int Store::library_schema_version() { return detail::latest_schema_version(); }

int64_t Store::count(const std::string& id) {
  std::lock_guard<std::recursive_mutex> lock(impl_->mu);
  auto c = impl_->find_conversation(id);
  return c ? c->count : 0;
}

bool Store::exists(const std::string& id) {
  std::lock_guard<std::recursive_mutex> lock(impl_->mu);
  return impl_->find_conversation(id).has_value();
}

void Store::create(const std::string& id, const ModelSignature& model, const std::string& title,
                   const std::string& metadata) {
  std::lock_guard<std::recursive_mutex> lock(impl_->mu);
  Impl& s = *impl_;
  detail::AppendRequest req;
  req.id = id;
  req.model = model;
  req.len = 0;
  req.must_create = true;
  req.title = title;
  req.metadata = metadata;
  if (!s.is_json(metadata)) throw Error(ErrorCode::kInvalidArgument, s.where(id) + ": metadata is not valid JSON text");
  s.append(req);  // row, title and metadata in one transaction
}

void Store::append(const std::string& id, const ModelSignature& model, const int32_t* tokens, int64_t len,
                   const KvSource& kv) {
  std::lock_guard<std::recursive_mutex> lock(impl_->mu);
  Impl& s = *impl_;
  model.validate();
  if (len > 0)
    check_kv_pointers(model, reinterpret_cast<const void* const*>(kv.Lc), reinterpret_cast<const void* const*>(kv.Rc),
                      reinterpret_cast<const void* const*>(kv.Ic), s.where(id));
  detail::AppendRequest req;
  req.id = id;
  req.model = model;
  req.len = len;
  req.tokens = tokens;
  const int level = s.options.zstd_level;
  req.produce = [&model, &kv, level](int64_t first, int64_t n, detail::ProducedChunk& out) {
    out.encoded = detail::encode_chunk(n, out.tokens.data(), detail::engine_planes(model, kv, first), level,
                                       out.precision, &out.stored_digests);
  };
  s.append(req);
}

int64_t Store::load(const std::string& id, const ModelSignature& model, int32_t* tokens, int64_t max_tokens,
                    const KvTarget& kv, int64_t limit) {
  std::lock_guard<std::recursive_mutex> lock(impl_->mu);
  Impl& s = *impl_;
  const std::string here = s.where(id);
  model.validate();
  int64_t n = 0;
  s.scan(
      id, &model, limit,
      [&](const detail::ScanStart& st) {
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
  if (!s.options.read_only) {
    // Recency for list() and eviction. It must neither fail the load nor wait
    // for another writer's lock: it is skipped when the database is busy.
    // Nor is it worth a device flush: it commits with synchronous=NORMAL (a
    // power loss may forget it, never corrupt anything; the next FULL commit
    // syncs it too). Measured: an fsync made a small load ~5 ms instead of 0.3.
    const bool full = s.options.synchronous == Synchronous::kFull;
    if (full) sqlite3_exec(s.db.getHandle(), "PRAGMA synchronous=NORMAL", nullptr, nullptr, nullptr);
    sqlite3_busy_timeout(s.db.getHandle(), 0);
    try {
      SQLite::Statement u(s.db, "UPDATE conversations SET last_used_ms = ? WHERE name = ?");
      u.bind(1, static_cast<int64_t>(now_ms()));
      u.bind(2, id);
      u.exec();
    } catch (const SQLite::Exception&) {
    }
    sqlite3_busy_timeout(s.db.getHandle(), s.options.busy_timeout_ms);
    if (full) sqlite3_exec(s.db.getHandle(), "PRAGMA synchronous=FULL", nullptr, nullptr, nullptr);
  }
  return n;
}

std::vector<int32_t> Store::tokens(const std::string& id) {
  std::lock_guard<std::recursive_mutex> lock(impl_->mu);
  Impl& s = *impl_;
  const std::string here = s.where(id);
  SqlTransaction snapshot(s.db, here, SqlTransaction::kRead);
  ConversationRow c = s.get_conversation(id);
  if (c.count < 0) throw_negative_count(c, here);
  // Grown by what the chunks hold, not reserved by what the count claims.
  std::vector<int32_t> out;
  read_rows(here, [&] {
    SQLite::Statement q(s.db,
                        "SELECT ch.chunk_id, ch.n_tokens, ch.tokens FROM conversation_chunks cc JOIN chunks ch "
                        "ON ch.chunk_id = cc.chunk_id WHERE cc.conversation_id = ? ORDER BY cc.seq");
    q.bind(1, c.id);
    while (q.executeStep()) {
      auto t = parse_tokens_or_throw(q.getColumn(2), q.getColumn(1).getInt64(),
                                     here + ": chunk " + std::to_string(q.getColumn(0).getInt64()));
      out.insert(out.end(), t.begin(), t.end());
    }
  });
  if (static_cast<int64_t>(out.size()) != c.count)
    throw Error(ErrorCode::kCorrupt, here + ": its chunks hold " + std::to_string(out.size()) + " tokens but its count is " +
                                         std::to_string(c.count));
  return out;
}

namespace {

// A chunk holding the first `keep` positions of a stored chunk: re-encoded
// from its decoded content (for a truncate or a fork that ends inside it).
struct PrefixChunk {
  detail::ProducedChunk produced;
  ChunkHash hash;
  ChunkHash prev;
};

PrefixChunk reencode_prefix(Store::Impl& s, const ModelRow& model, int64_t chunk_id,
                            int64_t seq, int64_t keep, const ChunkHash& prev, const std::string& here) {
  PrefixChunk out;
  with_context(here, [&] {
    SQLite::Statement q(s.db,
                        "SELECT n_tokens, tokens, compression, raw_size, checksum, payload, precision FROM chunks "
                        "WHERE chunk_id = ?");
    q.bind(1, chunk_id);
    if (!q.executeStep()) throw Error(ErrorCode::kCorrupt, here + ": chunk " + std::to_string(chunk_id) + " is missing");
    const int64_t n = q.getColumn(0).getInt64();
    const std::string cw = here + ": chunk " + std::to_string(chunk_id) + " (seq " + std::to_string(seq) + ")";
    if (n < keep || n > model.chunk_tokens)
      throw Error(ErrorCode::kCorrupt, cw + ": holds " + std::to_string(n) + " tokens, not the " + std::to_string(keep) +
                                           " to " + std::to_string(model.chunk_tokens) + " its place needs");
    std::vector<int32_t> toks = parse_tokens_or_throw(q.getColumn(1), n, cw);
    detail::ChunkPrecision precision;
    if (!detail::parse_precision(q.getColumn(6).getString(), precision))
      throw Error(ErrorCode::kCorrupt, cw + ": unknown precision '" + q.getColumn(6).getString() + "'");
    SQLite::Column payload = q.getColumn(5);
    out.prev = prev;
    if (payload.isNull()) {  // evicted: the prefix is a token-only chunk, evicted too
      toks.resize(static_cast<size_t>(keep));
      out.produced.tokens = toks;
      out.produced.encoded.raw_size = keep * model.sig.floats_per_token() * detail::precision_value_bytes(precision);
      out.produced.encoded.digest = detail::kNoValuesDigest;
      out.hash = detail::chain_next(prev, toks.data(), keep);
      return;
    }
    std::vector<float> buf(static_cast<size_t>(n * model.sig.floats_per_token()));
    PlaneList packed = detail::packed_planes(model.sig, buf.data(), n);
    try {
      detail::decode_chunk(static_cast<const uint8_t*>(payload.getBlob()), static_cast<size_t>(payload.getBytes()),
                           q.getColumn(2).getString() == "zstd", q.getColumn(3).getInt64(),
                           static_cast<uint32_t>(q.getColumn(4).getInt64()), n, toks.data(), packed, precision);
    } catch (const Error& e) {
      throw Error(e.code(), cw + ": " + e.what());
    }
    toks.resize(static_cast<size_t>(keep));
    out.produced.tokens = toks;
    // The packed planes of the first `keep` positions have stride == width.
    out.produced.precision = precision;  // bf16 values widened and rounded again are unchanged
    out.produced.encoded = detail::encode_chunk(keep, toks.data(), packed, s.options.zstd_level, precision);
    out.hash = detail::chain_next(prev, toks.data(), keep);
  });
  return out;
}

}  // namespace

void Store::truncate(const std::string& id, int64_t len) {
  std::lock_guard<std::recursive_mutex> lock(impl_->mu);
  Impl& s = *impl_;
  const std::string here = s.where(id);
  s.require_writable("truncate conversation '" + id + "'");
  ConversationState state = read_state(s, id, here);
  const ConversationRow& c = state.conv;
  const ModelRow& model = state.model;
  const std::vector<ChunkSummary>& chunks = state.chunks;
  if (len < 0 || len > c.count)
    throw Error(ErrorCode::kInvalidArgument, here + ": cannot truncate to " + std::to_string(len) + " tokens; it holds " +
                                                 std::to_string(c.count));
  if (len == c.count) return;
  const int64_t C = model.chunk_tokens;
  const int64_t keep_full = len / C;
  std::optional<PrefixChunk> tail;
  if (len % C != 0) {
    ChunkHash prev = keep_full > 0 ? chunks[keep_full - 1].chain : detail::chain_seed(model.text, c.precision);
    tail = reencode_prefix(s, model, chunks[keep_full].chunk_id, keep_full, len % C, prev, here);
  }
  SqlTransaction txn(s.db, here);
  with_context(here, [&] {
    auto now = s.find_conversation(id);
    if (!now || now->generation != c.generation)
      throw Error(ErrorCode::kConflict, here + ": another writer changed the conversation meanwhile; retry");
    std::vector<int64_t> dropped;
    for (size_t k = static_cast<size_t>(keep_full); k < chunks.size(); ++k) dropped.push_back(chunks[k].chunk_id);
    SQLite::Statement del(s.db, "DELETE FROM conversation_chunks WHERE conversation_id = ? AND seq >= ?");
    del.bind(1, c.id);
    del.bind(2, keep_full);
    del.exec();
    if (tail) {
      WriteChunk w{keep_full, keep_full * C, tail->hash, std::move(tail->produced), tail->prev};
      int64_t chunk_id = put_chunk(s.db, model.id, w, c.precision);
      SQLite::Statement link(s.db, "INSERT INTO conversation_chunks (conversation_id, seq, chunk_id) VALUES (?, ?, ?)");
      link.bind(1, c.id);
      link.bind(2, keep_full);
      link.bind(3, chunk_id);
      link.exec();
    }
    SQLite::Statement upd(s.db,
                          "UPDATE conversations SET token_count = ?, generation = generation + 1, updated_ms = ? "
                          "WHERE conversation_id = ?");
    upd.bind(1, len);
    upd.bind(2, static_cast<int64_t>(now_ms()));
    upd.bind(3, c.id);
    upd.exec();
    s.free_unused_chunks(dropped);
  });
  txn.commit();
}

void Store::remove(const std::string& id) {
  std::lock_guard<std::recursive_mutex> lock(impl_->mu);
  Impl& s = *impl_;
  const std::string here = s.where(id);
  s.require_writable("delete conversation '" + id + "'");
  SqlTransaction txn(s.db, here);
  ConversationRow c = s.get_conversation(id);
  with_context(here, [&] {
    std::vector<int64_t> ids;
    for (const auto& ch : chunk_summaries(s.db, c.id)) ids.push_back(ch.chunk_id);
    SQLite::Statement del_links(s.db, "DELETE FROM conversation_chunks WHERE conversation_id = ?");
    del_links.bind(1, c.id);
    del_links.exec();
    SQLite::Statement del(s.db, "DELETE FROM conversations WHERE conversation_id = ?");
    del.bind(1, c.id);
    del.exec();
    s.free_unused_chunks(ids);
  });
  txn.commit();
}

void Store::fork(const std::string& src, const std::string& dst, int64_t len) {
  std::lock_guard<std::recursive_mutex> lock(impl_->mu);
  Impl& s = *impl_;
  const std::string here = s.where(src);
  s.require_writable("fork conversation '" + src + "'");
  if (dst.empty()) throw Error(ErrorCode::kInvalidArgument, here + ": fork target id is empty");
  ConversationState state = read_state(s, src, here);
  const ConversationRow& c = state.conv;
  const ModelRow& model = state.model;
  const std::vector<ChunkSummary>& chunks = state.chunks;
  if (s.find_conversation(dst))
    throw Error(ErrorCode::kConflict, s.where(dst) + ": cannot fork into it: a conversation with this id exists already");
  if (len < 0) len = c.count;
  if (len > c.count)
    throw Error(ErrorCode::kInvalidArgument, here + ": cannot fork " + std::to_string(len) + " tokens; it holds " +
                                                 std::to_string(c.count));
  const int64_t C = model.chunk_tokens;
  int64_t shared = len / C;  // chunks taken as they are
  std::optional<PrefixChunk> tail;
  if (len % C != 0) {
    if (chunks[shared].n_tokens == len % C) {
      ++shared;  // the source's own partial last chunk: share it too
    } else {
      ChunkHash prev = shared > 0 ? chunks[shared - 1].chain : detail::chain_seed(model.text, c.precision);
      tail = reencode_prefix(s, model, chunks[shared].chunk_id, shared, len % C, prev, here);
    }
  }
  SqlTransaction txn(s.db, here);
  with_context(here, [&] {
    auto now = s.find_conversation(src);
    if (!now || now->generation != c.generation)
      throw Error(ErrorCode::kConflict, here + ": another writer changed the conversation meanwhile; retry");
    if (s.find_conversation(dst))
      throw Error(ErrorCode::kConflict, s.where(dst) + ": cannot fork into it: a conversation with this id exists already");
    const int64_t t = now_ms();
    SQLite::Statement ins(s.db,
                          "INSERT INTO conversations (name, model_id, token_count, precision, title, metadata, "
                          "parent_id, forked_at, created_ms, updated_ms, last_used_ms) "
                          "SELECT ?, model_id, ?, precision, title, metadata, conversation_id, ?, ?, ?, ? "
                          "FROM conversations WHERE conversation_id = ?");
    ins.bind(1, dst);
    ins.bind(2, len);
    ins.bind(3, len);
    ins.bind(4, t);
    ins.bind(5, t);
    ins.bind(6, t);
    ins.bind(7, c.id);
    ins.exec();
    const int64_t dst_id = s.db.getLastInsertRowid();
    SQLite::Statement link(s.db, "INSERT INTO conversation_chunks (conversation_id, seq, chunk_id) VALUES (?, ?, ?)");
    for (int64_t k = 0; k < shared; ++k) {
      link.bind(1, dst_id);
      link.bind(2, k);
      link.bind(3, chunks[k].chunk_id);
      link.exec();
      link.reset();
    }
    if (tail) {
      WriteChunk w{shared, shared * C, tail->hash, std::move(tail->produced), tail->prev};
      link.bind(1, dst_id);
      link.bind(2, shared);
      link.bind(3, put_chunk(s.db, model.id, w, c.precision));
      link.exec();
    }
    SQLite::Statement used(s.db, "UPDATE conversations SET last_used_ms = ? WHERE conversation_id = ?");
    used.bind(1, t);
    used.bind(2, c.id);
    used.exec();
  });
  txn.commit();
}

namespace {

void update_text_column(Store::Impl& s, const std::string& id, const char* column, const std::string& value) {
  const std::string here = s.where(id);
  s.require_writable(std::string("set ") + column + " of conversation '" + id + "'");
  SqlTransaction txn(s.db, here);
  with_context(here, [&] {
    SQLite::Statement u(s.db, std::string("UPDATE conversations SET ") + column +
                                  " = ?, generation = generation + 1, updated_ms = ? WHERE name = ?");
    u.bind(1, value);
    u.bind(2, static_cast<int64_t>(now_ms()));
    u.bind(3, id);
    if (u.exec() == 0) throw Error(ErrorCode::kNotFound, here + ": no such conversation");
  });
  txn.commit();
}

}  // namespace

void Store::rename(const std::string& old_id, const std::string& new_id) {
  std::lock_guard<std::recursive_mutex> lock(impl_->mu);
  Impl& s = *impl_;
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
  update_text_column(s, old_id, "name", new_id);
}

void Store::set_title(const std::string& id, const std::string& title) {
  std::lock_guard<std::recursive_mutex> lock(impl_->mu);
  update_text_column(*impl_, id, "title", title);
}

void Store::set_metadata(const std::string& id, const std::string& metadata_json) {
  std::lock_guard<std::recursive_mutex> lock(impl_->mu);
  Impl& s = *impl_;
  if (!s.is_json(metadata_json)) throw Error(ErrorCode::kInvalidArgument, s.where(id) + ": metadata is not valid JSON text");
  update_text_column(s, id, "metadata", metadata_json);
}

namespace {

const char* kInfoSelect =
    "SELECT c.name, c.model_id, c.token_count, c.title, c.metadata, coalesce(p.name, ''), c.forked_at, "
    "c.created_ms, c.updated_ms, c.last_used_ms, "
    "(SELECT coalesce(sum(length(ch.payload)), 0) FROM conversation_chunks cc JOIN chunks ch "
    "   ON ch.chunk_id = cc.chunk_id WHERE cc.conversation_id = c.conversation_id), "
    "EXISTS (SELECT 1 FROM conversation_chunks cc JOIN chunks ch ON ch.chunk_id = cc.chunk_id "
    "   WHERE cc.conversation_id = c.conversation_id AND ch.payload IS NULL), "
    "c.precision "
    "FROM conversations c LEFT JOIN conversations p ON p.conversation_id = c.parent_id ";

ConversationInfo info_from_row(Store::Impl& s, SQLite::Statement& q) {
  ConversationInfo i;
  i.id = q.getColumn(0).getString();
  ModelRow m = s.model_by_id(q.getColumn(1).getInt64());
  i.model = m.sig;
  i.tokens = q.getColumn(2).getInt64();
  i.title = q.getColumn(3).getString();
  i.metadata = q.getColumn(4).getString();
  i.parent = q.getColumn(5).getString();
  i.forked_at = q.getColumn(6).getInt64();
  i.created_ms = q.getColumn(7).getInt64();
  i.updated_ms = q.getColumn(8).getInt64();
  i.last_used_ms = q.getColumn(9).getInt64();
  i.stored_bytes = q.getColumn(10).getInt64();
  i.raw_bytes = i.tokens * m.sig.record_bytes();
  i.evicted = q.getColumn(11).getInt() != 0;
  i.precision = q.getColumn(12).getString();
  return i;
}

}  // namespace

ConversationInfo Store::info(const std::string& id) {
  std::lock_guard<std::recursive_mutex> lock(impl_->mu);
  Impl& s = *impl_;
  return read_rows(s.where(id), [&] {
    SQLite::Statement q(s.db, std::string(kInfoSelect) + "WHERE c.name = ?");
    q.bind(1, id);
    if (!q.executeStep()) throw Error(ErrorCode::kNotFound, s.where(id) + ": no such conversation");
    return info_from_row(s, q);
  });
}

std::vector<ConversationInfo> Store::list(const ListOptions& options) {
  std::lock_guard<std::recursive_mutex> lock(impl_->mu);
  Impl& s = *impl_;
  return read_rows(s.where(), [&] {
    // The page is chosen on the (last_used_ms, conversation_id) index alone:
    // OFFSET over the full select would compute the skipped rows' sizes too.
    SQLite::Statement q(s.db, std::string(kInfoSelect) +
                                  "WHERE c.conversation_id IN (SELECT conversation_id FROM conversations "
                                  "ORDER BY last_used_ms DESC, conversation_id DESC LIMIT ? OFFSET ?) "
                                  "ORDER BY c.last_used_ms DESC, c.conversation_id DESC");
    q.bind(1, static_cast<int64_t>(options.limit < 0 ? -1 : options.limit));
    q.bind(2, static_cast<int64_t>(std::max<int64_t>(0, options.offset)));
    std::vector<ConversationInfo> out;
    while (q.executeStep()) out.push_back(info_from_row(s, q));
    return out;
  });
}

int64_t Store::conversation_count() {
  std::lock_guard<std::recursive_mutex> lock(impl_->mu);
  return detail::query_int(impl_->db, "SELECT count(*) FROM conversations", impl_->where());
}

// ---------------------------------------------------------------------------
// Verify and stats

namespace {

// Which conversation wrote the values a conversation holds at `first_pos`:
// follow its fork parents while the position lies below the fork point.
// A fork of a deleted conversation (parent_id NULL, forked_at > 0) has lost
// its lineage: its inherited chunks are given an origin of their own.
struct Lineage {
  int64_t parent = 0;  // 0: none or deleted
  int64_t forked_at = 0;
};

int64_t origin_of(const std::map<int64_t, Lineage>& lineage, int64_t conv, int64_t first_pos) {
  for (size_t hops = 0; hops <= lineage.size(); ++hops) {  // bounded: parent_id may be corrupt
    auto it = lineage.find(conv);
    if (it == lineage.end() || first_pos >= it->second.forked_at) return conv;
    if (it->second.parent == 0) return -conv;
    conv = it->second.parent;
  }
  return conv;
}

// Chunks written before schema 5 (no content digest) that still hold values
// and are used by conversations whose values come from different origins:
// schema 4 shared them by token ids alone.
std::vector<UncomparedShare> find_uncompared_shares(SQLite::Database& db, const std::string& only) {
  std::map<int64_t, Lineage> lineage;
  std::map<int64_t, std::string> names;
  {
    SQLite::Statement q(db, "SELECT conversation_id, name, coalesce(parent_id, 0), forked_at FROM conversations");
    while (q.executeStep()) {
      const int64_t id = q.getColumn(0).getInt64();
      names[id] = q.getColumn(1).getString();
      lineage[id] = {q.getColumn(2).getInt64(), q.getColumn(3).getInt64()};
    }
  }
  std::vector<UncomparedShare> out;
  SQLite::Statement q(db,
                      "SELECT ch.chunk_id, ch.first_pos, ch.n_tokens, cc.conversation_id FROM chunks ch "
                      "JOIN conversation_chunks cc ON cc.chunk_id = ch.chunk_id "
                      "LEFT JOIN chunk_meta k ON k.chunk_id = ch.chunk_id "
                      "WHERE k.digest IS NULL AND length(ch.payload) IS NOT NULL "
                      "AND ch.chunk_id IN (SELECT chunk_id FROM conversation_chunks GROUP BY chunk_id HAVING count(*) > 1) "
                      "ORDER BY ch.chunk_id");
  UncomparedShare cur;
  std::set<int64_t> origins;
  auto flush = [&] {
    const bool wanted = only.empty() || std::find(cur.conversations.begin(), cur.conversations.end(), only) !=
                                            cur.conversations.end();
    if (origins.size() > 1 && wanted) {
      std::sort(cur.conversations.begin(), cur.conversations.end());
      out.push_back(cur);
    }
    cur = UncomparedShare();
    origins.clear();
  };
  while (q.executeStep()) {
    const int64_t chunk_id = q.getColumn(0).getInt64();
    if (chunk_id != cur.chunk_id) {
      if (cur.chunk_id >= 0) flush();
      cur.chunk_id = chunk_id;
      cur.first_pos = q.getColumn(1).getInt64();
      cur.end_pos = cur.first_pos + q.getColumn(2).getInt64();
    }
    const int64_t conv = q.getColumn(3).getInt64();
    cur.conversations.push_back(names.count(conv) ? names[conv] : "#" + std::to_string(conv));
    origins.insert(origin_of(lineage, conv, cur.first_pos));
  }
  if (cur.chunk_id >= 0) flush();
  return out;
}

}  // namespace

VerifyReport Store::verify(const std::string& id, const ProgressFn& progress) {
  std::lock_guard<std::recursive_mutex> lock(impl_->mu);
  Impl& s = *impl_;
  VerifyReport report;
  SqlTransaction snapshot(s.db, s.where(id), SqlTransaction::kRead);
  if (!id.empty()) s.get_conversation(id);
  read_rows(s.where(id), [&] {
    {
      SQLite::Statement q(s.db, "PRAGMA integrity_check");
      std::string all;
      while (q.executeStep()) all += (all.empty() ? "" : "; ") + q.getColumn(0).getString();
      report.integrity = all;
      if (all != "ok") report.problems.push_back({"", -1, -1, -1, -1, "PRAGMA integrity_check: " + all});
    }
    struct Conv {
      int64_t id;
      std::string name;
      int64_t model_id, count;
      std::string precision;
    };
    std::vector<Conv> convs;
    {
      SQLite::Statement q(s.db, id.empty() ? "SELECT conversation_id, name, model_id, token_count, precision FROM conversations ORDER BY name"
                                           : "SELECT conversation_id, name, model_id, token_count, precision FROM conversations WHERE name = ?");
      if (!id.empty()) q.bind(1, id);
      while (q.executeStep())
        convs.push_back({q.getColumn(0).getInt64(), q.getColumn(1).getString(), q.getColumn(2).getInt64(),
                         q.getColumn(3).getInt64(), q.getColumn(4).getString()});
    }
    int64_t total_tokens = 0, done_tokens = 0;
    for (auto& c : convs) total_tokens += c.count;
    std::map<int64_t, std::string> chunk_result;  // chunk_id -> "" or its problem
    for (auto& c : convs) {
      ++report.conversations;
      auto problem = [&](int64_t seq, int64_t chunk_id, int64_t a, int64_t b, const std::string& what) {
        report.problems.push_back({c.name, seq, chunk_id, a, b, what});
      };
      ModelRow m;
      try {
        m = s.model_by_id(c.model_id);
      } catch (const Error& e) {
        problem(-1, -1, 0, c.count, e.what());
        continue;
      }
      const int64_t C = m.chunk_tokens;
      ChunkHash chain = detail::chain_seed(m.text, c.precision);
      SQLite::Statement q(s.db,
                          "SELECT cc.seq, ch.chunk_id, ch.first_pos, ch.n_tokens, ch.tokens, ch.compression, "
                          "ch.raw_size, ch.checksum, ch.payload, ch.hash, ch.model_id, ch.precision, k.digest "
                          "FROM conversation_chunks cc LEFT JOIN chunks ch ON ch.chunk_id = cc.chunk_id "
                          "LEFT JOIN chunk_meta k ON k.chunk_id = ch.chunk_id WHERE cc.conversation_id = ? ORDER BY cc.seq");
      q.bind(1, c.id);
      int64_t covered = 0, expected_seq = 0;
      bool chain_ok = true;
      while (q.executeStep()) {
        const int64_t seq = q.getColumn(0).getInt64();
        const int64_t first = seq * C;
        if (q.getColumn(1).isNull()) {
          problem(seq, -1, first, first + C, "the chunk list names a chunk that does not exist");
          chain_ok = false;
          continue;
        }
        const int64_t chunk_id = q.getColumn(1).getInt64();
        const int64_t n = q.getColumn(3).getInt64();
        if (seq != expected_seq) problem(seq, chunk_id, expected_seq * C, first, "chunk list has a gap before this chunk");
        expected_seq = seq + 1;
        if (q.getColumn(2).getInt64() != first || n < 1 || n > C || q.getColumn(10).getInt64() != c.model_id) {
          problem(seq, chunk_id, first, first + std::max<int64_t>(n, 0), "chunk position, size or model does not fit its place in the list");
          chain_ok = false;
          continue;
        }
        if (first + n < c.count && n != C) problem(seq, chunk_id, first, first + n, "a partial chunk before the last one");
        covered = first + n;
        std::vector<int32_t> toks;
        SQLite::Column tcol = q.getColumn(4);
        const char* text = tcol.getBytes() <= detail::max_tokens_json_bytes(n) ? static_cast<const char*>(tcol.getBlob()) : nullptr;
        if (!text || !detail::parse_tokens_json(text, static_cast<size_t>(tcol.getBytes()), toks) ||
            static_cast<int64_t>(toks.size()) != n) {
          problem(seq, chunk_id, first, first + n, "token list is not a JSON array of " + std::to_string(n) + " ids");
          chain_ok = false;
          continue;
        }
        for (int64_t i = 0; i < n; ++i)
          if (toks[i] < 0 || toks[i] >= m.sig.vocab) {
            problem(seq, chunk_id, first + i, first + i + 1, "token id " + std::to_string(toks[i]) + " is outside the vocabulary");
            break;
          }
        const std::optional<ChunkHash> digest = digest_column(q.getColumn(12));
        if (chain_ok) {
          ChunkHash h = detail::chain_next(chain, toks.data(), n);
          if (!key_matches(blob_to_hash(q.getColumn(9)), digest, h)) {
            problem(seq, chunk_id, first, first + n, "chunk hash does not match the token ids before and in it");
            chain_ok = false;
          }
          chain = h;
        }
        auto seen = chunk_result.find(chunk_id);
        if (seen == chunk_result.end()) {
          std::string what;
          SQLite::Column payload = q.getColumn(8);
          if (payload.isNull()) {
            what = "";  // evicted: only token ids are kept, by design
          } else {
            const std::string comp = q.getColumn(5).getString();
            try {
              if (comp != "zstd" && comp != "none") throw Error(ErrorCode::kCorrupt, "unknown compression '" + comp + "'");
              detail::ChunkPrecision precision;
              if (!detail::parse_precision(q.getColumn(11).getString(), precision))
                throw Error(ErrorCode::kCorrupt, "unknown precision '" + q.getColumn(11).getString() + "'");
              std::vector<float> buf(static_cast<size_t>(n * m.sig.floats_per_token()));
              ChunkHash decoded_digest;
              detail::decode_chunk(static_cast<const uint8_t*>(payload.getBlob()), static_cast<size_t>(payload.getBytes()),
                                   comp == "zstd", q.getColumn(6).getInt64(), static_cast<uint32_t>(q.getColumn(7).getInt64()),
                                   n, toks.data(), detail::packed_planes(m.sig, buf.data(), n), precision, &decoded_digest);
              if (digest && decoded_digest != *digest)
                throw Error(ErrorCode::kCorrupt, "content digest does not match its decoded values");
              ++report.chunks;
              report.bytes += static_cast<int64_t>(buf.size()) * 4;
            } catch (const Error& e) {
              what = e.what();
            }
          }
          seen = chunk_result.emplace(chunk_id, what).first;
        }
        if (!seen->second.empty()) problem(seq, chunk_id, first, first + n, seen->second);
      }
      if (covered != c.count)
        problem(-1, -1, std::min(covered, c.count), std::max(covered, c.count),
                "chunks cover " + std::to_string(covered) + " positions but the count is " + std::to_string(c.count));
      done_tokens += c.count;
      if (progress) progress(done_tokens, total_tokens);
    }
    report.uncompared_shares = find_uncompared_shares(s.db, id);
    if (id.empty()) {
      SQLite::Statement q(s.db,
                          "SELECT chunk_id, first_pos, n_tokens FROM chunks ch WHERE NOT EXISTS "
                          "(SELECT 1 FROM conversation_chunks cc WHERE cc.chunk_id = ch.chunk_id)");
      while (q.executeStep())
        report.problems.push_back({"", -1, q.getColumn(0).getInt64(), q.getColumn(1).getInt64(),
                                   q.getColumn(1).getInt64() + q.getColumn(2).getInt64(),
                                   "chunk is not used by any conversation"});
    }
  });
  return report;
}

StoreStats Store::stats() {
  std::lock_guard<std::recursive_mutex> lock(impl_->mu);
  Impl& s = *impl_;
  StoreStats out;
  SqlTransaction snapshot(s.db, s.where(), SqlTransaction::kRead);
  with_context(s.where(), [&] {
    SQLite::Statement q(s.db,
                        "SELECT m.model_id, m.chunk_tokens, m.record_bytes, "
                        " (SELECT count(*) FROM conversations c WHERE c.model_id = m.model_id), "
                        " (SELECT coalesce(sum(token_count), 0) FROM conversations c WHERE c.model_id = m.model_id), "
                        " (SELECT count(*) FROM chunks ch WHERE ch.model_id = m.model_id), "
                        " (SELECT coalesce(sum(n_tokens), 0) FROM chunks ch WHERE ch.model_id = m.model_id), "
                        " (SELECT coalesce(sum(length(payload)), 0) FROM chunks ch WHERE ch.model_id = m.model_id) "
                        "FROM models m ORDER BY m.model_id");
    while (q.executeStep()) {
      UsageStats u;
      u.model = s.model_by_id(q.getColumn(0).getInt64()).sig;
      u.chunk_tokens = q.getColumn(1).getInt64();
      const int64_t rb = q.getColumn(2).getInt64();
      u.conversations = q.getColumn(3).getInt64();
      u.tokens = q.getColumn(4).getInt64();
      u.chunks = q.getColumn(5).getInt64();
      u.logical_bytes = u.tokens * rb;
      u.unique_bytes = q.getColumn(6).getInt64() * rb;
      u.stored_bytes = q.getColumn(7).getInt64();
      out.total.conversations += u.conversations;
      out.total.tokens += u.tokens;
      out.total.chunks += u.chunks;
      out.total.logical_bytes += u.logical_bytes;
      out.total.unique_bytes += u.unique_bytes;
      out.total.stored_bytes += u.stored_bytes;
      out.models.push_back(u);
    }
    detail::fill_eviction_stats(s, out);
  });
  out.file_bytes = file_size_or_zero(s.path) + file_size_or_zero(s.path + "-wal");
  return out;
}

}  // namespace colikv
