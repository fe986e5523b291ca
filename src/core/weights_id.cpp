// The weights identity of a model folder: what an engine without one of its
// own (colibri) can compute cheaply and the CLI can compute the same way.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/chunk_codec.h"
#include "core/fd.h"
#include "core/file_kind.h"
#include "colikv/error.h"
#include "colikv/model.h"

namespace colikv {
namespace detail {
ChunkHash sha256(const void* data, size_t n);  // chunk_codec.cpp
}  // namespace detail

namespace {

constexpr int64_t kMaxConfigBytes = int64_t{16} << 20;

// Reads config.json, refusing anything but a regular file (a FIFO would block
// the open, /dev/zero would never end) and reading no more than the limit
// whatever the file grows to meanwhile.
std::string read_config(const std::string& dir) {
  const std::string path = dir + "/config.json";
  const std::string what = "weights identity of " + dir + ": " + path;
  detail::Fd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  struct stat st;
  if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0) {
    const int err = errno;
    throw Error(err == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIO, what + ": " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode))
    throw Error(ErrorCode::kInvalidArgument, what + " is " + detail::file_kind(st.st_mode) + ", not a regular file");
  std::string bytes;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    const int err = errno;
    if (n < 0 && err == EINTR) continue;
    if (n < 0) throw Error(ErrorCode::kIO, what + ": read: " + std::strerror(err));
    if (n == 0) return bytes;
    bytes.append(buf, static_cast<size_t>(n));
    if (static_cast<int64_t>(bytes.size()) > kMaxConfigBytes)
      throw Error(ErrorCode::kInvalidArgument,
                  what + " is larger than " + std::to_string(kMaxConfigBytes >> 20) + " MiB");
  }
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// (name, size) of each regular *.safetensors file, sorted by name.
std::vector<std::pair<std::string, int64_t>> weights_files(const std::string& dir) {
  std::unique_ptr<DIR, int (*)(DIR*)> d(opendir(dir.c_str()), closedir);
  if (!d) throw Error(ErrorCode::kIO, "weights identity of " + dir + ": " + std::strerror(errno));
  std::vector<std::pair<std::string, int64_t>> files;
  while (const dirent* e = readdir(d.get())) {
    const std::string name = e->d_name;
    struct stat st;
    if (!ends_with(name, ".safetensors") || stat((dir + "/" + name).c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    files.emplace_back(name, static_cast<int64_t>(st.st_size));
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

std::string weights_id_from_dir(const std::string& model_dir) {
  std::string text = "colikv weights id v1";
  text += '\0';
  const std::string config = read_config(model_dir);
  text += std::to_string(config.size()) + '\0' + config;
  for (const auto& f : weights_files(model_dir)) text += f.first + '\0' + std::to_string(f.second) + '\0';
  const detail::ChunkHash h = detail::sha256(text.data(), text.size());
  return "w" + detail::hash_hex(h).substr(0, 16);
}

}  // namespace colikv
