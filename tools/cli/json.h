// The JSON writer behind every `--json` output: a small value tree printed
// with a two-space indent, keys in insertion order.
#ifndef COLIKV_TOOLS_CLI_JSON_H
#define COLIKV_TOOLS_CLI_JSON_H

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace colikv_cli {

class Json {
 public:
  enum class Type { kNull, kBool, kInt, kDouble, kString, kArray, kObject, kIntStream };
  // Called with the text written so far when it has grown: print_to writes it out.
  using Flush = std::function<void(std::string&)>;

  Json() = default;
  static Json null() { return Json(); }
  static Json boolean(bool b) { Json j; j.type_ = Type::kBool; j.b_ = b; return j; }
  static Json integer(int64_t i) { Json j; j.type_ = Type::kInt; j.i_ = i; return j; }
  // Finite doubles are written with `decimals` digits after the point; NaN
  // and infinities as null.
  static Json number(double d, int decimals = 3) {
    Json j; j.type_ = Type::kDouble; j.d_ = d; j.decimals_ = decimals; return j;
  }
  static Json string(const std::string& s) { Json j; j.type_ = Type::kString; j.s_ = s; return j; }
  static Json array() { Json j; j.type_ = Type::kArray; return j; }
  // An array of integers produced while it is written (next returns false at
  // the end): print_to never holds more than a buffer of it.
  static Json int_stream(std::function<bool(int64_t&)> next) {
    Json j; j.type_ = Type::kIntStream; j.next_ = std::move(next); return j;
  }
  static Json object() { Json j; j.type_ = Type::kObject; return j; }

  // Object: appends a key (keys keep their insertion order).
  Json& set(const std::string& key, Json value) {
    members_.emplace_back(key, std::move(value));
    return *this;
  }
  // Array: appends an element.
  Json& push(Json value) {
    elements_.push_back(std::move(value));
    return *this;
  }

  // The whole document, with a final newline.
  std::string dump() const;

  // Writes the document to f as it goes, in buffers of a bounded size.
  void print_to(std::FILE* f) const;

 private:
  bool scalar() const { return type_ != Type::kArray && type_ != Type::kObject && type_ != Type::kIntStream; }

  void write(std::string& out, int level, const Flush* flush) const;
  void write_array(std::string& out, int level, const Flush* flush) const;
  void write_int_stream(std::string& out, const Flush* flush) const;
  void write_object(std::string& out, int level, const Flush* flush) const;

  Type type_ = Type::kNull;
  bool b_ = false;
  int64_t i_ = 0;
  double d_ = 0;
  int decimals_ = 3;
  std::string s_;
  std::vector<Json> elements_;
  std::vector<std::pair<std::string, Json>> members_;
  std::function<bool(int64_t&)> next_;
};

}  // namespace colikv_cli

#endif  // COLIKV_TOOLS_CLI_JSON_H
