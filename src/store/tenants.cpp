// The tenant API: every tenant of the store (Store::tenants), this Store's
// tenant's limits (tenant_limits, set_tenant_limits), and a server role per
// tenant (grant_tenant, revoke_tenant; catalog_maintenance.h, TenantRoles;
// docs/postgres.md). What the limits do after a write is in upkeep/eviction.cpp.
#include "store/store_impl.h"

#include "catalog/backend_error.h"
#include "core/text_argument.h"
#include "store/store_call.h"
#include "store/upkeep/eviction.h"

namespace colikv {

namespace {

void set_tenant_role(Store::Impl& s, const std::string& role, bool granted) REQUIRES(s.mu) {
  // where() names the tenant, but not the default one.
  const std::string op = std::string(granted ? "granting" : "revoking") +
                         (s.options().tenant.empty() ? " the default tenant \"\"" : " the tenant") +
                         (granted ? " to" : " from") + " role '" + role + "'";
  detail::require_no_nul(role, "role", s.where());
  if (role.empty()) throw Error(ErrorCode::kInvalidArgument, s.where() + ": " + op + ": the role name is empty");
  s.require_writable(op);
  const std::string here = s.where() + ": " + op;
  detail::TenantRoles* roles = s.catalog().tenant_roles();
  // SQLite, the one backend without roles: whoever reads the file reads every
  // tenant, so its file mode is all the access control there is.
  if (!roles)
    throw Error(ErrorCode::kUnsupported,
                here + ": tenant roles need a PostgreSQL store: a SQLite store has no server roles (its file mode, "
                       "Options::file_mode, decides who reads every tenant)");
  const auto txn = s.catalog().begin(detail::Catalog::Access::kWrite, here);
  roles->set_tenant_role(role, granted, detail::now_ms());
  txn->commit();
}

}  // namespace

void Store::grant_tenant(const std::string& role) {
  detail::StoreCall::run(*impl_, [&](Store::Impl& s) REQUIRES(s.mu) {
    set_tenant_role(s, role, true);
  });
}

void Store::revoke_tenant(const std::string& role) {
  detail::StoreCall::run(*impl_, [&](Store::Impl& s) REQUIRES(s.mu) {
    set_tenant_role(s, role, false);
  });
}

std::vector<TenantInfo> Store::tenants() {
  return detail::StoreCall::run(*impl_, [&](Store::Impl& s) REQUIRES(s.mu) {
    const auto snapshot = s.catalog().begin(detail::Catalog::Access::kRead, s.where());
    std::vector<TenantInfo> out;
    for (const detail::TenantRow& t : s.catalog().tenant_usage())
      out.push_back({t.name, t.conversations, t.stored_bytes,
                     detail::checked_limits(t.limits, s.where() + ": tenant '" + t.name + "'")});
    return out;
  });
}

TenantLimits Store::tenant_limits() {
  return detail::StoreCall::run(*impl_, [&](Store::Impl& s) REQUIRES(s.mu) {
    const auto snapshot = s.catalog().begin(detail::Catalog::Access::kRead, s.where());
    return detail::stored_limits(s, s.where());
  });
}

void Store::set_tenant_limits(const TenantLimits& limits, unsigned fields) {
  detail::StoreCall::run(*impl_, [&](Store::Impl& s) REQUIRES(s.mu) {
    const std::string here = s.where() + ": setting the tenant's limits";
    s.require_writable("set the tenant's limits");
    const bool bytes = (fields & kTenantMaxBytes) != 0, idle = (fields & kTenantMaxIdle) != 0;
    if ((!bytes && !idle) || (fields & ~static_cast<unsigned>(kAllTenantLimits)) != 0)
      throw Error(ErrorCode::kInvalidArgument, here + ": fields " + std::to_string(fields) + " names no limit, or one unknown");
    if (bytes && limits.max_bytes && *limits.max_bytes < 0)
      throw Error(ErrorCode::kInvalidArgument, here + ": negative max_bytes " + std::to_string(*limits.max_bytes));
    if (idle && limits.max_idle_ms && *limits.max_idle_ms < 0)
      throw Error(ErrorCode::kInvalidArgument, here + ": negative max_idle_ms " + std::to_string(*limits.max_idle_ms));
    const auto txn = s.catalog().begin(detail::Catalog::Access::kWrite, here);
    // The kept field is read by the catalog under the tenant's lock: another
    // host's change to it since this one's last read is kept, not overwritten
    // with a stale value. A kept value out of range fails the call, undone.
    detail::checked_limits(s.catalog().set_tenant_limits(limits, fields), here);
    txn->commit();
  });
}

}  // namespace colikv
