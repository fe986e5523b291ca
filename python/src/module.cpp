// colikv._colikv: the Python module over the public C++ API (include/colikv/).
//
// Arrays cross the boundary through the buffer protocol: append reads the
// caller's float32 buffers in place, and load fills numpy arrays it allocates,
// so a conversation's values are never copied twice. Every call into the
// library releases the GIL (the library's threads never call back into Python).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "colikv/coli_kv.h"
#include "colikv/error.h"
#include "colikv/model.h"
#include "colikv/options.h"
#include "colikv/store.h"
#include "colikv/version.h"

#include "buffers.h"
#include "coli_kv_reader.h"
#include "errors.h"
#include "store.h"
#include "text.h"

namespace py = pybind11;
using colikv::ErrorCode;

namespace colikv_py {
namespace {

colikv::Synchronous parse_synchronous(const std::string& s) {
  if (s == "full") return colikv::Synchronous::kFull;
  if (s == "normal") return colikv::Synchronous::kNormal;
  throw colikv::Error(ErrorCode::kInvalidArgument, "synchronous must be \"full\" or \"normal\", not \"" + s + "\"");
}

colikv::Precision parse_precision(const std::string& s) {
  if (s == "f32") return colikv::Precision::kF32;
  if (s == "bf16") return colikv::Precision::kBf16;
  throw colikv::Error(ErrorCode::kInvalidArgument, "precision must be \"f32\" or \"bf16\", not \"" + s + "\"");
}

std::string model_repr(const colikv::ModelSignature& m) {
  std::string r = "colikv.Model(n_layers=" + std::to_string(m.n_layers) + ", kv_lora=" + std::to_string(m.kv_lora) +
                  ", qk_rope=" + std::to_string(m.qk_rope) + ", index_hd=" + std::to_string(m.index_hd) +
                  ", n_indexed=" + std::to_string(m.n_indexed) + ", vocab=" + std::to_string(m.vocab);
  return r + ", weights_id=" + py::repr(text_str(m.weights_id)).cast<std::string>() + ")";
}

KV load(PyStore& ps, const Text& id, const colikv::ModelSignature& m, std::optional<int64_t> limit) {
  auto s = ps.get();
  if (limit && *limit < 0)
    throw colikv::Error(ErrorCode::kInvalidArgument, "limit must be >= 0, not " + std::to_string(*limit));
  int64_t n = 0;
  {
    py::gil_scoped_release nogil;
    m.validate();
    // The arrays are sized by the token ids the library read and checked
    // (kNotFound, kCorrupt for a count the chunks do not hold), never by a
    // stored count alone; for another model, by nothing: load then refuses
    // it (kModelMismatch naming both) with empty arrays.
    if (s->info(id).model == m) n = static_cast<int64_t>(s->tokens(id).size());
    if (limit) n = std::min(*limit, n);
  }
  // Untouched pages of these arrays cost no memory until the library fills them.
  LoadArrays a = make_load_arrays(m, n);
  int32_t* tokens = a.tokens.mutable_data();
  const colikv::KvTarget target = a.target();
  int64_t got = 0;
  {
    py::gil_scoped_release nogil;
    got = s->load(id, m, tokens, n, target, n);
  }
  return make_kv(id, m, a, n, got);
}

// The caller's arrays of an append, checked against the model and held while
// the library reads them.
struct AppendArgs {
  InBuffer tokens, lc, rc, ic;
  std::vector<const float*> lc_ptrs, rc_ptrs, ic_ptrs;
  int64_t n = 0;
  colikv::KvSource source() const {
    return {lc_ptrs.data(), rc_ptrs.data(), ic_ptrs.empty() ? nullptr : ic_ptrs.data()};
  }
};

AppendArgs append_args(const colikv::ModelSignature& m, py::handle tokens, py::handle lc, py::handle rc, py::handle ic) {
  {
    py::gil_scoped_release nogil;
    m.validate();
  }
  AppendArgs a;
  a.tokens = token_buffer(tokens, "tokens");
  a.n = a.tokens.shape[0];
  a.lc = float_planes(lc, "lc", m.n_layers, a.n, m.kv_lora);
  a.rc = float_planes(rc, "rc", m.n_layers, a.n, m.qk_rope);
  if (m.n_indexed > 0) {
    if (ic.is_none())
      throw colikv::Error(ErrorCode::kInvalidArgument,
                          "ic: the model has n_indexed=" + std::to_string(m.n_indexed) + " indexed layers, ic is None");
    a.ic = float_planes(ic, "ic", m.n_indexed, a.n, m.index_hd);
  } else if (!ic.is_none()) {
    throw colikv::Error(ErrorCode::kInvalidArgument, "ic: the model has no indexer (n_indexed=0), ic must be None");
  }
  for (int l = 0; l < m.n_layers; ++l) {
    a.lc_ptrs.push_back(a.lc.floats() + l * a.lc.shape[1] * m.kv_lora);
    a.rc_ptrs.push_back(a.rc.floats() + l * a.rc.shape[1] * m.qk_rope);
  }
  if (m.n_indexed > 0) {
    a.ic_ptrs.assign(static_cast<size_t>(m.n_layers), nullptr);
    for (int l = 0; l < m.n_indexed; ++l) a.ic_ptrs[static_cast<size_t>(l)] = a.ic.floats() + l * a.ic.shape[1] * m.index_hd;
  }
  return a;
}

// What match returns: (id, tokens), or None when nothing matches.
py::object match_result(const colikv::PrefixMatch& pm) {
  if (pm.id.empty()) return py::none();
  return py::make_tuple(text_str(pm.id), pm.tokens);
}


}  // namespace
}  // namespace colikv_py

