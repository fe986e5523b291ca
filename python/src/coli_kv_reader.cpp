#include "coli_kv_reader.h"

#include <algorithm>

#include "colikv/coli_kv.h"
#include "colikv/error.h"

namespace colikv_py {

using colikv::Error;
using colikv::ErrorCode;

KV read_coli_kv(const std::string& path, std::optional<int64_t> limit) {
  if (limit && *limit < 0) throw Error(ErrorCode::kInvalidArgument, "limit must be >= 0, not " + std::to_string(*limit));
  colikv::ColiKvInspection ins;
  {
    py::gil_scoped_release nogil;
    ins = colikv::inspect_coli_kv(path, 0);
  }
  // Every problem at once, where the library's reader names the first.
  if (!ins.ok()) {
    std::string what = "'" + path + "' is not a well-formed .coli_kv file: ";
    for (size_t i = 0; i < ins.problems.size(); ++i) what += (i ? "; " : "") + ins.problems[i];
    throw Error(ErrorCode::kInvalidArgument, what);
  }
  const colikv::ModelSignature m = ins.model;
  const int64_t n = limit ? std::min(*limit, ins.header_count) : ins.header_count;
  LoadArrays a = make_load_arrays(m, n);
  int32_t* tokens = a.tokens.mutable_data();
  const colikv::KvTarget target = a.target();
  int64_t got = 0;
  {
    py::gil_scoped_release nogil;
    // The arrays hold n positions of m: a file changed since it was inspected
    // reads no more (kTooLarge never: limit n), another shape not at all.
    colikv::ReadColiKvOptions o;
    o.limit = n;
    got = colikv::read_coli_kv(path, m, tokens, n, target, o);
  }
  return make_kv(colikv::default_conversation_id(path), m, a, n, got);
}

}  // namespace colikv_py
