// colikv copy: conversations from one store to another (SQLite to PostgreSQL
// and back), each checked byte for byte on both sides.
#include <cstdint>
#include <string>
#include <vector>

#include "colikv/copy.h"
#include "colikv/store.h"
#include "args.h"
#include "cli_output.h"
#include "commands.h"
#include "json.h"
#include "progress.h"

namespace colikv_cli {
namespace {

// The ids to copy: those named, or every conversation of the source.
std::vector<std::string> ids_to_copy(const Args& a, colikv::Store& src) {
  if (a.positional.size() > 2) return std::vector<std::string>(a.positional.begin() + 2, a.positional.end());
  std::vector<std::string> ids;
  colikv::ListOptions page;
  page.limit = 1000;
  for (;; page.offset += page.limit) {
    const auto rows = src.list(page);
    for (const auto& r : rows) ids.push_back(r.id);
    if (static_cast<int64_t>(rows.size()) < page.limit) return ids;
  }
}

struct Copied {
  Json conversations = Json::array();
  int64_t tokens = 0, copied = 0, skipped = 0;
};

// Copies ids from src into the store at dst_path opened with dst_options; a
// store opened with Options::create_staged is published once every copy is
// verified, and its text lines are printed only then (before, it is no store).
Copied copy_into(const Args& a, colikv::Store& src, const std::string& dst_path, const colikv::Options& dst_options,
                 const std::vector<std::string>& ids) {
  colikv::Store dst(dst_path, dst_options);
  Copied out;
  std::string lines;
  for (const std::string& id : ids) {
    colikv::CopyOptions co;
    co.skip_existing = a.has("--skip-existing");
    Progress progress("copy " + shown(id), src.count(id), progress_mode(a));
    co.progress = progress.fn();
    const colikv::CopyResult r = colikv::copy_conversation(src, dst, id, co);
    (r.skipped ? out.skipped : out.copied) += 1;
    const colikv::VerifyReport check = dst.verify(id);
    if (!check.ok())
      throw Failure{colikv::shown_store_location(dst_path) + " conversation '" + id + "': verify after the copy: " +
                    check.problems.front().what};
    out.tokens += r.tokens;
    Json j = Json::object();
    j.set("id", Json::string(r.id));
    j.set("tokens", Json::integer(r.tokens));
    j.set("records_sha256", Json::string(r.records_sha256));
    j.set("evicted_from", r.evicted_from < 0 ? Json::null() : Json::integer(r.evicted_from));
    j.set("skipped", Json::boolean(r.skipped));
    out.conversations.push(j);
    if (!a.has("--json")) {
      const std::string values =
          r.evicted_from < 0 ? ""
                             : "; its KV values from position " + std::to_string(r.evicted_from) +
                                   " on were evicted in the source and are missing in the copy too (records SHA-256 of the " +
                                   std::to_string(r.evicted_from) + " before)";
      const std::string line = std::string(r.skipped ? "skipped '" : "copied '") + shown(r.id) + "': " +
                               plural(r.tokens, "token", "tokens") + ", records SHA-256 " + r.records_sha256 +
                               " on both sides" + (r.skipped ? ", the same conversation there already" : "") +
                               values + "\n";
      if (dst_options.create_staged)
        lines += line;
      else
        print(line);
    }
  }
  if (dst_options.create_staged) dst.publish();
  if (!lines.empty()) print(lines);
  return out;
}

int cmd_copy(const Args& a) {
  const std::string& src_path = a.positional[0];
  const std::string& dst_path = a.positional[1];
  colikv::Store src(src_path, read_options(a));
  const std::vector<std::string> ids = ids_to_copy(a, src);
  // An id SRC lacks fails here, before DST exists: not after creating it empty.
  for (const std::string& id : ids) src.info(id);  // kNotFound naming the id
  colikv::Options dst_options = base_options(a);
  dst_options.create_if_missing = true;
  if (a.has("--to-tenant")) dst_options.tenant = a.value("--to-tenant");
  // A DST file this copy creates appears whole or not at all: a copy that
  // fails leaves no store, and one another process creates meanwhile is
  // copied into instead.
  Copied c;
  bool done = false;
  if (is_new_store_file(dst_path)) {
    colikv::Options fresh = dst_options;
    fresh.create_staged = true;
    try {
      c = copy_into(a, src, dst_path, fresh, ids);
      done = true;
    } catch (const colikv::Error& e) {
      if (e.code() != colikv::ErrorCode::kConflict || is_new_store_file(dst_path)) throw;
    }
  }
  if (!done) c = copy_into(a, src, dst_path, dst_options, ids);

  if (a.has("--json")) {
    Json j = Json::object();
    j.set("source", Json::string(colikv::shown_store_location(src_path)));
    j.set("destination", Json::string(colikv::shown_store_location(dst_path)));
    j.set("conversations", c.conversations);
    j.set("tokens", Json::integer(c.tokens));
    j.set("copied", Json::integer(c.copied));
    j.set("skipped", Json::integer(c.skipped));
    print(j.dump());
  } else if (ids.empty()) {
    print("no conversations in " + shown(colikv::shown_store_location(src_path)) + "\n");
  } else {
    print(plural(c.copied, "conversation", "conversations") + " copied, " + std::to_string(c.skipped) +
          " skipped as there already\n");
  }
  return kExitOk;
}

}  // namespace

CommandSpec copy_command() {
  return {"copy", "SRC DST [ID...] [--json]", "copy conversations to another store (SQLite or PostgreSQL)",
    "Copies the conversations named (default: all of SRC) into DST, created if\n"
    "missing, under the same ids, with their models, precision, title and\n"
    "metadata: each in one transaction of DST, streaming a few chunks at a time\n"
    "from one read snapshot of SRC. Chunks DST holds already are stored once.\n"
    "Each copy is read back from both stores and compared byte for byte (records\n"
    "SHA-256, up to the first evicted position), then verified in DST. A\n"
    "conversation whose KV data was evicted is copied as it is: rows, metadata\n"
    "and token ids, its evicted values missing in DST too. An id DST has already\n"
    "is refused (nothing is overwritten; conversations copied before it stay),\n"
    "unless --skip-existing finds it the same there: a copy that stopped part way\n"
    "is resumed by running it again with --skip-existing. An id SRC lacks is\n"
    "refused before DST is opened or created. Fork parents and times are not\n"
    "carried. SRC or DST may be a file or a postgresql:// URI: this is how a store\n"
    "moves onto a server and back. A DST file this copy creates is built beside it\n"
    "as .colikv-import-XXXXXX and given its name only once every copy is verified:\n"
    "a failed copy leaves no new store behind.\n",
    "  --skip-existing     leave an id DST holds already when it is the same\n"
    "                      conversation (else fail saying what differs)\n"
    "  --file-mode MODE    permission bits (octal, less the umask) of DST when this\n"
    "                      copy creates it, and of its -wal and -shm (default 0600)\n"
    "  --to-tenant NAME    the tenant of DST to copy into, created if missing\n"
    "                      (default: --tenant's, which names SRC's)\n"
    "  --json              print the result as JSON\n",
    "  source, destination, conversations [{id, tokens, records_sha256, evicted_from\n"
    "  (null: none evicted), skipped}], tokens, copied, skipped\n", 2, SIZE_MAX,
    {{"--json", false}, {"--skip-existing", false}, {"--progress", false}, {"--quiet", false},
     {"--busy-timeout", true}, {"--tenant", true}, {"--to-tenant", true},
     {"--file-mode", true}},
    cmd_copy, false};
}

}  // namespace colikv_cli
