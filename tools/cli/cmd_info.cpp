// colikv info: one conversation.
#include <string>

#include "colikv/store.h"
#include "args.h"
#include "cli_output.h"
#include "commands.h"
#include "store_json.h"
#include "table.h"

namespace colikv_cli {
namespace {

int cmd_info(const Args& a) {
  const std::string& store_path = a.positional[0];
  colikv::Store store(store_path, read_options(a));
  colikv::ConversationInfo c = store.info(a.positional[1]);
  if (a.has("--json")) {
    print(conversation_json(c).dump());
    return kExitOk;
  }
  KeyValues kv;
  kv.add("id", shown(c.id));
  kv.add("model", shown(c.model.to_string()));
  kv.add("tokens", std::to_string(c.tokens));
  kv.add("record size", std::to_string(c.model.record_bytes()) + " B");
  kv.add("raw size", bytes_both(c.raw_bytes));
  kv.add("stored size", bytes_both(c.stored_bytes));
  kv.add("ratio", ratio_text(c.raw_bytes, c.stored_bytes));
  if (c.evicted) kv.add("evicted", "yes: KV data was evicted under the byte budget; the token ids are kept");
  kv.add("title", c.title.empty() ? "-" : shown(c.title));
  kv.add("metadata", shown(c.metadata));
  kv.add("forked from", c.parent.empty() ? "-" : shown(c.parent) + " at " + plural(c.forked_at, "token", "tokens"));
  kv.add("created", format_time(c.created_ms, false) + " UTC");
  kv.add("updated", format_time(c.updated_ms, false) + " UTC");
  kv.add("last used", format_time(c.last_used_ms, false) + " UTC");
  print(kv.render());
  return kExitOk;
}

}  // namespace

CommandSpec info_command() {
  return {"info", "STORE ID [--json]", "show one conversation",
    "Shows the conversation's model, tokens, sizes, title, metadata, fork parent and\n"
    "times. The store is opened read-only.\n",
    "  --json              print as JSON\n", std::string(kConversationKeys) + kModelKeys, 2, 2,
    {{"--json", false}, {"--busy-timeout", true}, {"--tenant", true}}, cmd_info};
}

}  // namespace colikv_cli
