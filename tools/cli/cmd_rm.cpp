// colikv rm: a conversation deleted.
#include <cstdint>
#include <string>

#include "colikv/store.h"
#include "args.h"
#include "cli_output.h"
#include "commands.h"

namespace colikv_cli {
namespace {

int cmd_rm(const Args& a) {
  colikv::Store store(a.positional[0], write_options(a));
  const std::string& id = a.positional[1];
  int64_t n = store.count(id);
  store.remove(id);
  print("removed '" + shown(id) + "' (" + plural(n, "token", "tokens") + ")\n");
  return kExitOk;
}

}  // namespace

CommandSpec rm_command() {
  return {"rm", "STORE ID", "delete a conversation",
    "Deletes the conversation and frees the chunks no other conversation uses.\n"
    "On a SQLite store, once it returns none of the deleted bytes is left in the\n"
    "store's files (-wal included), even with other processes holding it open;\n"
    "a reader inside a read transaction begun before keeps them until it ends it\n"
    "(rm waits --busy-timeout for it), and the next rm, gc or close after that\n"
    "erases them. On PostgreSQL the server keeps them in free space until\n"
    "colikv vacuum, and in its WAL (docs/postgres.md).\n", "", "", 2, 2,
    {{"--sync", true}, {"--busy-timeout", true}, {"--tenant", true}}, cmd_rm};
}

}  // namespace colikv_cli
