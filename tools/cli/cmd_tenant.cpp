// colikv tenant: one tenant's settings: its limits (quota, retention) and
// usage, shown or set; --grant and --revoke give a server role that tenant
// under PostgreSQL's row-level security.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "colikv/store.h"
#include "args.h"
#include "cli_output.h"
#include "commands.h"
#include "json.h"
#include "store_json.h"
#include "table.h"

namespace colikv_cli {
namespace {

// The tenant's row of Store::tenants (the handle is the tenant's, so it is there).
colikv::TenantInfo find_tenant(colikv::Store& store, const std::string& name) {
  for (colikv::TenantInfo& t : store.tenants())
    if (t.name == name) return std::move(t);
  throw Failure{"no such tenant '" + shown(name) + "'"};
}

int grant_or_revoke(const Args& a, colikv::Store& store, const std::string& store_path, const std::string& tenant) {
  const bool grant = a.has("--grant");
  const std::string& role = a.value(grant ? "--grant" : "--revoke");
  if (grant)
    store.grant_tenant(role);
  else
    store.revoke_tenant(role);
  if (a.has("--json")) {
    Json j = Json::object();
    j.set("store", Json::string(colikv::shown_store_location(store_path)));
    j.set("tenant", Json::string(tenant));
    j.set(grant ? "granted" : "revoked", Json::string(role));
    print(j.dump());
    return kExitOk;
  }
  const std::string shown_tenant = tenant.empty() ? "\"\"" : "'" + shown(tenant) + "'";
  print(grant ? "granted tenant " + shown_tenant + " to role '" + shown(role) + "'\n"
              : "revoked tenant " + shown_tenant + " from role '" + shown(role) + "'\n");
  return kExitOk;
}

int cmd_tenant(const Args& a) {
  const std::string& store_path = a.positional[0];
  const std::string& tenant = a.positional[1];
  const bool grant = a.has("--grant"), revoke = a.has("--revoke");
  const bool roles = grant || revoke;
  const bool sets = a.has("--max-bytes") || a.has("--max-idle");
  // Checked and parsed before the store is opened: bad input changes nothing.
  if (grant && revoke) throw UsageError{"give one of --grant ROLE and --revoke ROLE"};
  if (roles && sets) throw UsageError{"--grant/--revoke and --max-bytes/--max-idle go in separate calls"};
  if (roles && a.value(grant ? "--grant" : "--revoke").empty())
    throw UsageError{std::string("the role after ") + (grant ? "--grant" : "--revoke") + " is empty"};
  std::optional<int64_t> max_bytes, max_idle_ms;
  if (a.has("--max-bytes")) max_bytes = parse_limit(a.value("--max-bytes"), "--max-bytes", parse_size);
  if (a.has("--max-idle")) max_idle_ms = parse_limit(a.value("--max-idle"), "--max-idle", parse_duration_ms);
  colikv::Options o = roles || sets ? write_options(a) : read_options(a);
  o.tenant = tenant;
  if (roles || sets) o.create_tenant_if_missing = a.has("--create");
  colikv::Store store(store_path, o);
  if (roles) return grant_or_revoke(a, store, store_path, tenant);
  if (sets) {
    // Only the limits given are replaced, in the library's one transaction:
    // an operator setting the other limit at the same time keeps theirs.
    const unsigned fields = (a.has("--max-bytes") ? colikv::kTenantMaxBytes : 0u) |
                            (a.has("--max-idle") ? colikv::kTenantMaxIdle : 0u);
    store.set_tenant_limits({max_bytes, max_idle_ms}, fields);
  }
  const colikv::TenantInfo t = find_tenant(store, tenant);
  if (a.has("--json")) {
    Json j = tenant_json(t);
    j.set("store", Json::string(colikv::shown_store_location(store_path)));
    print(j.dump());
    return kExitOk;
  }
  Table table({"TENANT", "CONVERSATIONS", "STORED", "MAX BYTES", "MAX IDLE"}, {false, true, true, true, true});
  table.add(tenant_row(t));
  print(table.render());
  return kExitOk;
}

}  // namespace

CommandSpec tenant_command() {
  return {"tenant",
    "STORE NAME [--max-bytes N|none] [--max-idle DURATION|none] [--create] [--json]\n"
    "       colikv tenant STORE NAME (--grant ROLE | --revoke ROLE) [--create] [--json]",
    "show or set one tenant's quota and retention; its server roles (PostgreSQL)",
    "Without options, shows the tenant's conversations, stored bytes and limits\n"
    "(read-only; an unknown tenant is an error). With --max-bytes or --max-idle,\n"
    "sets that limit (the other stays as it was; 'none' removes it) and shows the\n"
    "result. Limits are kept in the store and applied by every process from its\n"
    "next append into the tenant on (and by 'colikv gc --tenant NAME' at once),\n"
    "never by this command:\n"
    "  --max-bytes: after an append, the tenant's least recently used\n"
    "    conversations other than the one written are evicted (as gc evicts:\n"
    "    token ids kept) until the chunks its conversations use take at most N\n"
    "    bytes. Another tenant's conversations are never evicted by it.\n"
    "  --max-idle: conversations of the tenant not used for longer than that are\n"
    "    deleted whole, as rm deletes them: row, token ids and the chunks no\n"
    "    other conversation uses, erased from the store's files.\n"
    "--grant lets the PostgreSQL role ROLE read and write tenant NAME and no other:\n"
    "row-level security keeps the other tenants' rows from it, whatever client it\n"
    "uses (psql too). Run it as the store's owner, who still sees every tenant.\n"
    "--revoke takes the tenant back; a role left with no tenant of the store loses\n"
    "its privileges on the store's tables. A SQLite store has no roles:\n"
    "'unsupported'. See docs/postgres.md, \"One role per tenant\".\n"
    "A tenant the store does not hold is refused by a change unless --create.\n",
    "  --max-bytes N       the tenant's byte quota (N >= 0; a size: 512MiB, 1G), or\n"
    "                      none\n"
    "  --max-idle D        the tenant's retention: a whole number and a unit, s, m,\n"
    "                      h or d (90s, 15m, 12h, 30d), or none\n"
    "  --grant ROLE        let ROLE use the tenant (an existing role, not the owner)\n"
    "  --revoke ROLE       no longer\n"
    "  --create            create the tenant NAME when the store does not hold it\n"
    "  --json              print as JSON\n",
    std::string("  store, ") + kTenantKeys + "; with --grant or --revoke: store, tenant,\n"
    "  and granted or revoked (the role)\n",
    2, 2, {{"--max-bytes", true}, {"--max-idle", true}, {"--grant", true}, {"--revoke", true}, {"--create", false},
           {"--json", false}, {"--sync", true}, {"--busy-timeout", true}},
    cmd_tenant};
}

}  // namespace colikv_cli
