#include "test_support.h"

#include <SQLiteCpp/SQLiteCpp.h>

#include "backend.h"

#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "sqlite/sqlite_migrations.h"

namespace colikv_test {

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string templ = std::string(base && *base ? base : "/tmp") + "/colikv_test_XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) throw std::runtime_error("mkdtemp failed for " + templ);
  path_ = buf.data();
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

colikv::ModelSignature tiny_model() {
  colikv::ModelSignature m;
  m.n_layers = 3; m.kv_lora = 16; m.qk_rope = 8; m.index_hd = 0; m.n_indexed = 0; m.vocab = 1000;
  return m;
}

colikv::ModelSignature wide_model() {
  colikv::ModelSignature m = tiny_model();
  m.kv_lora = 512;
  m.qk_rope = 64;
  return m;
}

colikv::ModelSignature tiny_indexed_model() {
  colikv::ModelSignature m;
  m.n_layers = 4; m.kv_lora = 16; m.qk_rope = 8; m.index_hd = 8; m.n_indexed = 2; m.vocab = 1000;
  return m;
}

colikv::ModelSignature sample_model() {
  colikv::ModelSignature m;
  m.n_layers = 5; m.kv_lora = 32; m.qk_rope = 8; m.index_hd = 0; m.n_indexed = 0; m.vocab = 264;
  return m;
}

EngineBuffers::EngineBuffers(const colikv::ModelSignature& m, int64_t cap) : model(m), capacity(cap) {
  tokens.assign(static_cast<size_t>(cap), 0);
  for (int l = 0; l < m.n_layers; ++l) {
    lc.emplace_back(static_cast<size_t>(cap * m.kv_lora));
    rc.emplace_back(static_cast<size_t>(cap * m.qk_rope));
    ic.emplace_back(indexed(l) ? static_cast<size_t>(cap * m.index_hd) : 0);
  }
  refresh_pointers();
}

bool EngineBuffers::indexed(int layer) const { return layer >= model.n_layers - model.n_indexed; }

void EngineBuffers::refresh_pointers() {
  lp_.clear(); rp_.clear(); ip_.clear(); lcp_.clear(); rcp_.clear(); icp_.clear();
  for (int l = 0; l < model.n_layers; ++l) {
    lp_.push_back(lc[l].data()); rp_.push_back(rc[l].data());
    ip_.push_back(indexed(l) ? ic[l].data() : nullptr);
    lcp_.push_back(lp_.back()); rcp_.push_back(rp_.back()); icp_.push_back(ip_.back());
  }
}

// A cheap deterministic hash to make values look like activations: varied
// exponents and full mantissas.
static uint32_t mix(uint32_t x) {
  x ^= x >> 16; x *= 0x7feb352dU; x ^= x >> 15; x *= 0x846ca68bU; x ^= x >> 16;
  return x;
}

static float value_at(uint32_t seed, int64_t pos, int layer, int kind, int64_t j) {
  uint32_t h = mix(seed * 0x9e3779b9U ^ mix(static_cast<uint32_t>(pos) * 31 + static_cast<uint32_t>(layer) * 7919 +
                                            static_cast<uint32_t>(kind) * 104729 + static_cast<uint32_t>(j) * 15485863U));
  float unit = static_cast<float>(h & 0xffffff) / static_cast<float>(0x1000000) - 0.5f;
  float scale = 0.05f + static_cast<float>(j % 13);  // per-channel scales
  return unit * scale;
}

void EngineBuffers::fill(int64_t from, int64_t to, uint32_t seed) {
  for (int l = 0; l < model.n_layers; ++l) {
    for (int64_t p = from; p < to; ++p) {
      for (int64_t j = 0; j < model.kv_lora; ++j) lc[l][p * model.kv_lora + j] = value_at(seed, p, l, 0, j);
      for (int64_t j = 0; j < model.qk_rope; ++j) rc[l][p * model.qk_rope + j] = value_at(seed, p, l, 1, j);
      if (indexed(l))
        for (int64_t j = 0; j < model.index_hd; ++j) ic[l][p * model.index_hd + j] = value_at(seed, p, l, 2, j);
    }
  }
}

void EngineBuffers::poison() {
  uint32_t nan_bits = 0x7fc0dead;
  float nan;
  std::memcpy(&nan, &nan_bits, 4);
  for (auto& v : lc) std::fill(v.begin(), v.end(), nan);
  for (auto& v : rc) std::fill(v.begin(), v.end(), nan);
  for (auto& v : ic) std::fill(v.begin(), v.end(), nan);
  std::fill(tokens.begin(), tokens.end(), -7);
}

colikv::KvSource EngineBuffers::source() const {
  colikv::KvSource s;
  s.Lc = lcp_.data(); s.Rc = rcp_.data(); s.Ic = model.n_indexed ? icp_.data() : nullptr;
  return s;
}

colikv::KvTarget EngineBuffers::target() {
  colikv::KvTarget t;
  t.Lc = lp_.data(); t.Rc = rp_.data(); t.Ic = model.n_indexed ? ip_.data() : nullptr;
  return t;
}

static std::string compare_floats(const char* what, int layer, const std::vector<float>& a,
                                  const std::vector<float>& b, int64_t count, int64_t width) {
  if (count == 0) return "";
  if (std::memcmp(a.data(), b.data(), static_cast<size_t>(count) * 4) == 0) return "";
  for (int64_t i = 0; i < count; ++i) {
    if (std::memcmp(&a[i], &b[i], 4) != 0) {
      std::ostringstream os;
      os << what << " layer " << layer << " position " << i / width << " index " << i % width << " differs";
      return os.str();
    }
  }
  return "";
}

std::string EngineBuffers::compare(const EngineBuffers& o, int64_t n) const {
  for (int64_t p = 0; p < n; ++p)
    if (tokens[p] != o.tokens[p]) return "token at position " + std::to_string(p) + " differs";
  for (int l = 0; l < model.n_layers; ++l) {
    std::string d = compare_floats("Lc", l, lc[l], o.lc[l], n * model.kv_lora, model.kv_lora);
    if (d.empty()) d = compare_floats("Rc", l, rc[l], o.rc[l], n * model.qk_rope, model.qk_rope);
    if (d.empty() && indexed(l)) d = compare_floats("Ic", l, ic[l], o.ic[l], n * model.index_hd, model.index_hd);
    if (!d.empty()) return d;
  }
  return "";
}

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

colikv::Options chunked_options(const colikv::ModelSignature& m, int64_t chunk_tokens) {
  colikv::Options o;
  o.chunk_target_bytes = chunk_tokens * m.record_bytes();
  o.synchronous = colikv::Synchronous::kNormal;
  return o;
}

colikv::Options tenant_options(const colikv::ModelSignature& m, const std::string& tenant) {
  colikv::Options o = chunked_options(m, 4);
  o.tenant = tenant;
  return o;
}

void append(colikv::Store& s, const std::string& id, const EngineBuffers& b, int64_t n) {
  s.append(id, b.model, b.tokens.data(), n, b.source());
}

std::vector<int32_t> token_run(int32_t from, int n) {
  std::vector<int32_t> v;
  for (int i = 0; i < n; ++i) v.push_back(from + i);
  return v;
}

std::vector<int32_t> make_tokens(int64_t n, int32_t vocab, uint32_t seed) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) t[i] = static_cast<int32_t>(mix(seed * 2654435761U + static_cast<uint32_t>(i)) % static_cast<uint32_t>(vocab));
  return t;
}

