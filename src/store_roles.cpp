// Store::grant_tenant and Store::revoke_tenant: a server role per tenant
// (catalog_maintenance.h, TenantRoles; docs/postgres.md).
#include "store_impl.h"

#include "backend_error.h"
#include "core/text_argument.h"
#include "store_call.h"

namespace colikv {

namespace {

void set_tenant_role(Store::Impl& s, const std::string& role, bool granted) {
  // where() names the tenant, but not the default one.
  const std::string op = std::string(granted ? "granting" : "revoking") +
                         (s.options.tenant.empty() ? " the default tenant \"\"" : " the tenant") +
                         (granted ? " to" : " from") + " role '" + role + "'";
  detail::require_no_nul(role, "role", s.where());
  if (role.empty()) throw Error(ErrorCode::kInvalidArgument, s.where() + ": " + op + ": the role name is empty");
  s.require_writable(op);
  const std::string here = s.where() + ": " + op;
  detail::TenantRoles* roles = s.catalog->tenant_roles();
  // SQLite, the one backend without roles: whoever reads the file reads every
  // tenant, so its file mode is all the access control there is.
  if (!roles)
    throw Error(ErrorCode::kUnsupported,
                here + ": tenant roles need a PostgreSQL store: a SQLite store has no server roles (its file mode, "
                       "Options::file_mode, decides who reads every tenant)");
  const auto txn = s.catalog->begin(detail::Catalog::Access::kWrite, here);
  detail::with_context(here, [&] { roles->set_tenant_role(role, granted, detail::now_ms()); });
  txn->commit();
}

}  // namespace

void Store::grant_tenant(const std::string& role) {
  detail::StoreCall call(*impl_);
  set_tenant_role(*impl_, role, true);
}

void Store::revoke_tenant(const std::string& role) {
  detail::StoreCall call(*impl_);
  set_tenant_role(*impl_, role, false);
}

}  // namespace colikv
