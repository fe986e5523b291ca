// .coli_kv read, import and export: a file's records into the caller's buffers
// or a new conversation, and a conversation into a file (core/coli_kv_format.cpp
// reads and checks the format).
#include "colikv/coli_kv.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/coli_kv_file.h"
#include "core/fd.h"
#include "core/file_kind.h"
#include "core/path.h"
#include "store/kv_planes.h"
#include "store/store_call.h"
#include "store/store_impl.h"
#include "core/text_argument.h"

namespace colikv {

using detail::Fd;
using detail::directory_of;
using detail::coli_kv_file::kMagic;
using detail::coli_kv_file::ParsedHeader;
using detail::coli_kv_file::open_for_reading;
using detail::coli_kv_file::parse_header;
using detail::coli_kv_file::read_records;
using detail::coli_kv_file::throw_errno;
using detail::coli_kv_file::write_full;

namespace {


// Import and read take a file whose header is sound, or refuse it.
void require_sound_header(const ParsedHeader& h, const std::string& path) {
  if (!h.problems.empty()) throw Error(ErrorCode::kInvalidArgument, path + ": " + h.problems.front());
}

// A header counting more records than the file holds (a torn append?).
Error missing_records(const ParsedHeader& h, const std::string& path, const std::string& hint) {
  return Error(ErrorCode::kInvalidArgument, path + ": header counts " + std::to_string(h.fields[6]) +
                                                " records but only " + std::to_string(h.records_on_disk) +
                                                " complete records are present (a torn append?)" + hint);
}

// Records a block of read_coli_kv reads at once: its memory beyond the
// caller's buffers (one record when a record is larger).
constexpr int64_t kReadBlockBytes = int64_t{4} << 20;

}  // namespace

int64_t read_coli_kv(const std::string& path, const ModelSignature& model, int32_t* tokens, int64_t max_tokens,
                     const KvTarget& kv, const ReadColiKvOptions& options) {
  Fd fd = open_for_reading(path);
  const ParsedHeader h = parse_header(fd.get(), path);
  require_sound_header(h, path);
  // The caller's buffers are shaped by model: a file of another shape (one
  // replaced since it was inspected) never reaches them. A file has no
  // weights identity, so the caller's is not compared.
  ModelSignature file_model = h.model;
  file_model.weights_id = model.weights_id;
  if (file_model != model)
    throw Error(ErrorCode::kModelMismatch,
                path + ": the file's model is " + h.model.to_string() + ", not the caller's " + model.to_string());
  const int64_t count = h.fields[6];
  if (count > h.records_on_disk) throw missing_records(h, path, "");
  const int64_t n = options.limit >= 0 ? std::min(options.limit, count) : count;
  if (n > max_tokens)
    throw Error(ErrorCode::kTooLarge, path + ": " + std::to_string(n) +
                                          " records do not fit the caller's maximum of " + std::to_string(max_tokens));
  if (n == 0) return 0;
  if (!tokens) throw Error(ErrorCode::kInvalidArgument, path + ": tokens is null");
  detail::check_kv_pointers(model, reinterpret_cast<const void* const*>(kv.Lc),
                            reinterpret_cast<const void* const*>(kv.Rc), reinterpret_cast<const void* const*>(kv.Ic),
                            path);
  const int64_t per_block = std::max<int64_t>(1, kReadBlockBytes / h.record_bytes);
  std::vector<uint8_t> records;
  for (int64_t first = 0; first < n; first += per_block) {
    const int64_t count_here = std::min(per_block, n - first);
    read_records(fd.get(), path, h.model, first, count_here, records, tokens + first, "read");
    detail::copy_planes(detail::record_planes(h.model, records.data()), detail::engine_planes(model, kv, first),
                      count_here);
    if (options.progress) options.progress(first + count_here, n);
  }
  return n;
}

std::string default_conversation_id(const std::string& path) {
  std::string name = path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
  const std::string ext = ".coli_kv";
  if (name.size() > ext.size() && name.compare(name.size() - ext.size(), ext.size(), ext) == 0)
    name.resize(name.size() - ext.size());
  return name;
}

ImportResult import_coli_kv(Store& store, const std::string& path, const ImportOptions& options) {
  return detail::StoreCall::run(detail::StoreAccess::impl(store), [&](Store::Impl& s) REQUIRES(s.mu) {
    Fd fd = open_for_reading(path);
    ParsedHeader h = parse_header(fd.get(), path);
    require_sound_header(h, path);
    ImportResult result;
    result.id = options.id.empty() ? default_conversation_id(path) : options.id;
    result.model = h.model;
    result.model.weights_id = options.weights_id;
    result.model.validate();
    result.header_count = h.fields[6];
    int64_t n = result.header_count;
    if (n > h.records_on_disk) {
      if (!options.salvage)
        throw missing_records(h, path, "; --salvage keeps those " + std::to_string(h.records_on_disk));
      n = h.records_on_disk;
      result.salvaged = true;
    }
    result.tokens = n;
    result.ignored_records = std::max<int64_t>(0, h.records_on_disk - n);
    result.ignored_bytes = h.file_bytes - kColiKvHeaderBytes - n * h.record_bytes;

    const ModelSignature model = result.model;
    const int level = s.options().zstd_level;
    const int file = fd.get();
    detail::AppendRequest req;
    req.id = result.id;
    req.model = model;
    req.len = n;
    req.must_create = true;
    req.progress = options.progress;
    // Encoding may run this far ahead of the writer: a few chunks, so that an
    // import's memory stays bounded whatever the file's size (its peak resident
    // memory: docs/benchmarks.md, "Figures moved out of code comments").
    req.max_staged_bytes = std::min<int64_t>(s.options().max_staged_bytes, int64_t{16} << 20);
    req.produce = [&, file, level](int64_t first, int64_t count, detail::ProducedChunk& out) {
      // Each worker reuses its own record buffer: memory stays a few chunks.
      thread_local std::vector<uint8_t> records;
      out.tokens.resize(static_cast<size_t>(count));
      read_records(file, path, model, first, count, records, out.tokens.data(), "imported");
      out.encoded = detail::encode_chunk(count, out.tokens.data(), detail::record_planes(model, records.data()), level,
                                         out.precision, &out.stored_digests);
    };
    s.append(req);
    return result;
  });
}

namespace detail {

void decode_records(const ModelSignature& m, StoredChunk& c) {
  const int64_t rb = m.record_bytes();
  c.out.resize(static_cast<size_t>(c.n_tokens * rb));
  for (int64_t i = 0; i < c.n_tokens; ++i) std::memcpy(c.out.data() + i * rb, &c.tokens[static_cast<size_t>(i)], 4);
  decode_chunk(c.payload.data(), c.payload.size(), c.compressed, c.raw_size, c.checksum, c.n_tokens, c.tokens.data(),
               record_planes(m, c.out.data()), c.precision);
}

}  // namespace detail

namespace {

// ---------------------------------------------------------------------------
// Export: where the bytes go.

// Streams the conversation's .coli_kv bytes to fd; returns the bytes written.
int64_t write_coli_kv(Store::Impl& s, const std::string& id, int fd, const std::string& name,
                      const ProgressFn& progress) REQUIRES(s.mu) {
  int64_t written = 0;
  int64_t total = 0;
  ModelSignature model;
  s.scan(
      id, nullptr, -1,
      [&](const detail::ScanStart& start) {
        model = start.model.sig;
        total = start.n;
        int32_t h[8] = {model.n_layers, model.kv_lora, model.qk_rope, model.index_hd, model.n_indexed, model.vocab,
                        static_cast<int32_t>(start.n), 0};
        if (start.n > INT32_MAX)
          throw Error(ErrorCode::kInvalidArgument, s.where(id) + ": " + std::to_string(start.n) +
                                                       " tokens exceed what a .coli_kv header can count");
        write_full(fd, kMagic, 8, name);
        write_full(fd, h, sizeof h, name);
        written = kColiKvHeaderBytes;
      },
      [&](detail::StoredChunk& c) { detail::decode_records(model, c); },
      [&](detail::StoredChunk& c) {
        write_full(fd, c.out.data(), c.out.size(), name);
        written += static_cast<int64_t>(c.out.size());
        c.out = std::vector<uint8_t>();
        if (progress) progress(c.first_pos + c.n_tokens, total);
      });
  return written;
}

std::string real_path(const std::string& path) {
  char* real = ::realpath(path.c_str(), nullptr);
  if (!real) return "";
  std::string r = real;
  std::free(real);
  return r;
}

// path with its directory resolved, also when path itself does not exist.
std::string canonical_name(const std::string& path) {
  std::string real = real_path(path);
  if (!real.empty()) return real;
  const std::string dir = real_path(directory_of(path));
  return dir.empty() ? path : dir + "/" + path.substr(path.find_last_of('/') + 1);
}

// The local files the store keeps (its backend's file_suffixes), named after
// the file symbolic links lead to; none for a store on a server.
std::vector<std::string> store_files(const Store::Impl& s) REQUIRES(s.mu) {
  std::vector<std::string> out;
  const detail::LocalFiles* files = s.catalog().local_files();
  if (!files) return out;
  const std::string base = canonical_name(s.path());
  for (const std::string& suffix : files->file_suffixes()) out.push_back(base + suffix);
  return out;
}

bool same_file(const struct stat& a, const struct stat& b) { return a.st_dev == b.st_dev && a.st_ino == b.st_ino; }

// Which of the store's files `out` (stat'ed as out_st, when it exists) is, by
// device and inode (a hard link has another name) or by name (a companion
// that does not exist yet); "" if none.
std::string store_file_at(const Store::Impl& s, const std::string& out_name, const struct stat* out_st)
    REQUIRES(s.mu) {
  for (const auto& f : store_files(s)) {
    struct stat st;
    if (out_st && ::stat(f.c_str(), &st) == 0 && same_file(st, *out_st)) return f;
    if (!out_name.empty() && out_name == f) return f;
  }
  return "";
}

// The file export replaces: path itself, or the file its symbolic links lead
// to. Refuses the store's own files, anything but a regular file, a dangling
// link, and (without force) any existing file.
std::string export_target(const Store::Impl& s, const std::string& path, bool force) REQUIRES(s.mu) {
  detail::require_no_nul(path, "path", "the export's output file");
  struct stat lst, st;
  if (::lstat(path.c_str(), &lst) != 0) {
    const std::string companion = store_file_at(s, canonical_name(path), nullptr);
    if (!companion.empty())
      throw Error(ErrorCode::kInvalidArgument, path + ": the name of the store's own file " + companion + "; not written");
    return path;
  }
  if (::stat(path.c_str(), &st) != 0)
    throw Error(ErrorCode::kConflict, path + ": a symbolic link to a missing file; not written (remove the link or "
                                             "export to its target)");
  const std::string own = store_file_at(s, canonical_name(path), &st);
  if (!own.empty()) throw Error(ErrorCode::kInvalidArgument, path + ": the store's own file " + own + "; not replaced");
  if (!S_ISREG(st.st_mode))
    throw Error(ErrorCode::kInvalidArgument, path + ": " + detail::file_kind(st.st_mode) +
                                                 "; export writes regular files only and never replaces anything else");
  if (!force) throw Error(ErrorCode::kConflict, path + ": the file exists (use force to overwrite it)");
  const std::string real = real_path(path);
  return real.empty() ? path : real;
}

const char kExportTempPrefix[] = ".colikv-export-";

// Removes the temporary files of exports killed midway in dir: an export
// holds an exclusive flock on its temporary file until it is renamed, so a
// file nobody holds is left over.
void remove_stale_export_temps(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  while (const dirent* e = ::readdir(d)) {
    if (std::strncmp(e->d_name, kExportTempPrefix, sizeof kExportTempPrefix - 1) != 0) continue;
    const std::string name = dir + "/" + e->d_name;
    Fd fd(::open(name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    struct stat held, now;
    if (fd.get() < 0 || ::fstat(fd.get(), &held) != 0 || !S_ISREG(held.st_mode)) continue;
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) continue;  // an export is writing it
    if (::lstat(name.c_str(), &now) == 0 && same_file(now, held)) ::unlink(name.c_str());
  }
  ::closedir(d);
}

// A new temporary file in dir, locked (see remove_stale_export_temps); its
// name does not grow with the output's, so a long name still fits.
Fd create_export_temp(const std::string& dir, const std::string& out, std::string& name) {
  for (int attempt = 0; attempt < 8; ++attempt) {
    std::string tmpl_name = dir + "/" + kExportTempPrefix + "XXXXXX";
    std::vector<char> tmpl(tmpl_name.begin(), tmpl_name.end());
    tmpl.push_back('\0');
    Fd fd(::mkstemp(tmpl.data()));
    if (fd.get() < 0) throw_errno(out + ": cannot create a temporary file in " + dir, errno);
    name = tmpl.data();
    if (::flock(fd.get(), LOCK_EX) != 0) throw_errno(name + ": flock", errno);
    // Another export's cleanup may have removed it before the lock was taken.
    struct stat mine, now;
    if (::fstat(fd.get(), &mine) == 0 && ::lstat(name.c_str(), &now) == 0 && same_file(mine, now)) return fd;
  }
  throw Error(ErrorCode::kIO, out + ": cannot keep a temporary file in " + dir);
}

// The mode the engine's own .coli_kv files get (fopen: 0666 less the umask),
// which an export gives its file once written; until then the temporary file
// keeps mkstemp's 0600. The umask is read from /proc, not set and restored:
// umask() would change it for every thread of the caller meanwhile. Without
// /proc the file stays 0600.
mode_t engine_file_mode() {
  std::FILE* f = std::fopen("/proc/self/status", "re");
  if (!f) return 0600;
  char line[256];
  unsigned mask = 01000;  // none read
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "Umask: %o", &mask) == 1) break;
  std::fclose(f);
  return mask > 0777 ? 0600 : static_cast<mode_t>(0666 & ~mask);
}

// Gives the finished temporary file the output's name: replacing a file there
// with force, and otherwise only if none appeared meanwhile.
void move_into_place(const std::string& tmp, const std::string& target, bool replace) {
  if (replace) {
    if (::rename(tmp.c_str(), target.c_str()) != 0) throw_errno(target + ": rename", errno);
    return;
  }
  if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, target.c_str(), RENAME_NOREPLACE) == 0) return;
  if (errno == EEXIST) throw Error(ErrorCode::kConflict, target + ": the file appeared meanwhile; not overwritten");
  // A filesystem without RENAME_NOREPLACE: link() fails too if the name exists.
  if (::link(tmp.c_str(), target.c_str()) != 0) {
    if (errno == EEXIST) throw Error(ErrorCode::kConflict, target + ": the file appeared meanwhile; not overwritten");
    throw_errno(target + ": rename", errno);
  }
  ::unlink(tmp.c_str());
}

}  // namespace