void write_coli_kv(const std::string& path, const EngineBuffers& b, int64_t n, int64_t nrec) {
  const auto& m = b.model;
  std::string out("COLIKV1\0", 8);
  int32_t h[8] = {m.n_layers, m.kv_lora, m.qk_rope, m.index_hd, m.n_indexed, m.vocab,
                  static_cast<int32_t>(nrec < 0 ? n : nrec), 0};
  out.append(reinterpret_cast<const char*>(h), sizeof h);
  for (int64_t p = 0; p < n; ++p) {
    out.append(reinterpret_cast<const char*>(&b.tokens[p]), 4);
    for (int l = 0; l < m.n_layers; ++l) {
      out.append(reinterpret_cast<const char*>(&b.lc[l][p * m.kv_lora]), static_cast<size_t>(m.kv_lora) * 4);
      out.append(reinterpret_cast<const char*>(&b.rc[l][p * m.qk_rope]), static_cast<size_t>(m.qk_rope) * 4);
    }
    for (int l = 0; l < m.n_layers; ++l)
      if (b.indexed(l))
        out.append(reinterpret_cast<const char*>(&b.ic[l][p * m.index_hd]), static_cast<size_t>(m.index_hd) * 4);
  }
  write_file(path, out);
}

int64_t file_size(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
}

