// colikv tenant: one tenant's settings; --grant and --revoke give a server
// role that tenant under PostgreSQL's row-level security.
#include <string>

#include "colikv/store.h"
#include "args.h"
#include "cli_output.h"
#include "commands.h"
#include "json.h"

namespace colikv_cli {
namespace {

int cmd_tenant(const Args& a) {
  const std::string& store_path = a.positional[0];
  const std::string& tenant = a.positional[1];
  const bool grant = a.has("--grant"), revoke = a.has("--revoke");
  if (grant == revoke) throw UsageError{"give one of --grant ROLE and --revoke ROLE"};
  const std::string& role = a.value(grant ? "--grant" : "--revoke");
  if (role.empty()) throw UsageError{std::string("the role after ") + (grant ? "--grant" : "--revoke") + " is empty"};
  colikv::Options o = write_options(a);
  o.tenant = tenant;
  o.create_tenant_if_missing = a.has("--create");
  colikv::Store store(store_path, o);
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

}  // namespace

CommandSpec tenant_command() {
  return {"tenant", "STORE NAME (--grant ROLE | --revoke ROLE) [--create] [--json]",
    "change one tenant: its server roles (PostgreSQL)",
    "--grant lets the PostgreSQL role ROLE read and write tenant NAME and no other:\n"
    "row-level security keeps the other tenants' rows from it, whatever client it\n"
    "uses (psql too). Run it as the store's owner, who still sees every tenant.\n"
    "--revoke takes the tenant back; a role left with no tenant of the store loses\n"
    "its privileges on the store's tables. A tenant the store does not hold is\n"
    "refused unless --create. A SQLite store has no roles: 'unsupported'.\n"
    "See docs/postgres.md, \"One role per tenant\".\n",
    "  --grant ROLE        let ROLE use the tenant (an existing role, not the owner)\n"
    "  --revoke ROLE       no longer\n"
    "  --create            create the tenant NAME when the store does not hold it\n"
    "  --json              print as JSON\n",
    "  store, tenant, and granted or revoked (the role)\n",
    2, 2, {{"--grant", true}, {"--revoke", true}, {"--create", false}, {"--json", false}, {"--busy-timeout", true}},
    cmd_tenant};
}

}  // namespace colikv_cli
