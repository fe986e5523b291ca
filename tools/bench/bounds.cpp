// bounds: what bounds append and load, each alone: the chunk codec, SQLite
// writing the same blobs, the device's synced writes.
#include <unistd.h>

#include <future>
#include <thread>

#include <sqlite3.h>

#include "bench.h"
#include "bench_access.h"

namespace colikv_bench {

// What bounds append and load, measured alone on this machine: the codec on
// one thread and on every core, SQLite writing multi-megabyte blobs (with and
// without its checkpoint), and the device's synced write speed.
void bench_bounds(const Config& cfg, const Shape& shape, Kind kind) {
  const colikv::ModelSignature& m = shape.m;
  const int64_t C = 16, chunks = cfg.quick ? 16 : 48, n = C * chunks;
  Engine e(m, n);
  e.compute(0, n, 9, kind);
  const double mb = static_cast<double>(n) * 4.0 * static_cast<double>(m.floats_per_token()) / 1e6;
  auto planes = [&](int64_t first) {
    std::vector<access::CodecPlane> pl;
    for (int l = 0; l < m.n_layers; ++l) {
      pl.push_back({e.lc[l].data() + first * m.kv_lora, m.kv_lora, m.kv_lora});
      pl.push_back({e.rc[l].data() + first * m.qk_rope, m.qk_rope, m.qk_rope});
    }
    return pl;
  };
  std::vector<access::CodecChunk> enc(static_cast<size_t>(chunks));
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  double enc1 = 0, encn = 0, dec1 = 0, decn = 0;
  for (int threads : {1, cores}) {
    auto run = [&](bool decode) {
      auto t0 = Clock::now();
      std::vector<std::future<void>> fs;
      for (int t = 0; t < threads; ++t)
        fs.push_back(std::async(std::launch::async, [&, t] {
          for (int64_t k = t; k < chunks; k += threads) {
            if (!decode) {
              enc[static_cast<size_t>(k)] = access::encode_chunk(C, e.tokens.data() + k * C, planes(k * C), 1);
            } else {
              access::decode_chunk(enc[static_cast<size_t>(k)], C, e.tokens.data() + k * C, planes(k * C));
            }
          }
        }));
      for (auto& f : fs) f.get();
      return mb / since(t0);
    };
    (threads == 1 ? enc1 : encn) = run(false);
    (threads == 1 ? dec1 : decn) = run(true);
  }
  const std::string k = kind_name(kind);
  const std::string tn = std::to_string(cores) + " threads";
  add({"bounds", shape.name, k, "f32", "-", "encode (shuffle+zstd1+crc)", "MB/s", encn, enc1, true, "", -1,
       "colikv column: " + tn + "; baseline column: 1 thread (ratio = parallel speed-up)"});
  add({"bounds", shape.name, k, "f32", "-", "decode (zstd+crc+unshuffle)", "MB/s", decn, dec1, true, "", -1,
       "colikv column: " + tn + "; baseline column: 1 thread"});
  int64_t stored = 0;
  for (auto& x : enc) stored += static_cast<int64_t>(x.payload.size());
  // SQLite: the same blobs inserted 16 a transaction, WAL, page 65536.
  for (const char* sync : {"FULL", "NORMAL"}) {
    double with_ckpt = 0, without = 0;
    for (int ck = 0; ck < 2; ++ck) {
      const std::string db = cfg.dir + "/bounds.db";
      remove_store(db);
      sqlite3* h = nullptr;
      sqlite3_open(db.c_str(), &h);
      sqlite3_exec(h, (std::string("PRAGMA page_size=65536; PRAGMA journal_mode=WAL; PRAGMA synchronous=") + sync +
                       (ck ? "; PRAGMA wal_autocheckpoint=0" : "") + "; CREATE TABLE t(id INTEGER PRIMARY KEY, p BLOB)")
                          .c_str(),
                   nullptr, nullptr, nullptr);
      sqlite3_stmt* st = nullptr;
      sqlite3_prepare_v2(h, "INSERT INTO t(p) VALUES (?)", -1, &st, nullptr);
      ::sync();
      auto t0 = Clock::now();
      for (int rep = 0; rep < 3; ++rep)
        for (int64_t first = 0; first < chunks; first += 16) {
          sqlite3_exec(h, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
          for (int64_t j = first; j < std::min(chunks, first + 16); ++j) {
            const auto& x = enc[static_cast<size_t>(j)];
            sqlite3_bind_blob(st, 1, x.payload.data(), static_cast<int>(x.payload.size()), SQLITE_STATIC);
            sqlite3_step(st);
            sqlite3_reset(st);
          }
          sqlite3_exec(h, "COMMIT", nullptr, nullptr, nullptr);
        }
      (ck ? without : with_ckpt) = 3 * static_cast<double>(stored) / 1e6 / since(t0);
      sqlite3_finalize(st);
      sqlite3_close(h);
      remove_store(db);
    }
    add({"bounds", shape.name, k, "f32", sync, "SQLite blob insert", "MB/s", with_ckpt, without, true, "", -1,
         "compressed MB/s; colikv column: SQLite's inline auto-checkpoint, baseline column: no checkpoint"});
  }
  // The device: 3 x the stored bytes written and fdatasync'd every 64 MB.
  {
    const std::string f = cfg.dir + "/bounds.raw";
    FILE* fp = std::fopen(f.c_str(), "wb");
    std::vector<char> buf(static_cast<size_t>(64) << 20, 1);
    ::sync();
    auto t0 = Clock::now();
    int64_t written = 0;
    while (written < 3 * stored) {
      std::fwrite(buf.data(), 1, buf.size(), fp);
      std::fflush(fp);
      ::fdatasync(fileno(fp));
      written += static_cast<int64_t>(buf.size());
    }
    const double w = static_cast<double>(written) / 1e6 / since(t0);
    std::fclose(fp);
    ::unlink(f.c_str());
    add({"bounds", "-", "-", "-", "-", "device write+fdatasync", "MB/s", w, 0, false, "", -1, "64 MB per fdatasync"});
  }
}

}  // namespace colikv_bench
