// colikv tenants: each tenant of a store, its conversations and stored bytes.
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

int cmd_tenants(const Args& a) {
  const std::string& store_path = a.positional[0];
  colikv::Store store(store_path, read_options(a));
  const std::vector<colikv::TenantInfo> all = store.tenants();
  if (a.has("--json")) {
    Json list = Json::array();
    for (const auto& t : all) list.push(tenant_json(t));
    Json j = Json::object();
    j.set("store", Json::string(colikv::shown_store_location(store_path)));
    j.set("tenants", std::move(list));
    print(j.dump());
    return kExitOk;
  }
  Table t({"TENANT", "CONVERSATIONS", "STORED", "MAX BYTES", "MAX IDLE"}, {false, true, true, true, true});
  for (const auto& x : all) t.add(tenant_row(x));
  print(t.render());
  return kExitOk;
}

}  // namespace

CommandSpec tenants_command() {
  return {"tenants", "STORE [--json]", "list the store's tenants with their conversations, stored bytes and limits",
    "Lists every tenant (sharing domain) of the store, by name, with its number of\n"
    "conversations, the stored bytes of the chunks they use (tenants share no\n"
    "chunk), and its quota and retention ('colikv tenant'; - when none). The\n"
    "default tenant is shown as \"\". The store is opened read-only.\n"
    "On PostgreSQL a tenant's role (colikv tenant --grant) sees only its own\n"
    "tenants, and opens one of them: --tenant NAME.\n",
    "  --json              print as JSON\n",
    std::string("  store, tenants[] each with ") + kTenantKeys + "\n",
    1, 1, {{"--json", false}, {"--busy-timeout", true}, {"--tenant", true}}, cmd_tenants};
}

}  // namespace colikv_cli
