// colikv truncate: a conversation cut to its first tokens.
#include <cstdint>
#include <string>

#include "colikv/store.h"
#include "args.h"
#include "cli_output.h"
#include "commands.h"
#include "json.h"
#include "store_json.h"

namespace colikv_cli {
namespace {

int cmd_truncate(const Args& a) {
  int64_t len = parse_count(a.positional[2], "N");
  colikv::Store store(a.positional[0], write_options(a));
  const std::string& id = a.positional[1];
  int64_t before = store.count(id);
  store.truncate(id, len);
  if (a.has("--json")) {
    print(change_json(a)
              .set("id", Json::string(id))
              .set("tokens_before", Json::integer(before))
              .set("tokens", Json::integer(len))
              .dump());
    return kExitOk;
  }
  print("truncated '" + shown(id) + "' from " + std::to_string(before) + " to " + plural(len, "token", "tokens") + "\n");
  return kExitOk;
}

}  // namespace

CommandSpec truncate_command() {
  return {"truncate", "STORE ID N [--json]", "keep the first N tokens of a conversation",
    "Keeps the first N tokens (N <= the token count) and frees the chunks no other\n"
    "conversation uses.\n",
    "  --json              print as JSON\n",
    std::string("  ") + kChangeKeys + ", id, tokens_before, tokens (after)\n", 3, 3,
    {{"--json", false}, {"--sync", true}, {"--busy-timeout", true}, {"--tenant", true}}, cmd_truncate};
}

}  // namespace colikv_cli
