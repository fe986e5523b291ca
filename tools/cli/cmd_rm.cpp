// colikv rm: conversations deleted, one id after another.
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "colikv/error.h"
#include "colikv/store.h"
#include "args.h"
#include "cli_output.h"
#include "commands.h"
#include "json.h"
#include "store_json.h"

namespace colikv_cli {
namespace {

struct Removed {
  std::string id;
  int64_t tokens;
};
struct NotRemoved {
  std::string id;
  std::string error;
};

// Each id is removed in its own transaction, as `rm FILE...` removes each
// file: an id the store does not hold (or an invalid one) is reported and the
// others still go. An error of the store itself (busy, I/O, disk full) stops
// at that id: the ones before it are removed, and the message says how many.
int cmd_rm(const Args& a) {
  colikv::Store store(a.positional[0], write_options(a));
  std::vector<Removed> removed;
  std::vector<NotRemoved> failed;
  for (size_t i = 1; i < a.positional.size(); ++i) {
    const std::string& id = a.positional[i];
    try {
      const int64_t n = store.count(id);
      store.remove(id);
      removed.push_back({id, n});
    } catch (const colikv::Error& e) {
      if (e.code() != colikv::ErrorCode::kNotFound && e.code() != colikv::ErrorCode::kInvalidArgument) {
        if (removed.empty()) throw;
        throw colikv::Error(e.code(), std::string(e.what()) + " (removed before it: " +
                                          plural(static_cast<int64_t>(removed.size()), "conversation", "conversations") +
                                          "; not tried: the ids from '" + id + "' on)");
      }
      failed.push_back({id, e.what()});
    }
  }
  if (a.has("--json")) {
    Json j = change_json(a);
    Json done = Json::array();
    for (const auto& r : removed) done.push(Json::object().set("id", Json::string(r.id)).set("tokens", Json::integer(r.tokens)));
    j.set("removed", std::move(done));
    Json not_done = Json::array();
    for (const auto& f : failed) not_done.push(Json::object().set("id", Json::string(f.id)).set("error", Json::string(f.error)));
    j.set("failed", std::move(not_done));
    print(j.dump());
  } else {
    std::string out;
    for (const auto& r : removed) out += "removed '" + shown(r.id) + "' (" + plural(r.tokens, "token", "tokens") + ")\n";
    print(out);
    // After stdout, one line each on stderr, as the tool's errors are.
    std::fflush(stdout);
    for (const auto& f : failed) std::fprintf(stderr, "colikv: rm: %s\n", shown(f.error).c_str());
  }
  return failed.empty() ? kExitOk : kExitFailure;
}

}  // namespace

CommandSpec rm_command() {
  return {"rm", "STORE ID... [--json]", "delete conversations",
    "Deletes each conversation named, and frees the chunks no other conversation\n"
    "uses. Each id is deleted in a transaction of its own, as rm deletes files:\n"
    "an id the store does not hold is reported (exit 1) and the others are still\n"
    "deleted; an error of the store itself (busy, I/O, disk full) stops there,\n"
    "saying how many were deleted before it.\n"
    "On a SQLite store, once it returns none of the deleted bytes is left in the\n"
    "store's files (-wal included), even with other processes holding it open;\n"
    "a reader inside a read transaction begun before keeps them until it ends it\n"
    "(rm waits --busy-timeout for it), and the next rm, gc or close after that\n"
    "erases them. On PostgreSQL the server keeps them in free space until\n"
    "colikv vacuum, and in its WAL (docs/postgres.md).\n",
    "  --json              print as JSON\n",
    std::string("  ") + kChangeKeys + ", removed[] ({id, tokens}: deleted, in the order given),\n"
    "  failed[] ({id, error}: not deleted, and why)\n",
    2, SIZE_MAX, {{"--json", false}, {"--sync", true}, {"--busy-timeout", true}, {"--tenant", true}}, cmd_rm};
}

}  // namespace colikv_cli
