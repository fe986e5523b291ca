// Arrays in and out of the module: the caller's buffers, checked and held
// while the library reads them, and the numpy arrays a load fills.
#ifndef COLIKV_PYTHON_BUFFERS_H
#define COLIKV_PYTHON_BUFFERS_H

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <vector>

#include "colikv/model.h"
#include "colikv/store.h"

namespace colikv_py {

namespace py = pybind11;

// A buffer-protocol view of a caller's object, released on destruction, or
// token ids the module converted from a list or tuple.
class InBuffer {
 public:
  InBuffer() = default;
  InBuffer(const InBuffer&) = delete;
  InBuffer& operator=(const InBuffer&) = delete;
  InBuffer(InBuffer&& o) noexcept;
  InBuffer& operator=(InBuffer&& o) noexcept;
  ~InBuffer();

  const float* floats() const { return static_cast<const float*>(data_); }
  const int32_t* ints() const { return static_cast<const int32_t*>(data_); }
  std::vector<int64_t> shape;

 private:
  friend InBuffer token_buffer(py::handle obj, const char* name);
  friend InBuffer float_planes(py::handle obj, const char* name, int64_t planes, int64_t n, int64_t width);
  Py_buffer view_{};
  bool held_ = false;
  std::vector<int32_t> owned_;
  const void* data_ = nullptr;
};

// Token ids: a C-contiguous int32 buffer of shape (n,), or a list or tuple of
// ints. Raises TypeError (dtype, not a buffer) or colikv.InvalidArgument
// (shape, layout) naming `name`, its dtype and its shape.
InBuffer token_buffer(py::handle obj, const char* name);

// A C-contiguous float32 buffer of shape (planes, cap, width) with cap >= n.
// Raises as token_buffer does.
InBuffer float_planes(py::handle obj, const char* name, int64_t planes, int64_t n, int64_t width);

// What load and read_coli_kv return: the arrays the library filled.
struct KV {
  std::string id;
  colikv::ModelSignature model;
  py::object tokens, lc, rc, ic;
  int64_t n = 0;
};

// The arrays of n positions of a model, allocated uninitialised (every
// element is written by the filler) and addressed as the library addresses
// an engine's buffers: layer l of lc at lc + l*n*kv_lora, and so on; the
// indexer planes go to the first n_indexed layers (the record holds them in
// layer order, so which layers carry them does not matter).
struct LoadArrays {
  py::array_t<int32_t> tokens;
  py::array_t<float> lc, rc, ic;
  std::vector<float*> lc_ptrs, rc_ptrs, ic_ptrs;
  colikv::KvTarget target() const {
    return {lc_ptrs.data(), rc_ptrs.data(), ic_ptrs.empty() ? nullptr : ic_ptrs.data()};
  }
};
LoadArrays make_load_arrays(const colikv::ModelSignature& m, int64_t n);

// A KV of the first got of the n positions arrays were made for (views, no copy).
KV make_kv(const std::string& id, const colikv::ModelSignature& m, const LoadArrays& a, int64_t n, int64_t got);
// A KV of positions [from, to) of the n arrays were made for (views, no copy):
// what load_range and adopt filled, nothing before `from`.
KV make_kv_range(const std::string& id, const colikv::ModelSignature& m, const LoadArrays& a, int64_t n, int64_t from,
                 int64_t to);

}  // namespace colikv_py

#endif  // COLIKV_PYTHON_BUFFERS_H
