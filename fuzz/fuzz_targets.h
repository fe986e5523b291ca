// The bodies of the libFuzzer targets (fuzz/fuzz_coli_kv.cpp,
// fuzz/fuzz_chunk_decode.cpp), also run by the default test suite on
// mutated seeds (tests/test_bad_stores.cpp). Each takes arbitrary bytes and
// must only ever throw colikv::Error; anything else (a crash, a sanitizer
// report, another exception) is a bug.
#ifndef COLIKV_FUZZ_FUZZ_TARGETS_H
#define COLIKV_FUZZ_FUZZ_TARGETS_H

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/chunk_codec.h"
#include "colikv/coli_kv.h"
#include "colikv/error.h"
#include "colikv/store.h"

namespace colikv_fuzz {

// A scratch directory and store for the whole process.
struct Scratch {
  std::string dir, file, store_path;
  std::unique_ptr<colikv::Store> store;
  Scratch() {
    const char* base = std::getenv("TMPDIR");
    std::string templ = std::string(base && *base ? base : "/tmp") + "/colikv_fuzz_XXXXXX";
    std::vector<char> buf(templ.begin(), templ.end());
    buf.push_back('\0');
    if (!mkdtemp(buf.data())) std::abort();
    dir = buf.data();
    file = dir + "/input.coli_kv";
    store_path = dir + "/fuzz.colikv";
    colikv::Options o;
    o.synchronous = colikv::Synchronous::kNormal;
    o.threads = 1;
    o.chunk_target_bytes = 4096;
    store = std::make_unique<colikv::Store>(store_path, o);
  }
  ~Scratch() {
    store.reset();
    ::unlink(file.c_str());
    ::unlink(store_path.c_str());
    for (const char* name : {"/mutant.colikv", "/mutant.colikv-wal", "/mutant.colikv-shm", "/out.coli_kv"})
      ::unlink((dir + name).c_str());
    ::unlink((store_path + "-wal").c_str());
    ::unlink((store_path + "-shm").c_str());
    ::rmdir(dir.c_str());
  }
};

inline Scratch& scratch() {
  static Scratch s;
  return s;
}

// Inputs whose header asks for more than this many bytes of records are cut
// short by the fuzzer's own size limit anyway; nothing here allocates by the
// header's word.
inline void coli_kv_one(const uint8_t* data, size_t size) {
  Scratch& s = scratch();
  int fd = ::open(s.file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) std::abort();
  if (size > 0 && ::write(fd, data, size) != static_cast<ssize_t>(size)) std::abort();
  ::close(fd);
  try {
    colikv::ColiKvInspection r = colikv::inspect_coli_kv(s.file, 8);
    (void)r;
  } catch (const colikv::Error&) {
  }
  for (bool salvage : {false, true}) {
    colikv::ImportOptions io;
    io.id = "fuzz";
    io.salvage = salvage;
    try {
      colikv::import_coli_kv(*s.store, s.file, io);
    } catch (const colikv::Error&) {
    }
    try {
      if (s.store->exists("fuzz")) {
        // What was imported must load back (and then goes away again).
        colikv::ConversationInfo info = s.store->info("fuzz");
        (void)s.store->tokens("fuzz");
        s.store->remove("fuzz");
        (void)info;
      }
    } catch (const colikv::Error&) {
      std::abort();  // an accepted import that does not read back is a bug
    }
  }
}

// One tenant of a mutated store: opened read-only, its limits read, every
// conversation listed, verified, read back and exported; then opened for
// writing, each truncated to a third of its length and forked at half, and
// the tenant's limits applied (expire, gc).
inline void store_tenant_one(const std::string& path, const std::string& tenant) {
  Scratch& s = scratch();
  colikv::Options o;
  o.threads = 1;
  o.synchronous = colikv::Synchronous::kNormal;
  o.busy_timeout_ms = 0;
  o.tenant = tenant;
  o.create_tenant_if_missing = false;
  std::vector<colikv::ConversationInfo> listed;
  colikv::TenantLimits limits;  // the mutant's, applied as colikv gc applies them
  try {
    o.read_only = true;
    colikv::Store r(path, o);
    (void)r.stats();
    limits = r.tenant_limits();
    listed = r.list(colikv::ListOptions());
    for (const auto& c : listed) {
      try {
        (void)r.verify(c.id);
        (void)r.tokens(c.id);
        colikv::ExportOptions eo;
        eo.force = true;
        colikv::export_coli_kv(r, c.id, s.dir + "/out.coli_kv", eo);
      } catch (const colikv::Error&) {
      }
    }
  } catch (const colikv::Error&) {
  }
  try {
    o.read_only = false;
    o.create_if_missing = false;
    colikv::Store w(path, o);
    for (const auto& c : listed) {
      try {
        w.fork(c.id, c.id + "~", c.tokens / 2);
        w.truncate(c.id, c.tokens / 3);
        w.remove(c.id + "~");
      } catch (const colikv::Error&) {
      }
    }
    if (limits.max_idle_ms) (void)w.expire(*limits.max_idle_ms);
    if (limits.max_bytes) (void)w.gc(*limits.max_bytes);
  } catch (const colikv::Error&) {
  }
}

// Input: the bytes of a store file (the seeds are small valid stores, with
// conversations in the default tenant and in another). Every tenant the
// mutant's tenants table names goes through store_tenant_one (the default
// first); the schema check, the size limits and the tenant rows are what a
// mutant meets.
inline void store_one(const uint8_t* data, size_t size) {
  Scratch& s = scratch();
  const std::string path = s.dir + "/mutant.colikv";
  for (const char* suffix : {"", "-wal", "-shm"}) ::unlink((path + suffix).c_str());
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) std::abort();
  if (size > 0 && ::write(fd, data, size) != static_cast<ssize_t>(size)) std::abort();
  ::close(fd);
  std::vector<std::string> tenants{""};
  try {
    colikv::Options o;
    o.threads = 1;
    o.read_only = true;
    o.busy_timeout_ms = 0;
    colikv::Store r(path, o);
    for (const colikv::TenantInfo& t : r.tenants())
      if (!t.name.empty() && tenants.size() < 8) tenants.push_back(t.name);
  } catch (const colikv::Error&) {
  }
  for (const std::string& t : tenants) store_tenant_one(path, t);
}

