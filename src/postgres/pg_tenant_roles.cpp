// A server role per tenant, kept apart by row-level security
// (migrations/postgres/0004_tenant_roles.sql; docs/postgres.md, "One role per
// tenant"): what Store::grant_tenant and Store::revoke_tenant run.
#include "postgres/pg_catalog.h"

namespace colikv {
namespace detail {

namespace {

// Row-level security is turned on for these at the first grant (before it
// the migration's policies are inert, so that a store that grants no tenant
// behaves as before for every role).
const char* const kPolicyTables[] = {"tenant_roles", "tenants", "models", "conversations", "chunks", "chunk_meta",
                                     "conversation_chunks", "chunks_to_free"};
// What a tenant's role reads and writes: its rows of these, under the
// policies (colikv_grant_tenant_writes, 0007_tenant_writes.sql, gives it
// no identity column).
const char* const kTenantTables = "models, conversations, chunks, chunk_meta, conversation_chunks, chunks_to_free";
// Read under the policies too: the views, once they read as their caller.
const char* const kReadTables =
    "tenants, tenant_roles, colikv_schema, conversation_summary, conversation_tokens, model_summary, tenant_summary";
const char* const kViews[] = {"conversation_summary", "conversation_tokens", "model_summary", "tenant_summary"};

std::string quoted_list(const char* const* names, size_t n) {
  std::string out = "{";
  for (size_t i = 0; i < n; ++i) out += (i ? "," : "") + std::string(names[i]);
  return out + "}";
}

}  // namespace

std::string PgCatalog::tenant_refusal_note() {
  // A role under the policies sees only the tenants granted to it: to it,
  // another tenant is not there, and it may create none.
  PgRows r = run("SELECT row_security_active('tenants')::int, current_user::text", PgParams(), "reading the tenant");
  if (r.int64(0, 0) == 0) return "";
  return " granted to role '" + r.text(0, 1) +
         "' (row-level security: the store's owner creates a tenant and grants it, colikv tenant --grant)";
}

void PgCatalog::set_tenant_role(const std::string& role, bool granted, int64_t now_ms) {
  const char* what = granted ? "granting the tenant" : "revoking the tenant";
  PgParams p;
  p.add(role).add(conn_.schema_name());
  PgRows r = run("SELECT current_setting('server_version_num')::int, pg_has_role(t.relowner, 'USAGE')::int, "
                 "pg_get_userbyid(t.relowner)::text, current_user::text, r.oid::bigint, "
                 "(r.rolsuper OR r.rolbypassrls OR pg_has_role(r.oid, t.relowner, 'USAGE'))::int, "
                 "quote_ident(r.rolname::text), quote_ident($2::text) "
                 "FROM pg_class t LEFT JOIN pg_roles r ON r.rolname = $1::text WHERE t.oid = 'conversations'::regclass",
                 p, what);
  // The views must read as the role that queries them (security_invoker,
  // PostgreSQL 15): as their owner's they would show it every tenant's rows.
  if (r.int64(0, 0) < 150000)
    conn_.raise(PgError(ErrorCode::kUnsupported, conn_.server() + ": tenant roles need PostgreSQL 15 or newer (server " +
                                               std::to_string(r.int64(0, 0)) + ")"));
  // GRANT by another role only warns; tenant_roles would refuse it anyway.
  if (r.int64(0, 1) == 0)
    conn_.raise(PgError(ErrorCode::kReadOnly, conn_.server() +
                                            ": only the store's owner grants tenants: its tables belong to role '" +
                                            r.text(0, 2) + "', this is role '" + r.text(0, 3) + "'"));
  if (r.is_null(0, 4)) conn_.raise(PgError(ErrorCode::kNotFound, conn_.server() + ": no such role '" + role + "'"));
  if (granted && r.int64(0, 5) != 0)
    conn_.raise(PgError(ErrorCode::kInvalidArgument,
                  conn_.server() + ": role '" + role +
                      "' sees every tenant anyway (a superuser, BYPASSRLS, or a member of the tables' owner '" +
                      r.text(0, 2) + "'): grant a role that row-level security applies to"));
  const int64_t role_oid = r.int64(0, 4);
  const std::string quoted_role = r.text(0, 6), quoted_schema = r.text(0, 7);

  PgParams g;
  g.add(tenant_id_).add(role_oid);
  if (!granted) {
    if (run("DELETE FROM tenant_roles WHERE tenant_id = $1 AND role_oid = $2::bigint::oid", g, what).affected() == 0)
      conn_.raise(PgError(ErrorCode::kNotFound, conn_.server() + ": role '" + role + "' holds no grant of this tenant"));
    PgParams o;
    o.add(role_oid);
    // Its last tenant of this store: the privileges the grants gave go too.
    if (run("SELECT count(*) FROM tenant_roles WHERE role_oid = $1::bigint::oid", o, what).int64(0, 0) == 0)
      conn_.exec("REVOKE ALL ON " + std::string(kTenantTables) + ", " + kReadTables + " FROM " + quoted_role +
                     "; REVOKE USAGE ON SCHEMA " + quoted_schema + " FROM " + quoted_role,
                 what);
    return;
  }
  g.add(now_ms);
  run("INSERT INTO tenant_roles (tenant_id, role_oid, granted_ms) VALUES ($1, $2::bigint::oid, $3) "
      "ON CONFLICT DO NOTHING",
      g, what);
  // Turned on once (each ALTER takes its table's exclusive lock).
  PgParams t;
  t.add(conn_.schema_oid()).add(quoted_list(kPolicyTables, sizeof kPolicyTables / sizeof *kPolicyTables));
  PgRows off = run("SELECT relname::text FROM pg_class WHERE relnamespace = $1::oid AND relname = ANY($2::text[]) "
                   "AND NOT relrowsecurity",
                   t, what);
  std::string ddl;
  for (int i = 0; i < off.size(); ++i) ddl += "ALTER TABLE " + off.text(i, 0) + " ENABLE ROW LEVEL SECURITY; ";
  for (const char* v : kViews) ddl += "ALTER VIEW " + std::string(v) + " SET (security_invoker = true); ";
  ddl += "GRANT USAGE ON SCHEMA " + quoted_schema + " TO " + quoted_role + "; ";
  ddl += "GRANT SELECT ON " + std::string(kReadTables) + " TO " + quoted_role;
  conn_.exec(ddl, what);
  PgParams w;
  w.add(role);
  run("SELECT colikv_grant_tenant_writes($1::text)::text", w, what);
}

}  // namespace detail
}  // namespace colikv
