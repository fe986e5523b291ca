#include "buffers.h"

#include <cstring>
#include <utility>

#include "colikv/error.h"

namespace colikv_py {

InBuffer::InBuffer(InBuffer&& o) noexcept { *this = std::move(o); }

InBuffer& InBuffer::operator=(InBuffer&& o) noexcept {
  if (this != &o) {
    if (held_) PyBuffer_Release(&view_);
    shape = std::move(o.shape);
    view_ = o.view_;
    held_ = o.held_;
    owned_ = std::move(o.owned_);
    data_ = held_ ? o.data_ : owned_.data();
    o.held_ = false;
    o.data_ = nullptr;
  }
  return *this;
}

InBuffer::~InBuffer() {
  if (held_) PyBuffer_Release(&view_);
}

namespace {

// The format's type character without a native or little-endian prefix; ""
// for a big-endian or composite format.
std::string base_format(const char* f) {
  std::string s = f ? f : "B";
  if (!s.empty() && (s[0] == '@' || s[0] == '=' || s[0] == '<')) s.erase(0, 1);
  return s;
}

std::string dtype_name(py::handle obj, const Py_buffer& v) {
  if (py::hasattr(obj, "dtype")) return py::str(obj.attr("dtype")).cast<std::string>();
  const std::string f = base_format(v.format);
  if (f == "f") return "float32";
  if (f == "d") return "float64";
  if (f == "e") return "float16";
  if (f == "i") return "int32";
  if (f == "l" || f == "q") return "int64";
  if (f == "h") return "int16";
  if (f == "b") return "int8";
  if (f == "B") return "uint8";
  return "format '" + std::string(v.format ? v.format : "B") + "'";
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "(";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + (s.size() == 1 ? ",)" : ")");
}

std::string type_name(py::handle obj) { return py::str(py::type::handle_of(obj).attr("__name__")).cast<std::string>(); }

// The view of obj with its format and strides, or TypeError.
void get_view(py::handle obj, const char* name, const char* wanted, Py_buffer* view) {
  if (PyObject_GetBuffer(obj.ptr(), view, PyBUF_RECORDS_RO) != 0) {
    PyErr_Clear();
    throw py::type_error(std::string(name) + " must be " + wanted + ", not a " + type_name(obj) +
                         " (no buffer protocol)");
  }
}

[[noreturn]] void bad(const std::string& what) { throw colikv::Error(colikv::ErrorCode::kInvalidArgument, what); }

}  // namespace

InBuffer token_buffer(py::handle obj, const char* name) {
  InBuffer b;
  if (py::isinstance<py::list>(obj) || py::isinstance<py::tuple>(obj)) {
    // A short prompt written by hand: converted, each item must be an int in int32.
    py::sequence seq = py::reinterpret_borrow<py::sequence>(obj);
    b.owned_.reserve(seq.size());
    for (size_t i = 0; i < seq.size(); ++i) {
      py::handle item = seq[i];
      if (!PyLong_Check(item.ptr()) || PyBool_Check(item.ptr()))
        throw py::type_error(std::string(name) + "[" + std::to_string(i) + "] must be an int, not a " + type_name(item));
      int overflow = 0;
      const long long v = PyLong_AsLongLongAndOverflow(item.ptr(), &overflow);
      if (overflow || v < INT32_MIN || v > INT32_MAX)
        bad(std::string(name) + "[" + std::to_string(i) + "] = " + py::str(item).cast<std::string>() +
            " does not fit int32");
      b.owned_.push_back(static_cast<int32_t>(v));
    }
    b.shape = {static_cast<int64_t>(b.owned_.size())};
    b.data_ = b.owned_.data();
    return b;
  }
  const char* wanted = "a C-contiguous int32 array of shape (n,)";
  get_view(obj, name, wanted, &b.view_);
  b.held_ = true;
  for (int i = 0; i < b.view_.ndim; ++i) b.shape.push_back(b.view_.shape ? b.view_.shape[i] : b.view_.len / b.view_.itemsize);
  if (b.view_.ndim == 0) b.shape.clear();
  const std::string got = dtype_name(obj, b.view_) + " of shape " + shape_text(b.shape);
  if (base_format(b.view_.format) != "i" || b.view_.itemsize != 4)
    throw py::type_error(std::string(name) + " must be " + wanted + "; got " + got);
  if (b.view_.ndim != 1) bad(std::string(name) + " must be " + wanted + "; got " + got);
  if (!PyBuffer_IsContiguous(&b.view_, 'C')) bad(std::string(name) + " must be " + wanted + "; got a non-contiguous " + got);
  b.data_ = b.view_.buf;
  return b;
}

InBuffer float_planes(py::handle obj, const char* name, int64_t planes, int64_t n, int64_t width) {
  InBuffer b;
  const std::string wanted = "a C-contiguous float32 array of shape (" + std::to_string(planes) + ", n, " +
                             std::to_string(width) + ") with n >= " + std::to_string(n) + " (the tokens' length)";
  get_view(obj, name, wanted.c_str(), &b.view_);
  b.held_ = true;
  for (int i = 0; i < b.view_.ndim; ++i) b.shape.push_back(b.view_.shape ? b.view_.shape[i] : b.view_.len / b.view_.itemsize);
  const std::string got = dtype_name(obj, b.view_) + " of shape " + shape_text(b.shape);
  if (base_format(b.view_.format) != "f" || b.view_.itemsize != 4)
    throw py::type_error(std::string(name) + " must be " + wanted + "; got " + got);
  if (b.view_.ndim != 3 || b.shape[0] != planes || b.shape[1] < n || b.shape[2] != width)
    bad(std::string(name) + " must be " + wanted + "; got " + got);
  if (!PyBuffer_IsContiguous(&b.view_, 'C')) bad(std::string(name) + " must be " + wanted + "; got a non-contiguous " + got);
  b.data_ = b.view_.buf;
  return b;
}

LoadArrays make_load_arrays(const colikv::ModelSignature& m, int64_t n) {
  LoadArrays a;
  const auto pn = static_cast<py::ssize_t>(n);
  a.tokens = py::array_t<int32_t>(std::vector<py::ssize_t>{pn});
  a.lc = py::array_t<float>(std::vector<py::ssize_t>{m.n_layers, pn, m.kv_lora});
  a.rc = py::array_t<float>(std::vector<py::ssize_t>{m.n_layers, pn, m.qk_rope});
  a.ic = py::array_t<float>(std::vector<py::ssize_t>{m.n_indexed, pn, m.index_hd});
  float* lc = a.lc.mutable_data();
  float* rc = a.rc.mutable_data();
  float* ic = a.ic.mutable_data();
  for (int l = 0; l < m.n_layers; ++l) {
    a.lc_ptrs.push_back(lc + static_cast<int64_t>(l) * n * m.kv_lora);
    a.rc_ptrs.push_back(rc + static_cast<int64_t>(l) * n * m.qk_rope);
  }
  if (m.n_indexed > 0) {
    a.ic_ptrs.assign(static_cast<size_t>(m.n_layers), nullptr);
    for (int l = 0; l < m.n_indexed; ++l)
      a.ic_ptrs[static_cast<size_t>(l)] = ic + static_cast<int64_t>(l) * n * m.index_hd;
  }
  return a;
}

namespace {

// Positions [from, to) of an array made for n along axis: a view, no copy.
py::object positions(const py::array& a, int axis, int64_t from, int64_t to, int64_t n) {
  if (from == 0 && to == n) return a;
  py::tuple idx(a.ndim());
  for (py::ssize_t i = 0; i < a.ndim(); ++i)
    idx[static_cast<size_t>(i)] = i == axis ? py::slice(static_cast<py::ssize_t>(from), static_cast<py::ssize_t>(to), 1)
                                            : py::slice(py::none(), py::none(), py::none());
  return a[idx];
}

}  // namespace

KV make_kv(const std::string& id, const colikv::ModelSignature& m, const LoadArrays& a, int64_t n, int64_t got) {
  return make_kv_range(id, m, a, n, 0, got);
}

KV make_kv_range(const std::string& id, const colikv::ModelSignature& m, const LoadArrays& a, int64_t n, int64_t from,
                 int64_t to) {
  KV kv;
  kv.id = id;
  kv.model = m;
  kv.n = to - from;
  kv.tokens = positions(a.tokens, 0, from, to, n);
  kv.lc = positions(a.lc, 1, from, to, n);
  kv.rc = positions(a.rc, 1, from, to, n);
  kv.ic = positions(a.ic, 1, from, to, n);
  return kv;
}

}  // namespace colikv_py
