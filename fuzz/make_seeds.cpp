// Writes seed corpora for the fuzzers: well-formed and slightly broken
// .coli_kv files, encoded chunks in the chunk_decode input layout, and small
// valid store files.
//   make_seeds DIR   (creates DIR/coli_kv, DIR/chunk and DIR/store)
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/chunk_codec.h"
#include "colikv/store.h"

namespace {

void put(const std::string& path, const std::string& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return;
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
}

std::string coli_kv(int32_t layers, int32_t kv, int32_t rope, int32_t ihd, int32_t nidx, int32_t vocab, int32_t n,
                    int32_t nrec, int extra) {
  std::string out("COLIKV1\0", 8);
  int32_t h[8] = {layers, kv, rope, ihd, nidx, vocab, nrec, 0};
  out.append(reinterpret_cast<const char*>(h), sizeof h);
  const int64_t floats = static_cast<int64_t>(layers) * (kv + rope) + static_cast<int64_t>(nidx) * ihd;
  for (int32_t p = 0; p < n; ++p) {
    int32_t t = (p * 31) % vocab;
    out.append(reinterpret_cast<const char*>(&t), 4);
    for (int64_t j = 0; j < floats; ++j) {
      float v = static_cast<float>((p * 131 + j * 7) % 97) / 13.0f - 3.0f;
      out.append(reinterpret_cast<const char*>(&v), 4);
    }
  }
  out.append(static_cast<size_t>(extra), '\x55');
  return out;
}

// A small valid store (512-byte pages, chunks of 4 positions): a
// conversation over several chunks, a short one and a fork of the first, and
// in tenant "t" the first again and a fork of it.
void store_seed(const std::string& path, colikv::Precision precision) {
  for (const char* suffix : {"", "-wal", "-shm"}) ::unlink((path + suffix).c_str());
  colikv::ModelSignature m;
  m.n_layers = 2;
  m.kv_lora = 4;
  m.qk_rope = 2;
  m.vocab = 50;
  colikv::Options o;
  o.page_size = 512;
  o.chunk_target_bytes = 4 * m.record_bytes();
  o.threads = 1;
  o.synchronous = colikv::Synchronous::kNormal;
  o.new_conversation_precision = precision;
  const int64_t n = 11;
  std::vector<std::vector<float>> lc(2, std::vector<float>(n * 4)), rc(2, std::vector<float>(n * 2));
  for (int l = 0; l < 2; ++l) {
    for (size_t i = 0; i < lc[l].size(); ++i) lc[l][i] = static_cast<float>((i * 7 + l) % 13) / 3.0f;
    for (size_t i = 0; i < rc[l].size(); ++i) rc[l][i] = static_cast<float>((i * 5 + l) % 11) / 7.0f;
  }
  const float* lp[2] = {lc[0].data(), lc[1].data()};
  const float* rp[2] = {rc[0].data(), rc[1].data()};
  colikv::KvSource kv;
  kv.Lc = lp;
  kv.Rc = rp;
  std::vector<int32_t> tokens(n);
  for (int64_t i = 0; i < n; ++i) tokens[static_cast<size_t>(i)] = static_cast<int32_t>((i * 31) % 50);
  colikv::Store s(path, o);  // closed last: the WAL is checkpointed into the one file
  s.append("a", m, tokens.data(), n, kv);
  s.append("b", m, tokens.data(), 3, kv);
  s.fork("a", "f", 6);
  s.set_title("b", "seed");
  // The same content in another tenant: its own chunks, its own chain.
  colikv::Options to = o;
  to.tenant = "t";
  colikv::Store t(path, to);
  t.append("a", m, tokens.data(), n, kv);
  t.fork("a", "f", 5);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  ::mkdir(dir.c_str(), 0755);
  ::mkdir((dir + "/coli_kv").c_str(), 0755);
  ::mkdir((dir + "/chunk").c_str(), 0755);
  ::mkdir((dir + "/store").c_str(), 0755);
  store_seed(dir + "/store/f32", colikv::Precision::kF32);
  store_seed(dir + "/store/bf16", colikv::Precision::kBf16);
  put(dir + "/coli_kv/ok_small", coli_kv(2, 4, 2, 0, 0, 50, 5, 5, 0));
  put(dir + "/coli_kv/ok_indexed", coli_kv(3, 4, 2, 2, 1, 100, 9, 9, 0));
  put(dir + "/coli_kv/torn_tail", coli_kv(2, 4, 2, 0, 0, 50, 4, 4, 13));
  put(dir + "/coli_kv/count_short", coli_kv(2, 4, 2, 0, 0, 50, 6, 3, 0));
  put(dir + "/coli_kv/count_long", coli_kv(2, 4, 2, 0, 0, 50, 3, 7, 0));
  put(dir + "/coli_kv/empty_records", coli_kv(1, 1, 1, 0, 0, 2, 0, 0, 0));
  put(dir + "/coli_kv/header_only", coli_kv(2, 4, 2, 0, 0, 50, 0, 0, 0).substr(0, 40));
  // Chunks: flags, n_tokens, shape, checksum, raw delta, payload.
  for (int compressed_data = 0; compressed_data < 2; ++compressed_data) {
    const int64_t n = 5, planes_n = 2, width = 3;
    std::vector<float> buf(static_cast<size_t>(planes_n * width * n));
    for (size_t i = 0; i < buf.size(); ++i) buf[i] = compressed_data ? 1.0f : static_cast<float>(i) * 0.37f;
    colikv::detail::PlaneList planes;
    for (int p = 0; p < planes_n; ++p) planes.push_back({buf.data() + p * width * n, width, width});
    std::vector<int32_t> tokens(n);
    for (int64_t i = 0; i < n; ++i) tokens[static_cast<size_t>(i)] = static_cast<int32_t>(i * 7);
    colikv::detail::EncodedChunk e = colikv::detail::encode_chunk(n, tokens.data(), planes, 1);
    std::string in;
    in.push_back(static_cast<char>(e.compressed ? 1 : 0));
    in.push_back(static_cast<char>(n - 1));
    in.push_back(static_cast<char>((planes_n - 1) | ((width - 1) << 2)));
    in.append(reinterpret_cast<const char*>(&e.checksum), 4);
    uint32_t delta = 0;
    in.append(reinterpret_cast<const char*>(&delta), 4);
    in.append(reinterpret_cast<const char*>(e.payload.data()), e.payload.size());
    put(dir + "/chunk/seed" + std::to_string(compressed_data), in);
  }
  return 0;
}
