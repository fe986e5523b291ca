#include "errors.h"

#include <cstring>
#include <exception>
#include <map>
#include <string>

#include "colikv/error.h"

namespace colikv_py {

namespace py = pybind11;
using colikv::ErrorCode;

namespace {

struct ErrorClass {
  ErrorCode code;
  const char* name;
  PyObject* also;  // a built-in base besides colikv.Error, or null
  const char* doc;
};

// The classes, created once; they live as long as the interpreter (the
// module holds them too).
PyObject* base_class = nullptr;
std::map<int, PyObject*>& classes() {
  static auto* m = new std::map<int, PyObject*>();
  return *m;
}

PyObject* new_class(const std::string& name, const char* doc, PyObject* bases) {
  PyObject* cls = PyErr_NewExceptionWithDoc(("colikv." + name).c_str(), doc, bases, nullptr);
  if (!cls) throw py::error_already_set();
  return cls;
}

// Raises e as the class of its code, its message the library's, with .code
// (the C API's negative number), .code_name and .position (None unless the
// error has one: Diverged, Evicted).
void raise(const colikv::Error& e) {
  auto it = classes().find(static_cast<int>(e.code()));
  PyObject* cls = it != classes().end() ? it->second : base_class;
  // A message may quote a store's bytes that are not UTF-8: escaped, never a UnicodeDecodeError instead.
  const char* what = e.what();
  py::object message = py::reinterpret_steal<py::object>(
      PyUnicode_DecodeUTF8(what, static_cast<Py_ssize_t>(std::strlen(what)), "backslashreplace"));
  if (!message) return;
  py::object inst = py::reinterpret_steal<py::object>(PyObject_CallOneArg(cls, message.ptr()));
  if (!inst) return;  // the constructor's own error stays set
  inst.attr("code") = static_cast<int>(e.code());
  inst.attr("code_name") = colikv::error_code_name(e.code());
  inst.attr("position") = e.position() >= 0 ? py::object(py::int_(e.position())) : py::object(py::none());
  PyErr_SetObject(cls, inst.ptr());
}

}  // namespace

void register_errors(py::module_& m) {
  base_class = new_class("Error",
                         "Base class of every error the library raises. .code is the C API's negative code, "
                         ".code_name its stable name, .position the position of a Diverged or Evicted error "
                         "(else None); the message names what failed and where.",
                         PyExc_Exception);
  m.attr("Error") = py::handle(base_class);
  const ErrorClass table[] = {
      {ErrorCode::kNotFound, "NotFound", nullptr, "The conversation (or store file) does not exist."},
      {ErrorCode::kModelMismatch, "ModelMismatch", nullptr, "The model signature differs from the stored one."},
      {ErrorCode::kDiverged, "Diverged", nullptr,
       "The tokens differ from the committed ones; .position is the first differing position."},
      {ErrorCode::kConflict, "Conflict", nullptr, "Another writer changed the conversation meanwhile, or the id is taken."},
      {ErrorCode::kCorrupt, "Corrupt", nullptr, "Stored data fails a checksum, size or structure check."},
      {ErrorCode::kBusy, "Busy", nullptr, "The store stayed locked longer than busy_timeout_ms."},
      {ErrorCode::kDiskFull, "DiskFull", PyExc_OSError, "The disk or the store's size limit is full."},
      {ErrorCode::kInvalidArgument, "InvalidArgument", PyExc_ValueError, "A bad argument or a malformed input file."},
      {ErrorCode::kIO, "IO", PyExc_OSError, "An operating-system read, write or sync failed."},
      {ErrorCode::kReadOnly, "ReadOnly", nullptr, "A write to a store opened read-only, or on a read-only file."},
      {ErrorCode::kTooLarge, "TooLarge", nullptr, "The conversation does not fit the caller's maximum."},
      {ErrorCode::kVersion, "Version", nullptr, "The store's schema is newer than this library."},
      {ErrorCode::kInternal, "Internal", nullptr, "A bug or an unexpected database error."},
      {ErrorCode::kEvicted, "Evicted", nullptr,
       "The conversation's KV data was evicted under the byte budget; .position is the first position gone."},
      {ErrorCode::kUnsupported, "Unsupported", nullptr, "The store's backend does not offer the call."},
  };
  for (const ErrorClass& c : table) {
    py::tuple bases = c.also ? py::make_tuple(py::handle(base_class), py::handle(c.also))
                             : py::make_tuple(py::handle(base_class));
    PyObject* cls = new_class(c.name, c.doc, bases.ptr());
    classes()[static_cast<int>(c.code)] = cls;
    m.attr(c.name) = py::handle(cls);
  }
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const colikv::Error& e) {
      raise(e);
    }
  });
}

}  // namespace colikv_py