int64_t export_coli_kv(Store& store, const std::string& id, const std::string& path, const ExportOptions& options) {
  return detail::StoreCall::run(detail::StoreAccess::impl(store), id, [&](Store::Impl& s) REQUIRES(s.mu) {
    // Else the whole file would be written to a temporary one, then not renamed.
    if (path.empty()) throw Error(ErrorCode::kInvalidArgument, s.where(id) + ": export: the output path is empty");
    const std::string target = export_target(s, path, options.force);
    const std::string dir = directory_of(target);
    remove_stale_export_temps(dir);
    std::string tmp_name;
    Fd fd = create_export_temp(dir, path, tmp_name);
    struct Unlink {
      std::string name;
      bool keep = false;
      ~Unlink() {
        if (!keep) ::unlink(name.c_str());
      }
    } cleanup{tmp_name};

    // Errors name the file the caller asked for first, then the one written.
    const std::string writing = path + " (its temporary file " + tmp_name + ")";
    const int64_t written = write_coli_kv(s, id, fd.get(), writing, options.progress);
    if (::fchmod(fd.get(), engine_file_mode()) != 0) throw_errno(writing + ": fchmod", errno);
    if (::fsync(fd.get()) != 0) throw_errno(writing + ": fsync", errno);
    move_into_place(tmp_name, target, options.force);
    cleanup.keep = true;
    Fd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dfd.get() >= 0) ::fsync(dfd.get());  // make the rename durable
    // Closing releases the lock only now: a cleanup never sees the file unheld.
    if (::close(fd.release()) != 0) throw_errno(target + ": close", errno);
    return written;
  });
}

int64_t export_coli_kv_to_fd(Store& store, const std::string& id, int fd, const ExportOptions& options) {
  return detail::StoreCall::run(detail::StoreAccess::impl(store), id, [&](Store::Impl& s) REQUIRES(s.mu) {
    struct stat st;
    if (::fstat(fd, &st) != 0) throw_errno("export output", errno);
    const std::string own = store_file_at(s, "", &st);
    if (!own.empty()) throw Error(ErrorCode::kInvalidArgument, "the output is the store's own file " + own + "; not written");
    return write_coli_kv(s, id, fd, "the output", options.progress);
  });
}

}  // namespace colikv
