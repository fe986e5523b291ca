// colikv vacuum: the store's free space given back to the filesystem.
#include <string>

#include "colikv/maintenance.h"
#include "colikv/store.h"
#include "args.h"
#include "cli_output.h"
#include "commands.h"
#include "json.h"
#include "progress.h"

namespace colikv_cli {
namespace {

int cmd_vacuum(const Args& a) {
  const std::string& store_path = a.positional[0];
  colikv::Store store(store_path, write_options(a));
  colikv::VacuumReport r;
  {
    Progress p("vacuum: giving free space back", store_file_bytes(store_path), progress_mode(a), "bytes");
    r = colikv::vacuum(store, p.fn());
  }
  // Space held back (a reader's snapshot) is no error of the store, but the
  // file did not follow: a script sees it in the exit status.
  const int status = r.held_back.empty() ? kExitOk : kExitFailure;
  if (a.has("--json")) {
    Json j = Json::object();
    j.set("store", Json::string(colikv::shown_store_location(store_path)));
    j.set("file_bytes_before", Json::integer(r.file_bytes_before));
    j.set("file_bytes_after", Json::integer(r.file_bytes_after));
    j.set("reclaimable_bytes", r.reclaimable_bytes < 0 ? Json::null() : Json::integer(r.reclaimable_bytes));
    j.set("held_back", r.held_back.empty() ? Json::null() : Json::string(r.held_back));
    print(j.dump());
    return status;
  }
  std::string out = "file size " + bytes_both(r.file_bytes_before) + " -> " + bytes_both(r.file_bytes_after);
  if (r.reclaimable_bytes >= 0) out += "; " + bytes_both(r.reclaimable_bytes) + " of it was free inside the store";
  out += "\n";
  if (!r.held_back.empty()) out += "not shrunk to what it holds: " + shown(r.held_back) + "\n";
  print(out);
  return status;
}

}  // namespace

CommandSpec vacuum_command() {
  return {"vacuum", "STORE [--json]", "give the store's free space back to the filesystem",
    "Gives the free pages back in steps of about a chunk (a writer waits for one\n"
    "step at most), then copies the WAL back and resets it without waiting for a\n"
    "reader. A store made by an older colikv is rewritten once instead (VACUUM,\n"
    "needing free disk space about twice its size), which turns the steps on.\n"
    "Exits 1, saying why, when a reader's snapshot keeps the space in the files.\n",
    "  --json              print as JSON\n",
    "  store, file_bytes_before, file_bytes_after (database plus WAL), reclaimable_bytes\n"
    "  (free inside the store before; null: not known), held_back (null, or why the\n"
    "  files were not cut)\n",
    1, 1, {{"--json", false}, {"--progress", false}, {"--quiet", false}, {"--sync", true}, {"--busy-timeout", true},
           {"--tenant", true}}, cmd_vacuum};
}

}  // namespace colikv_cli
