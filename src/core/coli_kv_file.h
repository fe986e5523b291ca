// The .coli_kv file as read and written (docs/format.md): its header parsed
// and checked, and the file helpers import and export share
// (src/store/read/coli_kv.cpp). Not installed.
#ifndef COLIKV_SRC_CORE_COLI_KV_FILE_H
#define COLIKV_SRC_CORE_COLI_KV_FILE_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "colikv/model.h"
#include "core/fd.h"

namespace colikv {
namespace detail {
namespace coli_kv_file {

extern const char kMagic[8];

// Throws the ErrorCode an errno stands for (kNotFound, kDiskFull,
// kReadOnly, else kIO), with `what` and strerror(err).
[[noreturn]] void throw_errno(const std::string& what, int err);

// Reads exactly n bytes at offset; returns false at end of file.
bool pread_full(int fd, void* buf, size_t n, int64_t offset, const std::string& what);
// Writes all n bytes (throw_errno on failure).
void write_full(int fd, const void* buf, size_t n, const std::string& what);

// The header as the file has it, and every problem of its shape.
struct ParsedHeader {
  int64_t file_bytes = 0;
  bool read = false;
  int32_t fields[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  ModelSignature model;
  bool model_ok = false;
  int64_t record_bytes = 0;
  int64_t records_on_disk = 0;
  int64_t trailing_bytes = 0;
  std::vector<std::string> problems;
};

// Reads and checks the header of the open file `fd` (named `path`): every
// problem of its shape goes to problems; throws only when it cannot be read.
ParsedHeader parse_header(int fd, const std::string& path);

// Opens a .coli_kv file for reading: kInvalidArgument unless it is a
// regular file.
Fd open_for_reading(const std::string& path);

// Reads records [first, first + count) of the open file (of model m) into
// `records`, resized to count * record_bytes, and their token ids into
// tokens[0, count). Throws kIO "the file shrank while it was <doing>" when
// the file ends before them, kInvalidArgument naming the record when a token
// id is outside [0, vocab). The one record reader of import and read.
void read_records(int fd, const std::string& path, const ModelSignature& m, int64_t first, int64_t count,
                  std::vector<uint8_t>& records, int32_t* tokens, const char* doing);

}  // namespace coli_kv_file
}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_CORE_COLI_KV_FILE_H
