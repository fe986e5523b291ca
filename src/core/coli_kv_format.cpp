// The .coli_kv format read and checked: the header, the file opened for
// reading, and inspect_coli_kv (colikv/coli_kv_format.h).
#include "colikv/coli_kv_format.h"

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

#include "colikv/error.h"
#include "core/coli_kv_file.h"
#include "core/fd.h"
#include "core/file_kind.h"
#include "core/text_argument.h"

namespace colikv {
namespace detail {
namespace coli_kv_file {

const char kMagic[8] = {'C', 'O', 'L', 'I', 'K', 'V', '1', '\0'};

namespace {

ErrorCode code_for_errno(int err) {
  switch (err) {
    case ENOENT: return ErrorCode::kNotFound;
    case ENOSPC:
    case EDQUOT:
    case EFBIG: return ErrorCode::kDiskFull;
    case EROFS:
    case EACCES:
    case EPERM: return ErrorCode::kReadOnly;
    default: return ErrorCode::kIO;
  }
}

}  // namespace

[[noreturn]] void throw_errno(const std::string& what, int err) {
  throw Error(code_for_errno(err), what + ": " + std::strerror(err));
}

// Reads exactly n bytes at offset; returns false at end of file.
bool pread_full(int fd, void* buf, size_t n, int64_t offset, const std::string& what) {
  auto* p = static_cast<uint8_t*>(buf);
  while (n > 0) {
    ssize_t r = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      throw_errno(what + ": read", errno);
    }
    if (r == 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
    offset += r;
  }
  return true;
}

void write_full(int fd, const void* buf, size_t n, const std::string& what) {
  const auto* p = static_cast<const uint8_t*>(buf);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw_errno(what + ": write", errno);
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}


ParsedHeader parse_header(int fd, const std::string& path) {
  ParsedHeader h;
  struct stat st;
  if (::fstat(fd, &st) != 0) throw_errno(path, errno);
  h.file_bytes = static_cast<int64_t>(st.st_size);
  if (h.file_bytes == 0) {
    h.problems.push_back("the file is empty");
    return h;
  }
  char magic[8];
  if (h.file_bytes < 8 || !pread_full(fd, magic, 8, 0, path)) {
    h.problems.push_back("the file is " + std::to_string(h.file_bytes) + " bytes, shorter than the 8-byte magic");
    return h;
  }
  if (std::memcmp(magic, kMagic, 8) != 0) {
    h.problems.push_back("wrong magic: not a .coli_kv file (expected \"COLIKV1\\0\")");
    return h;
  }
  if (h.file_bytes < kColiKvHeaderBytes || !pread_full(fd, h.fields, sizeof h.fields, 8, path)) {
    h.problems.push_back("the file is " + std::to_string(h.file_bytes) + " bytes, shorter than the " +
                         std::to_string(kColiKvHeaderBytes) + "-byte header");
    return h;
  }
  h.read = true;
  h.model.n_layers = h.fields[0];
  h.model.kv_lora = h.fields[1];
  h.model.qk_rope = h.fields[2];
  h.model.index_hd = h.fields[3];
  h.model.n_indexed = h.fields[4];
  h.model.vocab = h.fields[5];
  try {
    h.model.validate();
    h.model_ok = true;
  } catch (const Error& e) {
    h.problems.push_back(std::string("header: ") + e.what());
  }
  if (h.fields[6] < 0) h.problems.push_back("header: record count nrec is negative (" + std::to_string(h.fields[6]) + ")");
  if (h.fields[7] != 0)
    h.problems.push_back("header: the reserved eighth field is " + std::to_string(h.fields[7]) + ", expected 0");
  if (h.model_ok) {
    h.record_bytes = h.model.record_bytes();
    const int64_t body = h.file_bytes - kColiKvHeaderBytes;
    h.records_on_disk = body / h.record_bytes;
    h.trailing_bytes = body % h.record_bytes;
  }
  return h;
}

// Opens a .coli_kv file, refusing anything but a regular file: opening a
// FIFO would block until a writer came, and a device or a directory has no
// records to read at offsets. O_NONBLOCK keeps the open itself from blocking.
Fd open_for_reading(const std::string& path) {
  if (path.empty()) throw Error(ErrorCode::kInvalidArgument, "the .coli_kv file's path is empty");
  require_no_nul(path, "path", "the .coli_kv file");
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) throw_errno(path, errno);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) throw_errno(path, errno);
  if (!S_ISREG(st.st_mode))
    throw Error(ErrorCode::kInvalidArgument,
                path + ": " + detail::file_kind(st.st_mode) + ", not a .coli_kv file (a regular file is needed)");
  if (::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK) != 0) throw_errno(path, errno);
  return fd;
}

