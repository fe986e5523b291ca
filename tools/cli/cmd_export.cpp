// colikv export: a conversation written as a .coli_kv file, or streamed to stdout.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "colikv/coli_kv.h"
#include "colikv/store.h"
#include "args.h"
#include "cli_output.h"
#include "commands.h"
#include "disk_full.h"
#include "json.h"
#include "progress.h"

namespace colikv_cli {
namespace {

// export STORE ID -: the file streamed to standard output, nothing else on it.
int export_to_stdout(const Args& a, colikv::Store& store, const std::string& id, colikv::ExportOptions& eo,
                     int64_t total_bytes) {
  if (a.has("--json")) throw UsageError{"--json cannot share standard output with the exported file"};
  if (isatty(STDOUT_FILENO)) throw Failure{"standard output is a terminal: redirect it to a file or a pipe"};
  std::fflush(stdout);
  Progress progress("export " + shown(id), total_bytes, progress_mode(a));
  eo.progress = progress.fn();
  try {
    colikv::export_coli_kv_to_fd(store, id, STDOUT_FILENO, eo);
  } catch (const colikv::Error& e) {
    // Standard output is full (/dev/full, a full disk behind a redirection):
    // nothing about the store's disk, which the main error handler would add.
    const std::string message = e.what(), library_name = "the output: ";
    if (e.code() != colikv::ErrorCode::kDiskFull || message.rfind(library_name, 0) != 0) throw;
    throw Failure{"standard output: " + message.substr(library_name.size()) + file_size_limit_note()};
  }
  return kExitOk;
}

// A full disk where OUT is written: the advice is about OUT's filesystem,
// not the store's (which the main error handler would give).
int64_t export_to_file(colikv::Store& store, const std::string& id, const std::string& out_path,
                       const colikv::ExportOptions& eo, int64_t file_bytes) {
  try {
    return colikv::export_coli_kv(store, id, out_path, eo);
  } catch (const colikv::Error& e) {
    const std::string message = e.what();
    if (e.code() != colikv::ErrorCode::kDiskFull || message.rfind(out_path + " (its temporary file ", 0) != 0) throw;
    throw Failure{message + file_disk_full_advice(out_path, file_bytes)};
  }
}

int cmd_export(const Args& a) {
  const std::string& store_path = a.positional[0];
  const std::string& id = a.positional[1];
  const std::string& out_path = a.positional[2];
  ProgressMode mode = progress_mode(a);
  colikv::Store store(store_path, read_options(a));
  colikv::ConversationInfo info = store.info(id);
  const int64_t record_bytes = info.model.record_bytes();
  const int64_t total_bytes = colikv::kColiKvHeaderBytes + info.tokens * record_bytes;

  colikv::ExportOptions eo;
  eo.force = a.has("--force");
  if (out_path == "-") return export_to_stdout(a, store, id, eo, total_bytes);
  int64_t bytes;
  {
    Progress progress("export " + shown(id), total_bytes, mode);
    eo.progress = progress.fn();
    bytes = export_to_file(store, id, out_path, eo, total_bytes);
  }
  int64_t tokens = record_bytes > 0 ? (bytes - colikv::kColiKvHeaderBytes) / record_bytes : 0;
  if (a.has("--json")) {
    Json j = Json::object();
    j.set("store", Json::string(colikv::shown_store_location(store_path)));
    j.set("id", Json::string(id));
    j.set("file", Json::string(out_path));
    j.set("tokens", Json::integer(tokens));
    j.set("bytes", Json::integer(bytes));
    print(j.dump());
    return kExitOk;
  }
  print("exported '" + shown(id) + "' to " + shown(out_path) + ": " + plural(tokens, "token", "tokens") + ", " +
        bytes_both(bytes) + "\n");
  return kExitOk;
}

}  // namespace

CommandSpec export_command() {
  return {"export", "STORE ID OUT.coli_kv|- [--force] [--json]", "write a conversation as a .coli_kv file",
    "Writes exactly the bytes the engine would have written (header, records in its\n"
    "layout, count), through a temporary file .colikv-export-XXXXXX in OUT's\n"
    "directory that is synced and renamed, so a crash never leaves a partial file\n"
    "under OUT.coli_kv; one left by an export killed midway is removed by the next\n"
    "export into that directory. A symbolic link at OUT is kept and its target\n"
    "replaced. OUT must not be the store or one of its -wal, -shm, -journal files,\n"
    "nor anything but a regular file (a FIFO, a device). OUT - streams the file to\n"
    "standard output (not a terminal), with nothing else on it. The store is\n"
    "opened read-only.\n",
    "  --force             overwrite OUT.coli_kv if it exists (default: refuse, as\n"
    "                      for a symbolic link to a missing file)\n"
    "  --json              print the result as JSON\n",
    "  store, id, file, tokens, bytes (of the file written)\n", 3, 3,
    {{"--force", false}, {"--json", false}, {"--progress", false}, {"--quiet", false}, {"--busy-timeout", true}, {"--tenant", true}},
    cmd_export};
}

}  // namespace colikv_cli
