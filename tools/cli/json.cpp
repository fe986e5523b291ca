#include "json.h"

#include <algorithm>
#include <cmath>

#include "cli_output.h"

namespace colikv_cli {
namespace {

void indent(std::string& out, int level) { out.append(static_cast<size_t>(level) * 2, ' '); }

void append_unicode_escape(std::string& out, unsigned char c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\u%04x", c);
  out += buf;
}

// The escape of a character JSON names, or nullptr.
const char* short_escape(unsigned char c) {
  switch (c) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\b': return "\\b";
    case '\f': return "\\f";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    default: return nullptr;
  }
}

// A JSON string literal; bytes that are not valid UTF-8 become U+FFFD, and
// every control character is escaped.
void escape(std::string& out, const std::string& s) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (const char* e = short_escape(c)) {
      out += e;
      ++i;
      continue;
    }
    if (c < 0x20 || c == 0x7f) {
      append_unicode_escape(out, c);
      ++i;
      continue;
    }
    size_t n = utf8_sequence(s, i);
    if (n == 0) {
      out += "\\ufffd";
      ++i;
    } else if (n == 2 && c == 0xc2 && static_cast<unsigned char>(s[i + 1]) < 0xa0) {
      // A C1 control (U+0080..U+009F): escaped too, as a terminal may act on it.
      append_unicode_escape(out, static_cast<unsigned char>(s[i + 1]));
      i += n;
    } else {
      out.append(s, i, n);
      i += n;
    }
  }
  out += '"';
}

}  // namespace

std::string Json::dump() const {
  std::string out;
  write(out, 0, nullptr);
  out += '\n';
  return out;
}

void Json::print_to(std::FILE* f) const {
  std::string out;
  const Flush flush = [f](std::string& text) {
    std::fwrite(text.data(), 1, text.size(), f);
    text.clear();
  };
  write(out, 0, &flush);
  out += '\n';
  flush(out);
}

void Json::write(std::string& out, int level, const Flush* flush) const {
  switch (type_) {
    case Type::kNull: out += "null"; break;
    case Type::kBool: out += b_ ? "true" : "false"; break;
    case Type::kInt: out += std::to_string(i_); break;
    case Type::kDouble: {
      if (!std::isfinite(d_)) { out += "null"; break; }
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.*f", decimals_, d_);
      out += buf;
      break;
    }
    case Type::kString: escape(out, s_); break;
    case Type::kArray: write_array(out, level, flush); break;
    case Type::kIntStream: write_int_stream(out, flush); break;
    case Type::kObject: write_object(out, level, flush); break;
  }
}

// Scalars on one line, anything else one element per line.
void Json::write_array(std::string& out, int level, const Flush* flush) const {
  if (elements_.empty()) {
    out += "[]";
    return;
  }
  bool inline_form = std::all_of(elements_.begin(), elements_.end(), [](const Json& e) { return e.scalar(); });
  out += '[';
  for (size_t i = 0; i < elements_.size(); ++i) {
    if (inline_form) {
      if (i) out += ", ";
    } else {
      out += i ? ",\n" : "\n";
      indent(out, level + 1);
    }
    elements_[i].write(out, level + 1, flush);
  }
  if (!inline_form) {
    out += '\n';
    indent(out, level);
  }
  out += ']';
}

void Json::write_int_stream(std::string& out, const Flush* flush) const {
  out += '[';
  int64_t v;
  for (bool first = true; next_(v); first = false) {
    if (!first) out += ", ";
    out += std::to_string(v);
    if (flush && out.size() >= (size_t{1} << 16)) (*flush)(out);
  }
  out += ']';
}

void Json::write_object(std::string& out, int level, const Flush* flush) const {
  if (members_.empty()) {
    out += "{}";
    return;
  }
  out += '{';
  for (size_t i = 0; i < members_.size(); ++i) {
    out += i ? ",\n" : "\n";
    indent(out, level + 1);
    escape(out, members_[i].first);
    out += ": ";
    members_[i].second.write(out, level + 1, flush);
  }
  out += '\n';
  indent(out, level);
  out += '}';
}

}  // namespace colikv_cli
