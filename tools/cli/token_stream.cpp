#include "token_stream.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <stdexcept>

#include "colikv/coli_kv.h"

namespace colikv_cli {

namespace {

// Records are read this many bytes at a time (one record at least).
constexpr int64_t kBufferBytes = int64_t{1} << 20;

// Text tokens longer than this are quoted only in part.
constexpr size_t kQuotedChars = 40;

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw std::runtime_error(path + ": " + what);
}

}  // namespace

ColiKvTokens::ColiKvTokens(const std::string& path, int64_t record_bytes, int64_t count)
    : path_(path), record_bytes_(record_bytes), count_(std::max<int64_t>(count, 0)) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) fail(path, std::strerror(errno));
  // Whole records when they fit the buffer; else only each record's token id.
  const int64_t per_read = record_bytes_ <= kBufferBytes ? kBufferBytes / record_bytes_ * record_bytes_ : 4;
  buffer_.resize(static_cast<size_t>(per_read));
}

ColiKvTokens::~ColiKvTokens() {
  if (fd_ >= 0) ::close(fd_);
}

bool ColiKvTokens::next(int32_t& token) {
  if (pos_ >= count_) return false;
  const bool whole_records = static_cast<int64_t>(buffer_.size()) >= record_bytes_;
  if (pos_ >= buffered_first_ + buffered_) {
    const int64_t records =
        whole_records ? std::min<int64_t>(count_ - pos_, static_cast<int64_t>(buffer_.size()) / record_bytes_) : 1;
    const size_t want = static_cast<size_t>(whole_records ? records * record_bytes_ : 4);
    size_t got = 0;
    while (got < want) {
      const ssize_t r = ::pread(fd_, buffer_.data() + got, want - got,
                                static_cast<off_t>(colikv::kColiKvHeaderBytes + pos_ * record_bytes_ + got));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) fail(path_, std::string("read: ") + std::strerror(errno));
      if (r == 0) fail(path_, "the file shrank while it was read");
      got += static_cast<size_t>(r);
    }
    buffered_first_ = pos_;
    buffered_ = records;
  }
  const int64_t offset = whole_records ? (pos_ - buffered_first_) * record_bytes_ : 0;
  std::memcpy(&token, buffer_.data() + offset, 4);
  ++pos_;
  return true;
}

TextTokens::TextTokens(const std::string& path) : path_(path) {
  file_ = std::fopen(path.c_str(), "rb");
  if (!file_) fail(path, std::strerror(errno));
}

TextTokens::~TextTokens() {
  if (file_) std::fclose(file_);
}

bool TextTokens::next(int32_t& token) {
  int c;
  while ((c = std::getc(file_)) != EOF && std::isspace(c)) {
  }
  if (c == EOF) {
    if (std::ferror(file_)) fail(path_, "read error");
    return false;
  }
  // The digits are kept up to what an int32 can take; a longer token is
  // refused whatever its length, quoting its start.
  std::string text;
  bool too_long = false;
  for (; c != EOF && !std::isspace(c); c = std::getc(file_)) {
    if (text.size() < kQuotedChars) text += static_cast<char>(c);
    else too_long = true;
  }
  int32_t v = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  if (too_long || r.ec != std::errc() || r.ptr != text.data() + text.size() || v < 0)
    fail(path_, "'" + text + (too_long ? "..." : "") + "' (token " + std::to_string(index_) +
                    ") is not a token id (a non-negative 32-bit integer)");
  ++index_;
  token = v;
  return true;
}

}  // namespace colikv_cli
