// Text the library stores and returns (conversation ids, titles, metadata,
// weights ids, messages of verify): bytes, UTF-8 by convention but never
// checked, so a store may hold names that are not UTF-8 (written by the C++
// or C API, or the CLI). They cross into Python by the rule paths follow
// (os.fsdecode / os.fsencode): UTF-8 with surrogateescape, each byte that is
// not UTF-8 a lone surrogate U+DC80..U+DCFF, and such a str (or bytes) is
// accepted back as those bytes, so every stored id round-trips. UTF-8 is
// named rather than the locale's encoding: an id that is UTF-8 is the same
// str under any locale.
#ifndef COLIKV_PYTHON_TEXT_H
#define COLIKV_PYTHON_TEXT_H

#include <pybind11/pybind11.h>

#include <string>
#include <utility>
#include <vector>

namespace colikv_py {

// A library string as a function argument or result (its caster below).
struct Text {
  std::string bytes;
  Text() = default;
  Text(std::string b) : bytes(std::move(b)) {}  // NOLINT: implicit, results are library strings
  operator const std::string&() const { return bytes; }  // NOLINT: arguments pass straight to the library
};

// The str of library bytes (UTF-8, surrogateescape).
inline pybind11::object text_str(const std::string& s) {
  PyObject* o = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "surrogateescape");
  if (!o) throw pybind11::error_already_set();
  return pybind11::reinterpret_steal<pybind11::object>(o);
}

inline std::vector<Text> texts(const std::vector<std::string>& v) { return std::vector<Text>(v.begin(), v.end()); }

}  // namespace colikv_py

namespace pybind11 {
namespace detail {

template <>
struct type_caster<colikv_py::Text> {
  PYBIND11_TYPE_CASTER(colikv_py::Text, const_name("str"));

  // str (surrogateescape) or bytes; anything else is not this argument. A
  // str that cannot be such bytes (a surrogate outside U+DC80..U+DCFF)
  // raises the codec's UnicodeEncodeError, as os.fsencode does.
  bool load(handle src, bool) {
    if (PyBytes_Check(src.ptr())) {
      value.bytes.assign(PyBytes_AS_STRING(src.ptr()), static_cast<size_t>(PyBytes_GET_SIZE(src.ptr())));
      return true;
    }
    if (!PyUnicode_Check(src.ptr())) return false;
    PyObject* b = PyUnicode_AsEncodedString(src.ptr(), "utf-8", "surrogateescape");
    if (!b) throw error_already_set();
    value.bytes.assign(PyBytes_AS_STRING(b), static_cast<size_t>(PyBytes_GET_SIZE(b)));
    Py_DECREF(b);
    return true;
  }

  static handle cast(const colikv_py::Text& t, return_value_policy, handle) {
    return colikv_py::text_str(t.bytes).release();
  }
};

}  // namespace detail
}  // namespace pybind11

#endif  // COLIKV_PYTHON_TEXT_H
