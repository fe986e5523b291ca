// colikv vacuum: the store's free space given back to the filesystem.
#include <string>

#include "colikv/store.h"
#include "args.h"
#include "cli_output.h"
#include "commands.h"
#include "json.h"

namespace colikv_cli {
namespace {

int cmd_vacuum(const Args& a) {
  const std::string& store_path = a.positional[0];
  colikv::Store store(store_path, write_options(a));
  colikv::VacuumReport r = store.vacuum();
  if (a.has("--json")) {
    Json j = Json::object();
    j.set("store", Json::string(colikv::shown_store_location(store_path)));
    j.set("file_bytes_before", Json::integer(r.file_bytes_before));
    j.set("file_bytes_after", Json::integer(r.file_bytes_after));
    print(j.dump());
    return kExitOk;
  }
  print("file size " + bytes_both(r.file_bytes_before) + " -> " + bytes_both(r.file_bytes_after) + "\n");
  return kExitOk;
}

}  // namespace

CommandSpec vacuum_command() {
  return {"vacuum", "STORE [--json]", "give the store's free space back to the filesystem",
    "Rewrites the file without its free pages (SQLite's VACUUM) and truncates the\n"
    "WAL. Needs free disk space about the size of the store.\n",
    "  --json              print as JSON\n", "  store, file_bytes_before, file_bytes_after (database plus WAL)\n",
    1, 1, {{"--json", false}, {"--sync", true}, {"--busy-timeout", true}}, cmd_vacuum};
}

}  // namespace colikv_cli
