// Store calls of an engine that loads part of a conversation: load_range, and
// adopt (a prompt's longest loadable prefix, loaded in one read snapshot).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "colikv/error.h"
#include "colikv/model.h"
#include "colikv/store.h"

#include "buffers.h"
#include "store.h"
#include "text.h"

namespace colikv_py {

using colikv::ErrorCode;

void def_store_ranges(py::class_<PyStore>& cls) {
  cls.def(
         "load_range",
         [](PyStore& ps, const Text& id, const colikv::ModelSignature& m, int64_t start, int64_t stop) {
           auto s = ps.get();
           if (start < 0 || stop < start)
             throw colikv::Error(ErrorCode::kInvalidArgument, "load_range: needs 0 <= start <= stop, not start=" +
                                                                  std::to_string(start) + ", stop=" + std::to_string(stop));
           int64_t n = 0;
           {
             py::gil_scoped_release nogil;
             m.validate();
             // The arrays are sized by the token ids the library read and
             // checked, as load sizes them, never by the caller's stop alone
             // (a stop past them is InvalidArgument, not an allocation); for
             // another model by nothing: load_range then raises ModelMismatch.
             if (s->info(id).model == m) {
               const auto count = static_cast<int64_t>(s->tokens(id).size());
               if (stop > count)
                 throw colikv::Error(ErrorCode::kInvalidArgument, "load_range: stop=" + std::to_string(stop) +
                                                                      " is past the conversation's " +
                                                                      std::to_string(count) + " committed tokens");
               n = stop;
             }
           }
           // Arrays for [0, stop) whose rows before start are never touched (no
           // memory until written); the KV returned views [start, stop).
           LoadArrays a = make_load_arrays(m, n);
           int32_t* tokens = a.tokens.mutable_data();
           const colikv::KvTarget target = a.target();
           {
             py::gil_scoped_release nogil;
             s->load_range(id, m, start, stop, tokens, target);
           }
           return make_kv_range(id, m, a, n, start, stop);
         },
         py::arg("id"), py::arg("model"), py::arg("start"), py::arg("stop"),
         R"doc(Loads positions [start, stop) of the committed conversation into new numpy
arrays the library fills: a colikv.KV of stop - start positions (kv.tokens
is the ids of those positions). Raises what load raises, and
InvalidArgument unless 0 <= start <= stop <= the committed count.)doc")
      .def(
          "adopt",
          [](PyStore& ps, const colikv::ModelSignature& m, py::handle prompt_arg, int64_t start) -> py::object {
            auto s = ps.get();
            InBuffer prompt = token_buffer(prompt_arg, "prompt");
            const int64_t len = prompt.shape[0];
            if (start < 0 || start > len)
              throw colikv::Error(ErrorCode::kInvalidArgument, "adopt: needs 0 <= start <= len(prompt) = " +
                                                                   std::to_string(len) + ", not " + std::to_string(start));
            // The arrays are sized by the longest loadable match the store holds
            // now, never by the prompt alone (a long prompt must not cost
            // memory the store's data does not); adopt then looks at that much
            // of the prompt, so its match (in its own snapshot) fits them.
            int64_t cap = 0;
            {
              py::gil_scoped_release nogil;
              m.validate();
              cap = s->match_loadable(m, prompt.ints(), len).tokens;
            }
            if (cap == 0) return py::none();
            LoadArrays a = make_load_arrays(m, cap);
            int32_t* tokens = a.tokens.mutable_data();
            const colikv::KvTarget target = a.target();
            colikv::PrefixMatch pm;
            {
              py::gil_scoped_release nogil;
              pm = s->adopt(m, prompt.ints(), cap, std::min(start, cap), tokens, target);
            }
            if (pm.id.empty()) return py::none();
            const int64_t from = std::min(start, pm.tokens);
            return py::make_tuple(text_str(pm.id), pm.tokens, make_kv_range(pm.id, m, a, cap, from, pm.tokens));
          },
          py::arg("model"), py::arg("prompt"), py::kw_only(), py::arg("start") = 0,
          R"doc(An engine's prefix adoption in one read snapshot: finds the conversation of
model holding the longest loadable prefix of prompt (as match_loadable) and
loads its positions [start, length) (start: what the engine holds already).
Returns (id, length, kv), kv a colikv.KV of those positions (empty when
length <= start), or None when nothing matches. The loaded token ids are
checked against the prompt (Corrupt when they differ). Raises
InvalidArgument unless 0 <= start <= len(prompt), and what load raises.)doc");
}

}  // namespace colikv_py
