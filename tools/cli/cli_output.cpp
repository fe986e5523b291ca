#include "cli_output.h"

#include <cstdint>
#include <cstdio>
#include <ctime>

namespace colikv_cli {

size_t utf8_sequence(const std::string& s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = byte(i);
  size_t n;
  uint32_t cp;
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf) { n = 2; cp = c & 0x1fu; }
  else if (c >= 0xe0 && c <= 0xef) { n = 3; cp = c & 0x0fu; }
  else if (c >= 0xf0 && c <= 0xf4) { n = 4; cp = c & 0x07u; }
  else return 0;
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3fu);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff))
    return 0;
  return n;
}

namespace {

// U+0080..U+009F, the C1 controls: some terminals act on them (U+009B is CSI).
bool is_c1(const std::string& s, size_t i, size_t n) {
  return n == 2 && static_cast<unsigned char>(s[i]) == 0xc2 && static_cast<unsigned char>(s[i + 1]) < 0xa0;
}

void append_hex(std::string& out, const char* format, unsigned value) {
  char buf[8];
  std::snprintf(buf, sizeof buf, format, value);
  out += buf;
}

}  // namespace

std::string shown(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      append_hex(out, "\\x%02x", c);
      ++i;
      continue;
    }
    const size_t n = utf8_sequence(s, i);
    if (n == 0) {
      append_hex(out, "\\x%02x", c);
      ++i;
    } else if (is_c1(s, i, n)) {
      append_hex(out, "\\u%04x", static_cast<unsigned char>(s[i + 1]));
      i += n;
    } else {
      out.append(s, i, n);
      i += n;
    }
  }
  return out;
}

std::string human_bytes(int64_t bytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024 && bytes > -1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes);
  int u = 0;
  while ((v >= 1024 || v <= -1024) && u < 6) { v /= 1024; ++u; }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

std::string bytes_both(int64_t bytes) {
  if (bytes < 1024 && bytes > -1024) return std::to_string(bytes) + " B";
  return std::to_string(bytes) + " B (" + human_bytes(bytes) + ")";
}

std::string plural(int64_t n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::string duration_text(int64_t ms) {
  static const struct { int64_t ms; const char* unit; } units[] = {{86400000, "d"}, {3600000, "h"}, {60000, "m"}, {1000, "s"}};
  if (ms == 0) return "0s";
  for (const auto& u : units)
    if (ms > 0 && ms % u.ms == 0) return std::to_string(ms / u.ms) + u.unit;
  return std::to_string(ms) + "ms";
}

std::string ratio_text(int64_t raw, int64_t stored) {
  if (stored <= 0) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(raw) / static_cast<double>(stored));
  return buf;
}

std::string format_time(int64_t ms, bool iso) {
  if (ms <= 0) return iso ? "" : "-";
  std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  if (!gmtime_r(&secs, &tm)) return std::to_string(ms);
  char buf[64];
  if (iso) {
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                  tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms % 1000));
  } else {
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02d %02d:%02d:%02d", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                  tm.tm_hour, tm.tm_min, tm.tm_sec);
  }
  return buf;
}

void print(const std::string& text) { std::fwrite(text.data(), 1, text.size(), stdout); }

}  // namespace colikv_cli
