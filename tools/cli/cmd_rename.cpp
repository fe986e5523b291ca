// colikv rename: a conversation renamed.
#include <string>

#include "colikv/store.h"
#include "args.h"
#include "cli_output.h"
#include "commands.h"
#include "json.h"
#include "store_json.h"

namespace colikv_cli {
namespace {

int cmd_rename(const Args& a) {
  colikv::Store store(a.positional[0], write_options(a));
  store.rename(a.positional[1], a.positional[2]);
  if (a.has("--json")) {
    print(change_json(a).set("id", Json::string(a.positional[2])).set("old_id", Json::string(a.positional[1])).dump());
    return kExitOk;
  }
  print("renamed '" + shown(a.positional[1]) + "' to '" + shown(a.positional[2]) + "'\n");
  return kExitOk;
}

}  // namespace

CommandSpec rename_command() {
  return {"rename", "STORE OLD NEW [--json]", "rename a conversation",
    "Gives the conversation OLD the id NEW, which must be free.\n",
    "  --json              print as JSON\n", std::string("  ") + kChangeKeys + ", id (NEW), old_id (OLD)\n", 3, 3,
    {{"--json", false}, {"--sync", true}, {"--busy-timeout", true}, {"--tenant", true}}, cmd_rename};
}

}  // namespace colikv_cli
