// colikv fork: a new conversation from the first tokens of another.
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

int cmd_fork(const Args& a) {
  int64_t at = a.has("--at") ? parse_count(a.value("--at"), "--at") : -1;
  colikv::Store store(a.positional[0], write_options(a));
  store.fork(a.positional[1], a.positional[2], at);
  int64_t n = store.count(a.positional[2]);
  if (a.has("--json")) {
    print(change_json(a)
              .set("id", Json::string(a.positional[2]))
              .set("forked_from", Json::string(a.positional[1]))
              .set("tokens", Json::integer(n))
              .dump());
    return kExitOk;
  }
  print("forked '" + shown(a.positional[1]) + "' into '" + shown(a.positional[2]) + "' at " + plural(n, "token", "tokens") + "\n");
  return kExitOk;
}

}  // namespace

CommandSpec fork_command() {
  return {"fork", "STORE SRC NEW [--at N] [--json]", "create NEW from the first N tokens of SRC",
    "Creates the conversation NEW holding the first N tokens of SRC (default: all),\n"
    "sharing SRC's chunks instead of copying them.\n",
    "  --at N              take the first N tokens (N <= SRC's token count)\n"
    "  --json              print as JSON\n",
    std::string("  ") + kChangeKeys + ", id (NEW), forked_from (SRC), tokens (NEW's)\n", 3, 3,
    {{"--at", true}, {"--json", false}, {"--sync", true}, {"--busy-timeout", true}, {"--tenant", true}}, cmd_fork};
}

}  // namespace colikv_cli
