// The exception classes: colikv.Error and one subclass per ErrorCode, raised
// for every colikv::Error the library throws.
#ifndef COLIKV_PYTHON_ERRORS_H
#define COLIKV_PYTHON_ERRORS_H

#include <pybind11/pybind11.h>

namespace colikv_py {

// Adds Error, NotFound, ..., Evicted to the module and translates
// colikv::Error into them (with .code, .code_name and .position).
void register_errors(pybind11::module_& m);

}  // namespace colikv_py

#endif  // COLIKV_PYTHON_ERRORS_H
