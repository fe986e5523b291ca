// The Store object of the module: a colikv::Store that Python may close
// while other threads still use it, and what the files binding its calls share.
#ifndef COLIKV_PYTHON_STORE_H
#define COLIKV_PYTHON_STORE_H

#include <pybind11/pybind11.h>

#include <memory>
#include <mutex>
#include <optional>
#include <vector>
#include <string>

#include "colikv/error.h"
#include "colikv/options.h"
#include "colikv/store.h"

namespace colikv_py {

namespace py = pybind11;

// A Store that may be closed while other threads still run calls on it: each
// call holds its own reference, so close() never frees it under them.
class PyStore {
 public:
  PyStore(const std::string& location, const colikv::Options& options) {
    py::gil_scoped_release nogil;
    store_ = std::make_shared<colikv::Store>(location, options);
    location_ = location;
  }

  // The open store, or InvalidArgument (a ValueError, as for a closed file).
  std::shared_ptr<colikv::Store> get() const {
    std::lock_guard<std::mutex> lock(mu_);
    if (!store_)
      throw colikv::Error(colikv::ErrorCode::kInvalidArgument,
                          colikv::shown_store_location(location_) + ": the store is closed");
    return store_;
  }

  // The open store, this PyStore closed (for publish, which closes it).
  std::shared_ptr<colikv::Store> take() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!store_)
      throw colikv::Error(colikv::ErrorCode::kInvalidArgument,
                          colikv::shown_store_location(location_) + ": the store is closed");
    std::shared_ptr<colikv::Store> s;
    s.swap(store_);
    return s;
  }

  bool closed() const {
    std::lock_guard<std::mutex> lock(mu_);
    return !store_;
  }

  const std::string& location() const { return location_; }

  // Commits what append_async queued and reports its first error, then closes
  // (also when that error is raised). Closing twice does nothing.
  void close() {
    std::shared_ptr<colikv::Store> s;
    {
      std::lock_guard<std::mutex> lock(mu_);
      s.swap(store_);
    }
    if (!s) return;
    py::gil_scoped_release nogil;
    struct Release {  // the destructor (which may wait for the writer thread) without the GIL too
      std::shared_ptr<colikv::Store>& s;
      ~Release() { s.reset(); }
    } release{s};
    s->wait();
  }

 private:
  mutable std::mutex mu_;
  std::shared_ptr<colikv::Store> store_;
  std::string location_;
};

// A file path argument: str (encoded as os.fsencode does, so a name that is
// not UTF-8 round-trips), bytes or os.PathLike; TypeError otherwise.
inline std::string fs_path(py::handle obj) {
  PyObject* out = nullptr;
  if (!PyUnicode_FSConverter(obj.ptr(), &out)) throw py::error_already_set();
  py::bytes b = py::reinterpret_steal<py::bytes>(out);
  return std::string(b);
}

// A path back to Python as os.fsdecode gives it.
inline py::object fs_str(const std::string& path) {
  return py::reinterpret_steal<py::object>(
      PyUnicode_DecodeFSDefaultAndSize(path.data(), static_cast<Py_ssize_t>(path.size())));
}

// A call on the open store with the GIL released.
template <class F>
auto locked_call(PyStore& ps, F&& f) {
  auto s = ps.get();
  py::gil_scoped_release nogil;
  return f(*s);
}

// The Store's calls bound in store_admin.cpp (tenants, staged creation,
// copies, limits) and store_ranges.cpp (load_range, adopt).
// Every conversation from offset on (limit of them when given), read in pages.
std::vector<colikv::ConversationInfo> list_all(colikv::Store& s, std::optional<int64_t> limit, int64_t offset);

void def_store_admin(py::module_& mod, py::class_<PyStore>& cls);
void def_store_ranges(py::class_<PyStore>& cls);
// store_metrics.cpp: Store.metrics, gauges, metrics_text; colikv.process_metrics.
void def_store_metrics(py::module_& mod, py::class_<PyStore>& cls);

}  // namespace colikv_py

#endif  // COLIKV_PYTHON_STORE_H
