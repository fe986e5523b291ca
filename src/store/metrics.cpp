// Store::metrics and Store::gauges (colikv/metrics.h): what a Store counted,
// and what its store holds.
#include <map>

#include "catalog/backend_error.h"
#include "store/store_call.h"
#include "store/store_impl.h"
#include "catalog/location.h"

namespace colikv {

Metrics Store::metrics() {
  Impl& s = *impl_;
  // In the gate: another thread may be closing the Store.
  const detail::CallGate::Call in_flight(s.gate(), [&] { return s.where(); });
  Metrics m;
  m.tenant = s.options().tenant;
  s.counters().add_to(m);
  return m;
}

Gauges Store::gauges() {
  return detail::StoreCall::run(*impl_, [&](Store::Impl& s) REQUIRES(s.mu) {
    const std::string here = s.where() + ": gauges";
    Gauges g;
    g.store = detail::shown_location(s.path());
    const auto snapshot = s.catalog().begin(detail::Catalog::Access::kRead, here);
    std::map<int64_t, std::string> models;
    const detail::GaugeUsage usage = s.catalog().gauge_usage();
    for (const detail::GaugeUsageRow& r : usage.rows) {
      auto m = models.find(r.model_id);
      if (m == models.end()) m = models.emplace(r.model_id, s.model_by_id(r.model_id).text).first;
      g.rows.push_back({r.tenant, m->second, r.conversations, r.tokens, r.stored_bytes, r.evicted_bytes});
    }
    g.held_chunks = usage.held_chunks;
    g.wal_bytes = usage.wal_bytes;
    g.file_bytes = usage.file_bytes - usage.wal_bytes;
    return g;
  });
}

}  // namespace colikv
