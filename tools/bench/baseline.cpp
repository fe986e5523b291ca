// The side-by-side baseline: the engine's own persistence (kv_persist.h)
// re-implemented faithfully, and the engine buffers both sides read and fill.
#include <unistd.h>

#include <cmath>
#include <cstring>

#include "bench.h"

namespace colikv_bench {

// Fills positions from a .coli_kv file's records (the genuine sample).
bool Engine::from_file(const std::string& path, int64_t& n) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  char mg[8];
  int32_t h[8];
  bool ok = std::fread(mg, 1, 8, f) == 8 && std::fread(h, 4, 8, f) == 8;
  n = ok ? std::min<int64_t>(h[6], cap) : 0;
  for (int64_t p = 0; ok && p < n; ++p) {
    ok = std::fread(&tokens[p], 4, 1, f) == 1;
    for (int l = 0; ok && l < m.n_layers; ++l)
      ok = std::fread(&lc[l][p * m.kv_lora], 4, m.kv_lora, f) == static_cast<size_t>(m.kv_lora) &&
           std::fread(&rc[l][p * m.qk_rope], 4, m.qk_rope, f) == static_cast<size_t>(m.qk_rope);
  }
  std::fclose(f);
  return ok;
}

// Largest |a-b|/|a| over positions [0, n) (a = this, the original).
double Engine::max_rel_error(const Engine& o, int64_t n) const {
  double worst = 0;
  auto cmp = [&](const std::vector<float>& a, const std::vector<float>& b, int64_t count) {
    for (int64_t i = 0; i < count; ++i) {
      const double x = a[static_cast<size_t>(i)], y = b[static_cast<size_t>(i)];
      if (x != 0) worst = std::max(worst, std::fabs(x - y) / std::fabs(x));
      else if (y != 0) worst = std::max(worst, 1.0);
    }
  };
  for (int l = 0; l < m.n_layers; ++l) {
    cmp(lc[l], o.lc[l], n * m.kv_lora);
    cmp(rc[l], o.rc[l], n * m.qk_rope);
  }
  return worst;
}

// ---------------------------------------------------------------- the baseline (kv_persist.h)

Baseline::Baseline(std::string p, const colikv::ModelSignature& model, bool s)
    : path(std::move(p)), m(model), sync(s) {}
Baseline::~Baseline() {
  if (fp) std::fclose(fp);
}

void Baseline::hdr(int32_t* h, int n) const {
  h[0] = m.n_layers; h[1] = m.kv_lora; h[2] = m.qk_rope; h[3] = m.index_hd; h[4] = m.n_indexed;
  h[5] = m.vocab; h[6] = n; h[7] = 0;
}

bool Baseline::open() {
  if (fp) return true;
  fp = std::fopen(path.c_str(), "r+b");
  if (!fp) {
    fp = std::fopen(path.c_str(), "wb");
    if (!fp) return false;
    int32_t h[8];
    hdr(h, 0);
    std::fwrite("COLIKV1\0", 1, 8, fp);
    std::fwrite(h, 4, 8, fp);
    std::fflush(fp);
    std::fclose(fp);
    fp = std::fopen(path.c_str(), "r+b");
    if (!fp) return false;
  }
  return true;
}

void Baseline::write_records(const Engine& e, int64_t from, int64_t to, int64_t at) {
  buf.resize(static_cast<size_t>(rec()));
  std::fseek(fp, 40 + at * rec(), SEEK_SET);
  for (int64_t p = from; p < to; ++p) {
    uint8_t* b = buf.data();
    std::memcpy(b, &e.tokens[p], 4);
    b += 4;
    for (int i = 0; i < m.n_layers; ++i) {
      std::memcpy(b, e.lcp[i] + p * m.kv_lora, static_cast<size_t>(m.kv_lora) * 4);
      b += m.kv_lora * 4;
      std::memcpy(b, e.rcp[i] + p * m.qk_rope, static_cast<size_t>(m.qk_rope) * 4);
      b += m.qk_rope * 4;
    }
    std::fwrite(buf.data(), 1, buf.size(), fp);
  }
}

void Baseline::write_count(int64_t n) {
  int32_t nr = static_cast<int32_t>(n);
  std::fseek(fp, 8 + 6 * 4, SEEK_SET);
  std::fwrite(&nr, 4, 1, fp);
}

void Baseline::append(const Engine& e, int64_t len) {
  if (len <= nrec || !open()) return;
  write_records(e, nrec, len, nrec);
  std::fflush(fp);
  if (sync) ::fdatasync(fileno(fp));
  write_count(len);
  std::fflush(fp);
  if (sync) ::fdatasync(fileno(fp));
  nrec = len;
}

int64_t Baseline::load(Engine& e) const {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return 0;
  char mg[8];
  int32_t h[8], w[8];
  hdr(w, 0);
  if (std::fread(mg, 1, 8, f) != 8 || std::memcmp(mg, "COLIKV1\0", 8) || std::fread(h, 4, 8, f) != 8 ||
      std::memcmp(h, w, 6 * 4) != 0) {
    std::fclose(f);
    return 0;
  }
  int64_t n = std::min<int64_t>(h[6], e.cap);
  for (int64_t p = 0; p < n; ++p) {
    int32_t tk;
    if (std::fread(&tk, 4, 1, f) != 1) { n = p; break; }
    e.tokens[p] = tk;
    for (int i = 0; i < m.n_layers; ++i)
      if (std::fread(e.lw[i] + p * m.kv_lora, 4, m.kv_lora, f) != static_cast<size_t>(m.kv_lora) ||
          std::fread(e.rw[i] + p * m.qk_rope, 4, m.qk_rope, f) != static_cast<size_t>(m.qk_rope)) {
        n = p;
        break;
      }
  }
  std::fclose(f);
  return n;
}

int64_t copy_file(const std::string& src, const std::string& dst) {
  FILE* in = std::fopen(src.c_str(), "rb");
  FILE* out = std::fopen(dst.c_str(), "wb");
  if (!in || !out) {
    if (in) std::fclose(in);
    if (out) std::fclose(out);
    return -1;
  }
  std::vector<char> b(1 << 20);
  int64_t total = 0;
  size_t got;
  while ((got = std::fread(b.data(), 1, b.size(), in)) > 0) {
    std::fwrite(b.data(), 1, got, out);
    total += static_cast<int64_t>(got);
  }
  std::fflush(out);
  ::fsync(fileno(out));
  std::fclose(in);
  std::fclose(out);
  return total;
}

}  // namespace colikv_bench
