// Store calls of an operator: tenants and their limits, role grants,
// staged creation, and copies between stores.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "colikv/copy.h"
#include "colikv/error.h"
#include "colikv/options.h"
#include "colikv/store.h"

#include "store.h"
#include "text.h"

namespace colikv_py {

using colikv::ErrorCode;

std::vector<colikv::ConversationInfo> list_all(colikv::Store& s, std::optional<int64_t> limit, int64_t offset) {
  if (limit && *limit < 0)
    throw colikv::Error(ErrorCode::kInvalidArgument, "limit must be >= 0 or None, not " + std::to_string(*limit));
  if (offset < 0) throw colikv::Error(ErrorCode::kInvalidArgument, "offset must be >= 0, not " + std::to_string(offset));
  std::vector<colikv::ConversationInfo> all;
  const int64_t page = 500;
  for (int64_t at = offset;;) {
    colikv::ListOptions lo;
    lo.offset = at;
    lo.limit = limit ? std::min(page, *limit - static_cast<int64_t>(all.size())) : page;
    if (lo.limit <= 0) break;
    std::vector<colikv::ConversationInfo> part = s.list(lo);
    for (auto& c : part) all.push_back(std::move(c));
    if (static_cast<int64_t>(part.size()) < lo.limit) break;
    at += static_cast<int64_t>(part.size());
  }
  return all;
}

void def_store_admin(py::module_& mod, py::class_<PyStore>& cls) {
  py::class_<colikv::CopyResult>(mod, "CopyResult", "One conversation Store.copy_to copied, checked byte for byte.")
      .def_property_readonly("id", [](const colikv::CopyResult& x) { return Text(x.id); })
      .def_readonly("model", &colikv::CopyResult::model)
      .def_readonly("tokens", &colikv::CopyResult::tokens)
      .def_readonly("records_sha256", &colikv::CopyResult::records_sha256)
      .def_readonly("evicted_from", &colikv::CopyResult::evicted_from)
      .def_readonly("skipped", &colikv::CopyResult::skipped);

  py::class_<colikv::TenantInfo>(mod, "TenantInfo", "One tenant of the store (Store.tenants).")
      .def_property_readonly("name", [](const colikv::TenantInfo& t) { return Text(t.name); }, "\"\" for the default tenant")
      .def_readonly("conversations", &colikv::TenantInfo::conversations)
      .def_readonly("stored_bytes", &colikv::TenantInfo::stored_bytes,
                    "payload bytes of the chunks its conversations use")
      .def_property_readonly("max_bytes", [](const colikv::TenantInfo& t) { return t.limits.max_bytes; },
                             "its byte quota; None for none")
      .def_property_readonly("max_idle_ms", [](const colikv::TenantInfo& t) { return t.limits.max_idle_ms; },
                             "its retention; None for none")
      .def("__repr__", [](const colikv::TenantInfo& t) {
        return "<colikv.TenantInfo " + py::repr(text_str(t.name)).cast<std::string>() +
               " conversations=" + std::to_string(t.conversations) + ">";
      });

  cls      .def(
          "tenant_limits",
          [](PyStore& ps) {
            const colikv::TenantLimits l = locked_call(ps, [](colikv::Store& s) { return s.tenant_limits(); });
            return std::make_pair(l.max_bytes, l.max_idle_ms);
          },
          "The Store's tenant's limits as (max_bytes, max_idle_ms), None for none (colikv tenant).")
      .def(
          "set_tenant_limits",
          [](PyStore& ps, std::optional<int64_t> max_bytes, std::optional<int64_t> max_idle_ms) {
            locked_call(ps, [&](colikv::Store& s) { s.set_tenant_limits({max_bytes, max_idle_ms}); });
          },
          py::kw_only(), py::arg("max_bytes") = py::none(), py::arg("max_idle_ms") = py::none(),
          "Replaces both limits of the Store's tenant (None: none): after each append into the tenant its "
          "conversations idle longer than max_idle_ms are deleted whole, then its least recently used ones are "
          "evicted until it fits max_bytes; other tenants are never touched. Raises InvalidArgument for a "
          "negative value.")
      .def(
          "expire",
          [](PyStore& ps, int64_t max_idle_ms) {
            return texts(locked_call(ps, [&](colikv::Store& s) { return s.expire(max_idle_ms); }).conversations);
          },
          py::kw_only(), py::arg("max_idle_ms"),
          "Deletes whole the tenant's conversations not used for longer than max_idle_ms; returns their ids.")
      .def(
          "copy_to",
          [](PyStore& ps, py::object other, std::optional<std::vector<Text>> ids, bool skip_existing) {
            auto s = ps.get();
            std::shared_ptr<colikv::Store> dst;
            if (py::isinstance<PyStore>(other)) {
              dst = other.cast<PyStore&>().get();
            } else {
              const std::string location = fs_path(other);
              colikv::Options o;  // a new destination: created if missing, as durable as this store
              o.synchronous = s->options().synchronous;
              py::gil_scoped_release nogil;
              dst = std::make_shared<colikv::Store>(location, o);
            }
            if (dst.get() == s.get())
              throw colikv::Error(ErrorCode::kInvalidArgument, "copy_to: the destination is this store");
            py::gil_scoped_release nogil;
            std::vector<std::string> todo;
            if (ids) {
              for (const Text& id : *ids) todo.push_back(id.bytes);
            } else {
              for (auto& c : list_all(*s, std::nullopt, 0)) todo.push_back(c.id);
            }
            std::vector<colikv::CopyResult> out;
            colikv::CopyOptions co;
            co.skip_existing = skip_existing;
            for (const auto& id : todo) out.push_back(colikv::copy_conversation(*s, *dst, id, co));
            return out;
          },
          py::arg("other"), py::arg("ids") = py::none(), py::kw_only(), py::arg("skip_existing") = false,
          "Copies conversations (all when ids is None) into another store (a Store, a path or a URI, created if "
          "missing), each in one transaction of the destination and compared byte for byte. Raises Conflict when "
          "the destination has an id (with skip_existing: unless it holds the same conversation, then reported "
          "skipped); conversations copied before the failing one stay copied.")
      .def(
          "tenants", [](PyStore& ps) { return locked_call(ps, [](colikv::Store& s) { return s.tenants(); }); },
          "Every tenant of the store, whichever one this Store is opened for: a list of colikv.TenantInfo, from "
          "one read snapshot (the operator's view).")
      .def(
          "grant_tenant",
          [](PyStore& ps, const Text& role) { locked_call(ps, [&](colikv::Store& s) { s.grant_tenant(role); }); },
          py::arg("role"),
          "PostgreSQL: lets the server role read and write this Store's tenant and no other (row-level "
          "security). Raises Unsupported on a SQLite store, NotFound for a role the server lacks, "
          "InvalidArgument for a role that sees every tenant anyway, ReadOnly when not run by the store's owner.")
      .def(
          "revoke_tenant",
          [](PyStore& ps, const Text& role) { locked_call(ps, [&](colikv::Store& s) { s.revoke_tenant(role); }); },
          py::arg("role"),
          "Undoes grant_tenant for this Store's tenant. Raises NotFound when the role holds no grant of it, and "
          "what grant_tenant raises.")
      .def(
          "publish",
          [](PyStore& ps) {
            if (!ps.get()->options().create_staged) {  // InvalidArgument from the library; the Store stays open
              locked_call(ps, [](colikv::Store& s) { s.publish(); });
              return;
            }
            std::shared_ptr<colikv::Store> s = ps.take();
            py::gil_scoped_release nogil;
            struct Release {  // the destructor (which may wait for the writer thread) without the GIL too
              std::shared_ptr<colikv::Store>& s;
              ~Release() { s.reset(); }
            } release{s};
            s->publish();
          },
          R"doc(For a Store opened with create_staged=True: gives the new store its name
(atomically, never replacing a file) and closes this Store, whether it
succeeds or raises; open the location again to use it. Raises what a queued
append met, Conflict (a file of that name appeared meanwhile: the new store
is discarded), DiskFull, IO; InvalidArgument for a Store not staged.)doc");
}

}  // namespace colikv_py
