// colikv tenants: each tenant of a store, its conversations and stored bytes.
#include <string>
#include <utility>

#include "colikv/store.h"
#include "args.h"
#include "cli_output.h"
#include "commands.h"
#include "json.h"
#include "table.h"

namespace colikv_cli {
namespace {

int cmd_tenants(const Args& a) {
  const std::string& store_path = a.positional[0];
  colikv::Store store(store_path, read_options(a));
  const std::vector<colikv::TenantInfo> all = store.tenants();
  if (a.has("--json")) {
    Json list = Json::array();
    for (const auto& t : all) {
      Json j = Json::object();
      j.set("name", Json::string(t.name));
      j.set("conversations", Json::integer(t.conversations));
      j.set("stored_bytes", Json::integer(t.stored_bytes));
      list.push(std::move(j));
    }
    Json j = Json::object();
    j.set("store", Json::string(colikv::shown_store_location(store_path)));
    j.set("tenants", std::move(list));
    print(j.dump());
    return kExitOk;
  }
  Table t({"TENANT", "CONVERSATIONS", "STORED"}, {false, true, true});
  // The default tenant's name is empty: shown as "" so that its row is seen.
  for (const auto& x : all)
    t.add({x.name.empty() ? "\"\"" : shown(x.name), std::to_string(x.conversations), bytes_both(x.stored_bytes)});
  print(t.render());
  return kExitOk;
}

}  // namespace

CommandSpec tenants_command() {
  return {"tenants", "STORE [--json]", "list the store's tenants with their conversations and stored bytes",
    "Lists every tenant (sharing domain) of the store, by name, with its number of\n"
    "conversations and the stored bytes of the chunks they use (tenants share no\n"
    "chunk). The default tenant is shown as \"\". The store is opened read-only.\n"
    "On PostgreSQL a tenant's role (colikv tenant --grant) sees only its own\n"
    "tenants, and opens one of them: --tenant NAME.\n",
    "  --json              print as JSON\n",
    "  store, tenants[] each with name (\"\" for the default tenant), conversations,\n"
    "  stored_bytes\n",
    1, 1, {{"--json", false}, {"--busy-timeout", true}, {"--tenant", true}}, cmd_tenants};
}

}  // namespace colikv_cli
