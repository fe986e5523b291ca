// read_coli_kv: an engine's .coli_kv file into numpy arrays, without a store.
#ifndef COLIKV_PYTHON_COLI_KV_READER_H
#define COLIKV_PYTHON_COLI_KV_READER_H

#include <cstdint>
#include <optional>
#include <string>

#include "buffers.h"

namespace colikv_py {

// The file's first nrec records (limit of them when given), checked first by
// colikv::inspect_coli_kv (every format problem raises kInvalidArgument
// naming the file), so arrays are sized by records present in the file, never
// by what its header claims alone; then read by colikv::read_coli_kv. Raises
// kIO when the file is cut meanwhile, kModelMismatch when it was replaced by
// one of another shape.
KV read_coli_kv(const std::string& path, std::optional<int64_t> limit);

}  // namespace colikv_py

#endif  // COLIKV_PYTHON_COLI_KV_READER_H
