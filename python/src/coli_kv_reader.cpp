#include "coli_kv_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "colikv/coli_kv_format.h"
#include "colikv/error.h"

namespace colikv_py {

using colikv::Error;
using colikv::ErrorCode;

namespace {

std::string file_id(const std::string& path) {
  std::string name = path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
  const std::string ext = ".coli_kv";
  if (name.size() > ext.size() && name.compare(name.size() - ext.size(), ext.size(), ext) == 0)
    name.resize(name.size() - ext.size());
  return name;
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Records [0, n) of the open file into the arrays, a block of records at a
// time: a record holds the token, then per layer kv_lora and qk_rope floats,
// then index_hd floats per indexed layer (colikv/coli_kv.h).
void scatter_records(int fd, const std::string& where, const colikv::ModelSignature& m, int64_t n, const LoadArrays& a,
                     int32_t* tokens) {
  const int64_t rb = m.record_bytes();
  const int64_t per_block = std::max<int64_t>(1, (int64_t{4} << 20) / rb);
  std::vector<char> block(static_cast<size_t>(std::min(per_block, std::max<int64_t>(n, 1)) * rb));
  for (int64_t first = 0; first < n; first += per_block) {
    const int64_t count = std::min(per_block, n - first);
    const size_t want = static_cast<size_t>(count * rb);
    size_t got = 0;
    while (got < want) {
      const ssize_t r = ::pread(fd, block.data() + got, want - got,
                                static_cast<off_t>(colikv::kColiKvHeaderBytes + first * rb + static_cast<int64_t>(got)));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) throw Error(ErrorCode::kIO, where + ": read failed: " + std::strerror(errno));
      if (r == 0) throw Error(ErrorCode::kIO, where + ": the file shrank while it was read");
      got += static_cast<size_t>(r);
    }
    for (int64_t i = 0; i < count; ++i) {
      const char* rec = block.data() + i * rb;
      const int64_t pos = first + i;
      int32_t token;
      std::memcpy(&token, rec, 4);
      if (token < 0 || token >= m.vocab)
        throw Error(ErrorCode::kInvalidArgument, where + ": record " + std::to_string(pos) + " has token id " +
                                                     std::to_string(token) + " outside [0, vocab=" +
                                                     std::to_string(m.vocab) + ") (the file changed while it was read?)");
      tokens[pos] = token;
      const char* p = rec + 4;
      for (int l = 0; l < m.n_layers; ++l) {
        std::memcpy(a.lc_ptrs[static_cast<size_t>(l)] + pos * m.kv_lora, p, static_cast<size_t>(m.kv_lora) * 4);
        p += static_cast<int64_t>(m.kv_lora) * 4;
        std::memcpy(a.rc_ptrs[static_cast<size_t>(l)] + pos * m.qk_rope, p, static_cast<size_t>(m.qk_rope) * 4);
        p += static_cast<int64_t>(m.qk_rope) * 4;
      }
      for (int l = 0; l < m.n_indexed; ++l) {
        std::memcpy(a.ic_ptrs[static_cast<size_t>(l)] + pos * m.index_hd, p, static_cast<size_t>(m.index_hd) * 4);
        p += static_cast<int64_t>(m.index_hd) * 4;
      }
    }
  }
}

}  // namespace

KV read_coli_kv(const std::string& path, std::optional<int64_t> limit) {
  if (limit && *limit < 0) throw Error(ErrorCode::kInvalidArgument, "limit must be >= 0, not " + std::to_string(*limit));
  const std::string where = "'" + path + "'";
  colikv::ColiKvInspection ins;
  {
    py::gil_scoped_release nogil;
    ins = colikv::inspect_coli_kv(path, 0);
  }
  if (!ins.ok()) {
    std::string what = where + " is not a well-formed .coli_kv file: ";
    for (size_t i = 0; i < ins.problems.size(); ++i) what += (i ? "; " : "") + ins.problems[i];
    throw Error(ErrorCode::kInvalidArgument, what);
  }
  const colikv::ModelSignature m = ins.model;
  const int64_t n = limit ? std::min(*limit, ins.header_count) : ins.header_count;
  LoadArrays a = make_load_arrays(m, n);
  int32_t* tokens = a.tokens.mutable_data();
  {
    py::gil_scoped_release nogil;
    Fd f;
    // O_NONBLOCK: a FIFO put in the file's place meanwhile must not block the open.
    f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (f.fd < 0)
      throw Error(errno == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIO, where + ": " + std::strerror(errno));
    struct stat st;
    if (::fstat(f.fd, &st) != 0) throw Error(ErrorCode::kIO, where + ": " + std::strerror(errno));
    if (!S_ISREG(st.st_mode)) throw Error(ErrorCode::kInvalidArgument, where + " is not a regular file");
    if (st.st_size < colikv::kColiKvHeaderBytes + n * m.record_bytes())
      throw Error(ErrorCode::kIO, where + ": the file shrank while it was read");
    scatter_records(f.fd, where, m, n, a, tokens);
  }
  return make_kv(file_id(path), m, a, n, n);
}

}  // namespace colikv_py