using namespace colikv_py;

PYBIND11_MODULE(_colikv, mod) {
  mod.doc() = "colikv: LLM KV-cache conversations in SQLite or PostgreSQL (the C++ library's Python binding).";
  // The linked library's version (colikv_version()), written once in colikv/version.h.
  mod.attr("__version__") = colikv::version();
  mod.attr("library_schema_version") = colikv::Store::library_schema_version();
  register_errors(mod);

  py::class_<colikv::ModelSignature>(mod, "Model", R"doc(
The model signature a conversation belongs to: six shape fields and an
optional weights identity. Two models are equal only when all seven fields
are; nothing loads into a model whose signature differs.

Model(n_layers, kv_lora, qk_rope, index_hd=0, n_indexed=0, vocab, weights_id="")
raises colikv.InvalidArgument naming the first bad field.)doc")
      .def(py::init([](int32_t n_layers, int32_t kv_lora, int32_t qk_rope, int32_t index_hd, int32_t n_indexed,
                       int32_t vocab, const Text& weights_id) {
             colikv::ModelSignature m;
             m.n_layers = n_layers;
             m.kv_lora = kv_lora;
             m.qk_rope = qk_rope;
             m.index_hd = index_hd;
             m.n_indexed = n_indexed;
             m.vocab = vocab;
             m.weights_id = weights_id.bytes;
             m.validate();
             return m;
           }),
           py::kw_only(), py::arg("n_layers"), py::arg("kv_lora"), py::arg("qk_rope"), py::arg("index_hd") = 0,
           py::arg("n_indexed") = 0, py::arg("vocab"), py::arg("weights_id") = "")
      .def_readonly("n_layers", &colikv::ModelSignature::n_layers)
      .def_readonly("kv_lora", &colikv::ModelSignature::kv_lora)
      .def_readonly("qk_rope", &colikv::ModelSignature::qk_rope)
      .def_readonly("index_hd", &colikv::ModelSignature::index_hd)
      .def_readonly("n_indexed", &colikv::ModelSignature::n_indexed)
      .def_readonly("vocab", &colikv::ModelSignature::vocab)
      .def_property_readonly("weights_id", [](const colikv::ModelSignature& m) { return Text(m.weights_id); })
      .def_property_readonly("floats_per_token", &colikv::ModelSignature::floats_per_token,
                             "Floats one token holds: n_layers*(kv_lora+qk_rope) + n_indexed*index_hd.")
      .def_property_readonly("record_bytes", &colikv::ModelSignature::record_bytes,
                             "Bytes of one .coli_kv record: 4 + 4*floats_per_token.")
      .def("__str__", [](const colikv::ModelSignature& m) { return Text(m.to_string()); })
      .def("__repr__", &model_repr)
      .def("__eq__", [](const colikv::ModelSignature& a, const colikv::ModelSignature& b) { return a == b; })
      .def("__hash__", [](const colikv::ModelSignature& m) { return py::hash(text_str(m.to_string())); });

  mod.def(
      "weights_id_from_dir",
      [](py::handle dir_arg) {
        const std::string dir = fs_path(dir_arg);
        py::gil_scoped_release nogil;
        return colikv::weights_id_from_dir(dir);
      },
      py::arg("model_dir"),
      "The weights identity of a model folder (\"w\" and 16 hex digits over config.json and the *.safetensors "
      "names and sizes). Raises NotFound (no config.json), InvalidArgument, IO.");

  py::class_<KV>(mod, "KV", R"doc(
A loaded conversation: tokens int32 (n,), lc float32 (n_layers, n, kv_lora),
rc float32 (n_layers, n, qk_rope), ic float32 (n_indexed, n, index_hd).
The arrays are the ones the library filled, not copies.)doc")
      .def_property_readonly("id", [](const KV& k) { return Text(k.id); })
      .def_readonly("model", &KV::model)
      .def_readonly("tokens", &KV::tokens)
      .def_readonly("lc", &KV::lc)
      .def_readonly("rc", &KV::rc)
      .def_readonly("ic", &KV::ic)
      .def("__len__", [](const KV& k) { return k.n; })
      .def("__repr__", [](const KV& k) {
        return "<colikv.KV " + py::repr(text_str(k.id)).cast<std::string>() + " tokens=" + std::to_string(k.n) + ">";
      });

  py::class_<colikv::ConversationInfo>(mod, "ConversationInfo", "One conversation's row (Store.info, Store.conversations).")
      .def_property_readonly("id", [](const colikv::ConversationInfo& x) { return Text(x.id); })
      .def_readonly("model", &colikv::ConversationInfo::model)
      .def_readonly("precision", &colikv::ConversationInfo::precision, "\"f32\" (exact) or \"bf16\"")
      .def_readonly("tokens", &colikv::ConversationInfo::tokens, "committed token count")
      .def_property_readonly("title", [](const colikv::ConversationInfo& c) { return Text(c.title); })
      .def_property_readonly("metadata", [](const colikv::ConversationInfo& c) { return Text(c.metadata); },
                             "JSON text; \"{}\" unless set")
      .def_property_readonly("parent",
                             [](const colikv::ConversationInfo& c) -> py::object {
                               return c.parent.empty() ? py::object(py::none()) : text_str(c.parent);
                             },
                             "id it was forked from; None if none or deleted")
      .def_readonly("forked_at", &colikv::ConversationInfo::forked_at)
      .def_readonly("created_ms", &colikv::ConversationInfo::created_ms, "Unix time in milliseconds")
      .def_readonly("updated_ms", &colikv::ConversationInfo::updated_ms)
      .def_readonly("last_used_ms", &colikv::ConversationInfo::last_used_ms, "last load, append or fork from it")
      .def_readonly("raw_bytes", &colikv::ConversationInfo::raw_bytes)
      .def_readonly("stored_bytes", &colikv::ConversationInfo::stored_bytes)
      .def_readonly("evicted", &colikv::ConversationInfo::evicted)
      .def("__repr__", [](const colikv::ConversationInfo& c) {
        return "<colikv.ConversationInfo " + py::repr(text_str(c.id)).cast<std::string>() +
               " tokens=" + std::to_string(c.tokens) + ">";
      });

  py::class_<colikv::UsageStats>(mod, "UsageStats", "Sizes of one model's data, or of the whole store.")
      .def_readonly("model", &colikv::UsageStats::model)
      .def_readonly("chunk_tokens", &colikv::UsageStats::chunk_tokens)
      .def_readonly("conversations", &colikv::UsageStats::conversations)
      .def_readonly("tokens", &colikv::UsageStats::tokens)
      .def_readonly("chunks", &colikv::UsageStats::chunks)
      .def_readonly("logical_bytes", &colikv::UsageStats::logical_bytes)
      .def_readonly("unique_bytes", &colikv::UsageStats::unique_bytes)
      .def_readonly("stored_bytes", &colikv::UsageStats::stored_bytes)
      .def_property_readonly("saved_by_sharing", &colikv::UsageStats::saved_by_sharing)
      .def_property_readonly("saved_by_compression", &colikv::UsageStats::saved_by_compression);

  py::class_<colikv::StoreStats>(mod, "StoreStats", "Store.stats(): per model and in total.")
      .def_readonly("models", &colikv::StoreStats::models)
      .def_readonly("total", &colikv::StoreStats::total)
      .def_readonly("file_bytes", &colikv::StoreStats::file_bytes)
      .def_readonly("evicted_conversations", &colikv::StoreStats::evicted_conversations)
      .def_readonly("evicted_chunks", &colikv::StoreStats::evicted_chunks);

  py::class_<colikv::VerifyProblem>(mod, "VerifyProblem", "One problem Store.verify found.")
      .def_property_readonly("conversation", [](const colikv::VerifyProblem& x) { return Text(x.conversation); })
      .def_readonly("chunk_seq", &colikv::VerifyProblem::chunk_seq)
      .def_readonly("chunk_id", &colikv::VerifyProblem::chunk_id)
      .def_readonly("first_pos", &colikv::VerifyProblem::first_pos)
      .def_readonly("end_pos", &colikv::VerifyProblem::end_pos)
      .def_property_readonly("what", [](const colikv::VerifyProblem& x) { return Text(x.what); })
      .def("__repr__", [](const colikv::VerifyProblem& p) { return "<colikv.VerifyProblem " + py::repr(text_str(p.what)).cast<std::string>() + ">"; });

  py::class_<colikv::UncomparedShare>(mod, "UncomparedShare", "A verify warning: a pre-schema-5 chunk shared without comparing values.")
      .def_readonly("chunk_id", &colikv::UncomparedShare::chunk_id)
      .def_readonly("first_pos", &colikv::UncomparedShare::first_pos)
      .def_readonly("end_pos", &colikv::UncomparedShare::end_pos)
      .def_property_readonly("conversations", [](const colikv::UncomparedShare& x) { return texts(x.conversations); });

  py::class_<colikv::VerifyReport>(mod, "VerifyReport", "Store.verify(): what was checked and the problems found.")
      .def_readonly("conversations", &colikv::VerifyReport::conversations)
      .def_readonly("chunks", &colikv::VerifyReport::chunks)
      .def_readonly("bytes", &colikv::VerifyReport::bytes)
      .def_property_readonly("integrity", [](const colikv::VerifyReport& x) { return Text(x.integrity); })
      .def_readonly("problems", &colikv::VerifyReport::problems)
      .def_readonly("uncompared_shares", &colikv::VerifyReport::uncompared_shares)
      .def_property_readonly("ok", &colikv::VerifyReport::ok, "True when no problem was found")
      .def("__bool__", &colikv::VerifyReport::ok);

  py::class_<colikv::EvictionReport>(mod, "EvictionReport", "Store.gc(): what the eviction did.")
      .def_readonly("stored_bytes_before", &colikv::EvictionReport::stored_bytes_before)
      .def_readonly("stored_bytes_after", &colikv::EvictionReport::stored_bytes_after)
      .def_readonly("freed_bytes", &colikv::EvictionReport::freed_bytes)
      .def_readonly("chunks", &colikv::EvictionReport::chunks)
      .def_property_readonly("conversations", [](const colikv::EvictionReport& x) { return texts(x.conversations); })
      .def_readonly("fits", &colikv::EvictionReport::fits);

  py::class_<colikv::VacuumReport>(mod, "VacuumReport",
                                   "Store.vacuum(): file bytes before and after, the free space found (-1: not "
                                   "known), and held_back: empty, or why space stays in the files for now.")
      .def_readonly("file_bytes_before", &colikv::VacuumReport::file_bytes_before)
      .def_readonly("file_bytes_after", &colikv::VacuumReport::file_bytes_after)
      .def_readonly("reclaimable_bytes", &colikv::VacuumReport::reclaimable_bytes)
      .def_readonly("held_back", &colikv::VacuumReport::held_back);

  py::class_<colikv::ImportResult>(mod, "ImportResult", "Store.import_coli_kv(): what was stored.")
      .def_property_readonly("id", [](const colikv::ImportResult& x) { return Text(x.id); })
      .def_readonly("model", &colikv::ImportResult::model)
      .def_readonly("tokens", &colikv::ImportResult::tokens)
      .def_readonly("header_count", &colikv::ImportResult::header_count)
      .def_readonly("ignored_records", &colikv::ImportResult::ignored_records)
      .def_readonly("ignored_bytes", &colikv::ImportResult::ignored_bytes)
      .def_readonly("salvaged", &colikv::ImportResult::salvaged);

  py::class_<PyStore> store_cls(mod, "Store", R"doc(
A store of conversations: a SQLite file path (str, bytes or os.PathLike), or
a postgresql:// URI.

Store(location, create=True, read_only=False, synchronous="full",
      busy_timeout_ms=5000, precision="f32", zstd_level=1, threads=0,
      max_store_bytes=0, max_queued_bytes=1 GiB, tenant="", create_tenant=True,
      create_staged=False)

tenant names the sharing domain the Store sees and writes (Options::tenant):
conversations, chunk sharing and prefix matches of one tenant never reach
another's; "" is the default tenant. A writable open creates a tenant the
store does not hold yet (with create_tenant); otherwise it raises NotFound.

create_staged=True (SQLite only) builds a new store under a temporary name
beside the location; nothing has the location's name until publish()
succeeds, and a Store closed without it leaves nothing behind. Raises
Conflict when the location's file exists.

A context manager: leaving the with-block closes it (committing what
append_async queued). Every failing call raises a colikv.Error subclass and
changes nothing. A Store may be used from several threads; each call
releases the GIL while the library works. Arrays are float32, C-contiguous:
lc (n_layers, n, kv_lora), rc (n_layers, n, qk_rope), ic (n_indexed, n,
index_hd) for tokens of shape (n,); a buffer may hold more positions than n
(an engine's preallocated buffer), its rows past n are not read. Ids,
titles and metadata are str or bytes; bytes a store holds that are not
UTF-8 come back as os.fsdecode gives a path (lone surrogates), and such a
str names the same bytes.)doc");
  store_cls
      .def(py::init([](py::handle location_arg, bool create, bool read_only, const std::string& synchronous,
                       int busy_timeout_ms, const std::string& precision, int zstd_level, int threads,
                       int64_t max_store_bytes, int64_t max_queued_bytes, const Text& tenant, bool create_tenant,
                       bool create_staged) {
             colikv::Options o;
             o.tenant = tenant;
             o.create_tenant_if_missing = create_tenant;
             o.create_staged = create_staged;
             o.create_if_missing = create;
             o.read_only = read_only;
             o.synchronous = parse_synchronous(synchronous);
             if (busy_timeout_ms < 0)
               throw colikv::Error(ErrorCode::kInvalidArgument, "busy_timeout_ms must be >= 0");
             o.busy_timeout_ms = busy_timeout_ms;
             o.new_conversation_precision = parse_precision(precision);
             o.zstd_level = zstd_level;
             if (threads < 0) throw colikv::Error(ErrorCode::kInvalidArgument, "threads must be >= 0");
             o.threads = threads;
             if (max_store_bytes < 0) throw colikv::Error(ErrorCode::kInvalidArgument, "max_store_bytes must be >= 0");
             o.max_store_bytes = max_store_bytes;
             if (max_queued_bytes <= 0) throw colikv::Error(ErrorCode::kInvalidArgument, "max_queued_bytes must be > 0");
             o.max_queued_bytes = max_queued_bytes;
             return std::make_unique<PyStore>(fs_path(location_arg), o);
           }),
           py::arg("location"), py::kw_only(), py::arg("create") = true, py::arg("read_only") = false,
           py::arg("synchronous") = "full", py::arg("busy_timeout_ms") = 5000, py::arg("precision") = "f32",
           py::arg("zstd_level") = 1, py::arg("threads") = 0, py::arg("max_store_bytes") = 0,
           py::arg("max_queued_bytes") = int64_t{1} << 30, py::arg("tenant") = Text(),
           py::arg("create_tenant") = true, py::arg("create_staged") = false)
      .def_property_readonly("location", [](PyStore& ps) { return fs_str(ps.location()); }, "The path or URI as given (a str).")
      .def_property_readonly("closed", &PyStore::closed)
      .def_property_readonly("schema_version", [](PyStore& ps) { return locked_call(ps, [](colikv::Store& s) { return s.schema_version(); }); })
      .def("close", &PyStore::close,
           "Commits what append_async queued, then closes; raises the first error of a queued append (the store "
           "is closed all the same). Closing a closed store does nothing.")
      .def("__enter__", [](py::object self) { self.cast<PyStore&>().get(); return self; })
      .def("__exit__", [](PyStore& ps, py::handle, py::handle, py::handle) { ps.close(); return false; })
      .def("__repr__", [](PyStore& ps) {
        return "<colikv.Store " + py::repr(fs_str(colikv::shown_store_location(ps.location()))).cast<std::string>() +
               (ps.closed() ? " closed>" : ">");
      })
      .def(
          "append",
          [](PyStore& ps, const Text& id, const colikv::ModelSignature& m, py::handle tokens, py::handle lc,
             py::handle rc, py::handle ic) {
            auto s = ps.get();
            AppendArgs a = append_args(m, tokens, lc, rc, ic);
            py::gil_scoped_release nogil;
            s->append(id, m, a.tokens.ints(), a.n, a.source());
          },
          py::arg("id"), py::arg("model"), py::arg("tokens"), py::arg("lc"), py::arg("rc"), py::arg("ic") = py::none(),
          R"doc(Persists positions [count(id), n) of the arrays in one transaction, creating the
conversation if absent. tokens[0, count) must equal the stored tokens (else
Diverged, with .position). Raises TypeError/InvalidArgument for a bad array
(naming it, its dtype and shape) before anything is written; ModelMismatch,
Diverged, InvalidArgument (a token outside [0, vocab)), Conflict, ReadOnly,
DiskFull, Busy.)doc")
      .def(
          "append_async",
          [](PyStore& ps, const Text& id, const colikv::ModelSignature& m, py::handle tokens, py::handle lc,
             py::handle rc, py::handle ic) {
            auto s = ps.get();
            AppendArgs a = append_args(m, tokens, lc, rc, ic);
            py::gil_scoped_release nogil;
            s->append_async(id, m, a.tokens.ints(), a.n, a.source());
          },
          py::arg("id"), py::arg("model"), py::arg("tokens"), py::arg("lc"), py::arg("rc"), py::arg("ic") = py::none(),
          R"doc(append without waiting for the commit: copies the new positions and returns
(the arrays may be changed at once); a background thread commits queued
turns in order. Raises here what can be checked before queueing
(ModelMismatch, Diverged, InvalidArgument, ReadOnly) and an earlier queued
turn's error not yet reported; errors met while committing are raised by
wait().)doc")
      .def(
          "wait",
          [](PyStore& ps, std::optional<Text> id) {
            locked_call(ps, [&](colikv::Store& s) {
              if (id)
                s.wait(*id);
              else
                s.wait();
              return 0;
            });
          },
          py::arg("id") = py::none(),
          "Waits until the turns queued for id (all, without id) are committed or dropped, then raises the first "
          "error one of them met since the last wait.")
      .def(
          "write",
          [](PyStore& ps, const Text& id, const colikv::ModelSignature& m, py::handle tokens, py::handle lc,
             py::handle rc, py::handle ic, int64_t start) {
            auto s = ps.get();
            AppendArgs a = append_args(m, tokens, lc, rc, ic);
            py::gil_scoped_release nogil;
            s->write(id, m, a.tokens.ints(), start, a.n, a.source());
          },
          py::arg("id"), py::arg("model"), py::arg("tokens"), py::arg("lc"), py::arg("rc"), py::arg("ic") = py::none(),
          py::kw_only(), py::arg("start"),
          "Rewrites the conversation from position start on in one transaction: keeps [0, start) (which must equal "
          "tokens[0, start), else Diverged) and replaces the rest with positions [start, n) of the arrays.")
      .def("load", &load, py::arg("id"), py::arg("model"), py::arg("limit") = py::none(),
           R"doc(Loads the committed conversation (its first `limit` positions when given) into
new numpy arrays the library fills: a colikv.KV. Raises NotFound,
ModelMismatch (naming both signatures), Corrupt, Evicted (with .position).)doc")
      .def(
          "tokens",
          [](PyStore& ps, const Text& id) {
            std::vector<int32_t> t = locked_call(ps, [&](colikv::Store& s) { return s.tokens(id); });
            py::array_t<int32_t> a({static_cast<py::ssize_t>(t.size())});
            if (!t.empty()) std::memcpy(a.mutable_data(), t.data(), t.size() * sizeof(int32_t));
            return a;
          },
          py::arg("id"), "The committed token ids, int32 (n,). Raises NotFound, Corrupt.")
      .def(
          "count", [](PyStore& ps, const Text& id) { return locked_call(ps, [&](colikv::Store& s) { return s.count(id); }); },
          py::arg("id"), "Committed tokens of a conversation; 0 when it does not exist.")
      .def(
          "exists", [](PyStore& ps, const Text& id) { return locked_call(ps, [&](colikv::Store& s) { return s.exists(id); }); },
          py::arg("id"))
      .def("__contains__", [](PyStore& ps, const Text& id) { return locked_call(ps, [&](colikv::Store& s) { return s.exists(id); }); })
      .def("__len__", [](PyStore& ps) { return locked_call(ps, [](colikv::Store& s) { return s.conversation_count(); }); })
      .def(
          "info", [](PyStore& ps, const Text& id) { return locked_call(ps, [&](colikv::Store& s) { return s.info(id); }); },
          py::arg("id"), "The conversation's colikv.ConversationInfo. Raises NotFound.")
      .def(
          "conversations",
          [](PyStore& ps, std::optional<int64_t> limit, int64_t offset) {
            return locked_call(ps, [&](colikv::Store& s) { return list_all(s, limit, offset); });
          },
          py::arg("limit") = py::none(), py::arg("offset") = 0,
          "The conversations, most recently used first: a list of colikv.ConversationInfo (all of them when "
          "limit is None).")
      .def(
          "create",
          [](PyStore& ps, const Text& id, const colikv::ModelSignature& m, const Text& title,
             const Text& metadata) {
            locked_call(ps, [&](colikv::Store& s) { s.create(id, m, title, metadata); return 0; });
          },
          py::arg("id"), py::arg("model"), py::arg("title") = "", py::arg("metadata") = "{}",
          "Creates an empty conversation. Raises Conflict if the id exists.")
      .def(
          "delete", [](PyStore& ps, const Text& id) { locked_call(ps, [&](colikv::Store& s) { s.remove(id); return 0; }); },
          py::arg("id"), "Deletes a conversation and frees the chunks no other uses. Raises NotFound.")
      .def(
          "rename",
          [](PyStore& ps, const Text& a, const Text& b) {
            locked_call(ps, [&](colikv::Store& s) { s.rename(a, b); return 0; });
          },
          py::arg("old_id"), py::arg("new_id"), "Raises NotFound, Conflict (new_id exists).")
      .def(
          "fork",
          [](PyStore& ps, const Text& src, const Text& dst, std::optional<int64_t> at) {
            if (at && *at < 0) throw colikv::Error(ErrorCode::kInvalidArgument, "at must be >= 0 or None, not " + std::to_string(*at));
            locked_call(ps, [&](colikv::Store& s) { s.fork(src, dst, at ? *at : -1); return 0; });
          },
          py::arg("src"), py::arg("dst"), py::arg("at") = py::none(),
          "Creates dst holding the first `at` tokens of src (all when None), sharing its chunks. Raises NotFound, "
          "Conflict, InvalidArgument (at > count).")
      .def(
          "truncate",
          [](PyStore& ps, const Text& id, int64_t n) {
            locked_call(ps, [&](colikv::Store& s) { s.truncate(id, n); return 0; });
          },
          py::arg("id"), py::arg("length"), "Keeps the first `length` tokens. Raises NotFound, InvalidArgument.")
      .def(
          "set_title",
          [](PyStore& ps, const Text& id, const Text& t) {
            locked_call(ps, [&](colikv::Store& s) { s.set_title(id, t); return 0; });
          },
          py::arg("id"), py::arg("title"))
      .def(
          "set_metadata",
          [](PyStore& ps, const Text& id, const Text& t) {
            locked_call(ps, [&](colikv::Store& s) { s.set_metadata(id, t); return 0; });
          },
          py::arg("id"), py::arg("metadata"), "metadata is JSON text (else InvalidArgument).")
      .def(
          "match",
          [](PyStore& ps, const colikv::ModelSignature& m, py::handle tokens) {
            auto s = ps.get();
            InBuffer t = token_buffer(tokens, "tokens");
            colikv::PrefixMatch pm;
            {
              py::gil_scoped_release nogil;
              pm = s->match(m, t.ints(), t.shape[0]);
            }
            return match_result(pm);
          },
          py::arg("model"), py::arg("tokens"),
          "The conversation of model holding the longest prefix of tokens: (id, length), or None.")
      .def(
          "match_loadable",
          [](PyStore& ps, const colikv::ModelSignature& m, py::handle tokens) {
            auto s = ps.get();
            InBuffer t = token_buffer(tokens, "tokens");
            colikv::PrefixMatch pm;
            {
              py::gil_scoped_release nogil;
              pm = s->match_loadable(m, t.ints(), t.shape[0]);
            }
            return match_result(pm);
          },
          py::arg("model"), py::arg("tokens"),
          "match among what can be loaded (none of its KV data evicted): (id, length), or None.")
      .def("stats", [](PyStore& ps) { return locked_call(ps, [](colikv::Store& s) { return s.stats(); }); },
           "The store's sizes: a colikv.StoreStats.")
      .def(
          "verify",
          [](PyStore& ps, std::optional<Text> id) {
            return locked_call(ps, [&](colikv::Store& s) { return s.verify(id ? id->bytes : std::string()); });
          },
          py::arg("id") = py::none(),
          "Reads and checks every chunk of one conversation (all when None): a colikv.VerifyReport. Raises "
          "NotFound for a missing id; problems in the data are reported, not raised.")
      .def(
          "gc", [](PyStore& ps, int64_t max_bytes) { return locked_call(ps, [&](colikv::Store& s) { return s.gc(max_bytes); }); },
          py::kw_only(), py::arg("max_bytes"),
          "Evicts the KV data of the least recently used conversations until the chunk payloads take at most "
          "max_bytes: a colikv.EvictionReport.")
      .def("vacuum", [](PyStore& ps) { return locked_call(ps, [](colikv::Store& s) { return s.vacuum(); }); },
           "Rewrites the file without its free pages: a colikv.VacuumReport.")
      .def(
          "import_coli_kv",
          [](PyStore& ps, py::handle path_arg, std::optional<Text> id, std::optional<Text> weights_id,
             bool salvage) {
            const std::string path = fs_path(path_arg);
            colikv::ImportOptions io;
            if (id) {
              if (id->bytes.empty()) throw colikv::Error(ErrorCode::kInvalidArgument, "id must not be empty");
              io.id = *id;
            }
            if (weights_id) io.weights_id = *weights_id;
            io.salvage = salvage;
            return locked_call(ps, [&](colikv::Store& s) { return colikv::import_coli_kv(s, path, io); });
          },
          py::arg("path"), py::kw_only(), py::arg("id") = py::none(), py::arg("weights_id") = py::none(),
          py::arg("salvage") = false,
          "Imports an engine's .coli_kv file as a new conversation (id: the file name without .coli_kv by "
          "default), all of it or nothing: a colikv.ImportResult. Raises InvalidArgument (a malformed file), "
          "Conflict, NotFound, IO.")
      .def(
          "export_coli_kv",
          [](PyStore& ps, const Text& id, py::handle path_arg, bool force) {
            const std::string path = fs_path(path_arg);
            colikv::ExportOptions eo;
            eo.force = force;
            return locked_call(ps, [&](colikv::Store& s) { return colikv::export_coli_kv(s, id, path, eo); });
          },
          py::arg("id"), py::arg("path"), py::kw_only(), py::arg("force") = false,
          "Writes the conversation as a .coli_kv file, byte for byte what the engine writes, atomically; returns "
          "the bytes written. Raises Conflict (the file exists and not force), NotFound, InvalidArgument.");
  def_store_admin(mod, store_cls);
  def_store_metrics(mod, store_cls);
  def_store_ranges(store_cls);


  mod.def(
      "read_coli_kv", [](py::handle path, std::optional<int64_t> limit) { return read_coli_kv(fs_path(path), limit); },
      py::arg("path"), py::arg("limit") = py::none(),
      R"doc(Reads an engine's .coli_kv file into numpy without a store: a colikv.KV (id:
the file name without .coli_kv; model without weights_id). Raises
InvalidArgument naming the file and every format problem, NotFound, IO.)doc");

  // The classes show as colikv.X (help, repr, pickling by name), not as the extension's.
  for (const char* cls : {"Model", "KV", "ConversationInfo", "UsageStats", "StoreStats", "VerifyProblem",
                          "UncomparedShare", "VerifyReport", "EvictionReport", "VacuumReport", "ImportResult",
                          "CopyResult", "TenantInfo", "Store"})
    mod.attr(cls).attr("__module__") = "colikv";

  mod.def("is_postgres_location", &colikv::is_postgres_location, py::arg("location"),
          "True for a postgresql:// or postgres:// URI.");
  mod.def("shown_store_location", &colikv::shown_store_location, py::arg("location"),
          "The location as messages show it: a URI without its password.");
}
