// colikv tenant: one tenant's limits (quota, retention) and usage; sets them.
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

int cmd_tenant(const Args& a) {
  const std::string& store_path = a.positional[0];
  const std::string& name = a.positional[1];
  const bool sets = a.has("--max-bytes") || a.has("--max-idle");
  // Parsed before the store is opened: bad input changes nothing.
  std::optional<int64_t> max_bytes, max_idle_ms;
  if (a.has("--max-bytes")) max_bytes = parse_limit(a.value("--max-bytes"), "--max-bytes", parse_count);
  if (a.has("--max-idle")) max_idle_ms = parse_limit(a.value("--max-idle"), "--max-idle", parse_duration_ms);
  colikv::Options o = sets ? write_options(a) : read_options(a);
  o.tenant = name;
  // Limits may be set before the tenant's first conversation: the store must
  // exist, the tenant is made.
  if (sets) o.create_tenant_if_missing = true;
  colikv::Store store(store_path, o);
  if (sets) {
    colikv::TenantLimits l = store.tenant_limits();
    if (a.has("--max-bytes")) l.max_bytes = max_bytes;
    if (a.has("--max-idle")) l.max_idle_ms = max_idle_ms;
    store.set_tenant_limits(l);
  }
  const colikv::TenantInfo t = find_tenant(store, name);
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
  return {"tenant", "STORE NAME [--max-bytes N|none] [--max-idle DURATION|none] [--json]",
    "show or set one tenant's quota and retention",
    "Without options, shows the tenant's conversations, stored bytes and limits\n"
    "(read-only; an unknown tenant is an error). With --max-bytes or --max-idle,\n"
    "sets that limit (the other stays as it was; 'none' removes it), creating the\n"
    "tenant when the store lacks it, and shows the result. Limits are kept in\n"
    "the store and applied by every process from its next append into the tenant\n"
    "on (and by 'colikv gc --tenant NAME' at once), never by this command:\n"
    "  --max-bytes: after an append, the tenant's least recently used\n"
    "    conversations other than the one written are evicted (as gc evicts:\n"
    "    token ids kept) until the chunks its conversations use take at most N\n"
    "    bytes. Another tenant's conversations are never evicted by it.\n"
    "  --max-idle: conversations of the tenant not used for longer than that are\n"
    "    deleted whole, as rm deletes them: row, token ids and the chunks no\n"
    "    other conversation uses, erased from the store's files.\n",
    "  --max-bytes N       the tenant's byte quota (N >= 0), or none\n"
    "  --max-idle D        the tenant's retention: a whole number and a unit, s, m,\n"
    "                      h or d (90s, 15m, 12h, 30d), or none\n"
    "  --json              print as JSON\n",
    std::string("  store, ") + kTenantKeys + "\n",
    2, 2, {{"--max-bytes", true}, {"--max-idle", true}, {"--json", false}, {"--sync", true}, {"--busy-timeout", true}},
    cmd_tenant};
}

}  // namespace colikv_cli
