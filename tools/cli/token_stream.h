// Token ids read from a file one at a time, so that memory stays bounded
// whatever the file holds or claims (inspect --tokens N, match --tokens FILE).
#ifndef COLIKV_TOOLS_CLI_TOKEN_STREAM_H
#define COLIKV_TOOLS_CLI_TOKEN_STREAM_H

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace colikv_cli {

class TokenStream {
 public:
  virtual ~TokenStream() = default;
  // The next token id; false at the end.
  virtual bool next(int32_t& token) = 0;
};

// The token ids of the first `count` records of a .coli_kv file (whose
// records are record_bytes long), read through a bounded buffer.
class ColiKvTokens : public TokenStream {
 public:
  ColiKvTokens(const std::string& path, int64_t record_bytes, int64_t count);
  ~ColiKvTokens() override;
  ColiKvTokens(const ColiKvTokens&) = delete;
  ColiKvTokens& operator=(const ColiKvTokens&) = delete;
  bool next(int32_t& token) override;

 private:
  std::string path_;
  int fd_ = -1;
  int64_t record_bytes_;
  int64_t count_;
  int64_t pos_ = 0;             // the next record
  int64_t buffered_first_ = 0;  // the first record in buffer_
  int64_t buffered_ = 0;        // records in buffer_
  std::vector<char> buffer_;
};

// Token ids written as decimal numbers separated by whitespace. Throws
// std::runtime_error naming the file and the token on anything else.
class TextTokens : public TokenStream {
 public:
  explicit TextTokens(const std::string& path);
  ~TextTokens() override;
  TextTokens(const TextTokens&) = delete;
  TextTokens& operator=(const TextTokens&) = delete;
  bool next(int32_t& token) override;

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  int64_t index_ = 0;  // of the next token, for messages
};

}  // namespace colikv_cli

#endif  // COLIKV_TOOLS_CLI_TOKEN_STREAM_H