void read_records(int fd, const std::string& path, const ModelSignature& m, int64_t first, int64_t count,
                  std::vector<uint8_t>& records, int32_t* tokens, const char* doing) {
  const int64_t rb = m.record_bytes();
  records.resize(static_cast<size_t>(count * rb));
  if (!pread_full(fd, records.data(), records.size(), kColiKvHeaderBytes + first * rb, path))
    throw Error(ErrorCode::kIO, path + ": the file shrank while it was " + doing);
  for (int64_t i = 0; i < count; ++i) {
    int32_t t;
    std::memcpy(&t, records.data() + i * rb, 4);
    if (t < 0 || t >= m.vocab)
      throw Error(ErrorCode::kInvalidArgument, path + ": record " + std::to_string(first + i) + ": token id " +
                                                   std::to_string(t) + " is outside [0, " + std::to_string(m.vocab) +
                                                   ") (records written under another shape's header?)");
    tokens[i] = t;
  }
}

}  // namespace coli_kv_file
}  // namespace detail

using detail::Fd;
using detail::coli_kv_file::ParsedHeader;
using detail::coli_kv_file::open_for_reading;
using detail::coli_kv_file::parse_header;
using detail::coli_kv_file::pread_full;

ColiKvInspection inspect_coli_kv(const std::string& path, int first_tokens) {
  Fd fd = open_for_reading(path);
  ParsedHeader h = parse_header(fd.get(), path);
  ColiKvInspection r;
  r.path = path;
  r.file_bytes = h.file_bytes;
  r.header_read = h.read;
  r.model = h.model;
  r.header_count = h.fields[6];
  r.record_bytes = h.record_bytes;
  r.records_on_disk = h.records_on_disk;
  r.trailing_bytes = h.trailing_bytes;
  r.problems = h.problems;
  if (!h.model_ok) return r;
  if (r.header_count > r.records_on_disk)
    r.problems.push_back("header counts " + std::to_string(r.header_count) + " records but only " +
                         std::to_string(r.records_on_disk) + " complete records are present");
  const int64_t counted = std::min<int64_t>(std::max<int64_t>(r.header_count, 0), r.records_on_disk);
  int64_t bad = 0;
  for (int64_t p = 0; p < counted; ++p) {
    int32_t token;
    if (!pread_full(fd.get(), &token, 4, kColiKvHeaderBytes + p * r.record_bytes, path))
      throw Error(ErrorCode::kIO, path + ": the file shrank while it was inspected (record " + std::to_string(p) +
                                      " is gone)");
    if (p < first_tokens) r.first_tokens.push_back(token);
    if (token < 0 || token >= h.model.vocab) {
      if (bad++ == 0)
        r.problems.push_back("record " + std::to_string(p) + ": token id " + std::to_string(token) + " is outside [0, " +
                             std::to_string(h.model.vocab) + ") (records written under another shape's header?)");
    }
  }
  if (bad > 1) r.problems.push_back(std::to_string(bad) + " records in all have a token id outside the vocabulary");
  return r;
}

}  // namespace colikv