int64_t found_in_store_files(const std::string& path, const std::vector<std::string>& windows) {
  int64_t n = 0;
  for (const char* suffix : {"", "-wal", "-shm"}) {
    const std::string bytes = file_size(path + suffix) > 0 ? read_file(path + suffix) : "";
    for (const std::string& w : windows)
      for (size_t at = bytes.find(w); at != std::string::npos; at = bytes.find(w, at + 1)) ++n;
  }
  return n;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

std::string untouched_from(const EngineBuffers& b, int64_t from) {
  const uint32_t poison = 0x7fc0dead;
  const auto& m = b.model;
  for (int64_t p = from; p < b.capacity; ++p)
    if (b.tokens[static_cast<size_t>(p)] != -7) return "token at position " + std::to_string(p) + " was written";
  for (int l = 0; l < m.n_layers; ++l) {
    for (int64_t i = from * m.kv_lora; i < b.capacity * m.kv_lora; ++i)
      if (bits_of(b.lc[l][static_cast<size_t>(i)]) != poison) return "Lc layer " + std::to_string(l) + " written past the end";
    for (int64_t i = from * m.qk_rope; i < b.capacity * m.qk_rope; ++i)
      if (bits_of(b.rc[l][static_cast<size_t>(i)]) != poison) return "Rc layer " + std::to_string(l) + " written past the end";
    if (b.indexed(l))
      for (int64_t i = from * m.index_hd; i < b.capacity * m.index_hd; ++i)
        if (bits_of(b.ic[l][static_cast<size_t>(i)]) != poison) return "Ic layer " + std::to_string(l) + " written past the end";
  }
  return "";
}

std::string loads_as(colikv::Store& s, const std::string& id, const EngineBuffers& expect, int64_t n, int64_t limit) {
  EngineBuffers out(expect.model, n + 3);
  out.poison();
  const int64_t got = s.load(id, expect.model, out.tokens.data(), out.capacity, out.target(), limit);
  if (got != n) return "load returned " + std::to_string(got) + " tokens, expected " + std::to_string(n);
  const std::string d = expect.compare(out, n);
  return d.empty() ? untouched_from(out, n) : d;
}

void undo_tenants(const std::string& path, int version) {
  SQLite::Database db(path, SQLite::OPEN_READWRITE);
  const auto& old = colikv::detail::expected_schema(version);
  auto make = [&](const std::string& name) {
    for (const auto& o : old)
      if (o.name == name) db.exec(o.sql);
  };
  // legacy_alter_table: the rename leaves conversation_chunks' reference alone.
  db.exec("BEGIN; DROP VIEW conversation_summary; DROP VIEW conversation_tokens; DROP VIEW model_summary; "
          "PRAGMA legacy_alter_table=ON; ALTER TABLE conversations RENAME TO conversations_v7");
  make("conversations");
  db.exec("INSERT INTO conversations SELECT conversation_id, name, model_id, token_count, precision, title, metadata, "
          "parent_id, forked_at, generation, created_ms, updated_ms, last_used_ms FROM conversations_v7; "
          "DROP TABLE conversations_v7; DROP TABLE tenants; DROP TABLE IF EXISTS held_chunks; "
          "DROP TABLE IF EXISTS writers; DROP VIEW IF EXISTS tenant_summary");
  for (const char* name : {"conversations_by_last_used", "conversation_summary", "conversation_tokens", "model_summary"})
    make(name);
  db.exec("COMMIT");
}

EngineBuffers history(const colikv::ModelSignature& m, int64_t n, uint32_t seed) {
  EngineBuffers b(m, n);
  b.fill(0, n, seed);
  b.tokens = make_tokens(n, m.vocab, seed);
  return b;
}

EngineBuffers counted_history(const colikv::ModelSignature& m, int64_t n, uint32_t seed, int32_t first_token) {
  EngineBuffers b(m, n);
  b.fill(0, n, seed);
  b.tokens = token_run(first_token, static_cast<int>(n));
  return b;
}

EngineBuffers branched_history(const colikv::ModelSignature& m, int64_t n, int64_t shared, uint32_t trunk_seed,
                               uint32_t seed) {
  EngineBuffers b = history(m, n, seed);
  b.fill(0, shared, trunk_seed);
  const std::vector<int32_t> trunk = make_tokens(shared, m.vocab, trunk_seed);
  std::copy(trunk.begin(), trunk.end(), b.tokens.begin());
  return b;
}

StoreFixture::StoreFixture(const colikv::ModelSignature& m, int64_t chunk_tokens, const std::string& name)
    : model(m), options(chunked_options(m, chunk_tokens)), path(store_at(dir, name)) {}

StoreFixture::~StoreFixture() = default;

colikv::Store& StoreFixture::store() {
  if (!store_) store_ = std::make_unique<colikv::Store>(path, options);
  return *store_;
}

colikv::Store& StoreFixture::reopen() {
  close();
  return store();
}

void StoreFixture::close() { store_.reset(); }

EngineBuffers StoreFixture::history(int64_t n, uint32_t seed) const { return colikv_test::history(model, n, seed); }

void StoreFixture::write(const std::string& id, const EngineBuffers& h, int64_t n) {
  store().append(id, h.model, h.tokens.data(), n, h.source());
}

std::string StoreFixture::read(const std::string& id, const EngineBuffers& expect, int64_t n) {
  return loads_as(store(), id, expect, n);
}

}  // namespace colikv_test