// What chunk_decode_one made of its input: the chunk's shape as the input
// gave it, and either its decoded values (plane after plane) or the
// colikv::Error's code and message. An input too short to name a shape is
// neither (decoded false, code kOk).
struct ChunkDecodeResult {
  int64_t n_tokens = 0;
  int planes = 0;
  int64_t width = 0;
  int64_t raw_size = 0;
  bool decoded = false;
  std::vector<float> values;
  colikv::ErrorCode code = colikv::ErrorCode::kOk;
  std::string message;
};

// Input: 1 byte flags (bit 0 compressed), 1 byte n_tokens (1..16), 1 byte
// shape (planes 1..4 of width 1..8), 4 bytes checksum, 4 bytes raw_size
// delta, then token ids are derived, then the payload.
inline ChunkDecodeResult chunk_decode_one(const uint8_t* data, size_t size) {
  ChunkDecodeResult out;
  if (size < 11) return out;
  const bool compressed = data[0] & 1;
  const int64_t n_tokens = 1 + data[1] % 16;
  const int planes_n = 1 + data[2] % 4;
  const int64_t width = 1 + (data[2] >> 2) % 8;
  uint32_t checksum, raw_delta;
  std::memcpy(&checksum, data + 3, 4);
  std::memcpy(&raw_delta, data + 7, 4);
  const uint8_t* payload = data + 11;
  const size_t payload_size = size - 11;
  std::vector<float> buf(static_cast<size_t>(planes_n * width * n_tokens));
  colikv::detail::PlaneList planes;
  for (int p = 0; p < planes_n; ++p) planes.push_back({buf.data() + p * width * n_tokens, width, width});
  std::vector<int32_t> tokens(static_cast<size_t>(n_tokens));
  for (int64_t i = 0; i < n_tokens; ++i) tokens[static_cast<size_t>(i)] = static_cast<int32_t>(i * 7);
  int64_t raw_size = colikv::detail::planes_raw_size(planes, n_tokens);
  // Mostly the right size, sometimes a hostile one.
  if (raw_delta % 4 == 1) raw_size += static_cast<int32_t>(raw_delta) >> 2;
  if (raw_delta % 4 == 2) raw_size = static_cast<int64_t>(raw_delta) << 20;
  out.n_tokens = n_tokens;
  out.planes = planes_n;
  out.width = width;
  out.raw_size = raw_size;
  try {
    colikv::detail::decode_chunk(payload, payload_size, compressed, raw_size, checksum, n_tokens, tokens.data(),
                                 planes);
    out.decoded = true;
    out.values = std::move(buf);
  } catch (const colikv::Error& e) {
    out.code = e.code();
    out.message = e.what();
  }
  return out;
}

}  // namespace colikv_fuzz

#endif  // COLIKV_FUZZ_FUZZ_TARGETS_H
