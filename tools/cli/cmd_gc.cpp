// colikv gc: a tenant's limits applied at once: idle conversations deleted,
// KV data evicted until it fits a byte budget.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "colikv/maintenance.h"
#include "colikv/store.h"
#include "args.h"
#include "cli_output.h"
#include "commands.h"
#include "json.h"
#include "progress.h"
#include "store_json.h"

namespace colikv_cli {
namespace {

// The byte budget's keys (when one was applied) and retention's (when one was).
Json gc_json(const Args& a, const std::optional<int64_t>& max_bytes, const colikv::EvictionReport& r,
             const std::optional<int64_t>& max_idle_ms, const colikv::ExpiryReport& x) {
  Json j = change_json(a);
  j.set("dry_run", Json::boolean(a.has("--dry-run")));
  if (max_bytes) {
    j.set("max_bytes", Json::integer(*max_bytes));
    j.set("stored_bytes_before", Json::integer(r.stored_bytes_before));
    j.set("stored_bytes_after", Json::integer(r.stored_bytes_after));
    j.set("freed_bytes", Json::integer(r.freed_bytes));
    j.set("chunks", Json::integer(r.chunks));
    Json list = Json::array();
    for (const auto& id : r.conversations) list.push(Json::string(id));
    j.set("evicted", std::move(list));
    j.set("fits", Json::boolean(r.fits));
  }
  if (max_idle_ms) {
    j.set("max_idle_ms", Json::integer(*max_idle_ms));
    Json list = Json::array();
    for (const auto& id : x.conversations) list.push(Json::string(id));
    j.set("expired", std::move(list));
    j.set("expired_chunks", Json::integer(x.chunks));
    j.set("expired_bytes", Json::integer(x.freed_bytes));
  }
  return j;
}

// Up to 20 conversation ids, shown safely.
std::string some_ids(const std::vector<std::string>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size() && i < 20; ++i) out += (i ? ", " : ": ") + shown(ids[i]);
  if (ids.size() > 20) out += ", ...";
  return out;
}

// Sizes before and after, and the first evicted conversations by name.
std::string gc_text(int64_t max_bytes, const colikv::EvictionReport& r, bool dry_run) {
  std::string out = "KV data " + bytes_both(r.stored_bytes_before) + " -> " + bytes_both(r.stored_bytes_after) +
                    " (budget " + bytes_both(max_bytes) + "): " + (dry_run ? "would evict " : "evicted ") +
                    plural(r.chunks, "chunk", "chunks") + " of " +
                    plural(static_cast<int64_t>(r.conversations.size()), "conversation", "conversations") +
                    some_ids(r.conversations) + "\n";
  if (!r.fits) out += "the conversations that remain share data that does not fit the budget\n";
  return out;
}

std::string expiry_text(int64_t max_idle_ms, const colikv::ExpiryReport& x, bool dry_run) {
  return std::string(dry_run ? "would delete " : "deleted ") + plural(static_cast<int64_t>(x.conversations.size()), "conversation", "conversations") +
         " idle longer than " + duration_text(max_idle_ms) + " (" + plural(x.chunks, "chunk", "chunks") + ", " +
         bytes_both(x.freed_bytes) + " of KV data)" + some_ids(x.conversations) + "\n";
}

int cmd_gc(const Args& a) {
  const std::string& store_path = a.positional[0];
  // Parsed before the store is opened: bad input changes nothing.
  std::optional<int64_t> max_bytes, max_idle_ms;
  if (a.has("--max-bytes")) max_bytes = parse_size(a.value("--max-bytes"), "--max-bytes");
  if (a.has("--max-idle")) max_idle_ms = parse_duration_ms(a.value("--max-idle"), "--max-idle");
  colikv::Store store(store_path, write_options(a));
  // What the command line leaves out, the tenant's own limits give.
  const colikv::TenantLimits stored = store.tenant_limits();
  if (!max_bytes) max_bytes = stored.max_bytes;
  if (!max_idle_ms) max_idle_ms = stored.max_idle_ms;
  if (!max_bytes && !max_idle_ms)
    throw UsageError{"--max-bytes N or --max-idle DURATION is required (the tenant has no limits of its own: "
                     "colikv tenant STORE NAME --max-bytes N --max-idle DURATION sets them)"};
  const bool dry_run = a.has("--dry-run");
  colikv::ExpiryReport x;
  colikv::EvictionReport r;
  if (dry_run) {
    // The same expiry and eviction code, in a transaction rolled back.
    const colikv::GcPlan plan = colikv::plan_gc(store, max_bytes, max_idle_ms);
    x = plan.expiry;
    r = plan.eviction;
  } else {
    const ProgressMode mode = progress_mode(a);
    const int64_t size = store_file_bytes(store_path);
    // Expiry first: what it deletes need not be evicted.
    if (max_idle_ms) {
      Progress p("gc: deleting idle conversations", size, mode, "conversations");
      x = colikv::expire(store, *max_idle_ms, p.fn());
    }
    if (max_bytes) {
      Progress p("gc: evicting, then giving pages back", size, mode, "bytes");
      r = colikv::gc(store, *max_bytes, p.fn());
    }
  }
  if (a.has("--json")) {
    print(gc_json(a, max_bytes, r, max_idle_ms, x).dump());
  } else {
    std::string out = dry_run ? "dry run: nothing was changed\n" : "";
    if (max_idle_ms) out += expiry_text(*max_idle_ms, x, dry_run);
    if (max_bytes) out += gc_text(*max_bytes, r, dry_run);
    print(out);
  }
  return kExitOk;
}

}  // namespace

CommandSpec gc_command() {
  return {"gc", "STORE [--max-bytes N] [--max-idle DURATION] [--dry-run] [--json]",
    "evict KV data to fit a byte budget, delete idle conversations",
    "Applies a tenant's limits at once, to the tenant --tenant names (the default\n"
    "one otherwise); an option given replaces the tenant's own limit of that kind\n"
    "('colikv tenant'), and one of the two is needed.\n"
    "--max-idle: deletes whole every conversation not used for longer than the\n"
    "duration, as rm deletes: row, token ids, and the chunks no other\n"
    "conversation uses, erased from the store's files. Runs first.\n"
    "--max-bytes: evicts the KV data of the least recently used conversations\n"
    "until the chunk payloads take at most N bytes (the stored bytes of 'colikv\n"
    "stats'; 0 evicts all). Evicted conversations keep their rows, metadata and\n"
    "token ids: loading one fails with 'evicted' and returns its token ids, and\n"
    "appending it again re-saves it. Chunks still used by a kept conversation\n"
    "stay. One transaction. The freed pages are given back in steps; 'colikv\n"
    "vacuum' gives back the rest.\n"
    "Other tenants' conversations are never touched.\n"
    "--dry-run: says what it would delete and evict, decided by the same code\n"
    "in a write transaction that is rolled back: nothing changes (the write lock\n"
    "is taken meanwhile, as gc takes it).\n",
    "  --max-bytes N       the budget of KV data: bytes, or a size (512MiB, 1G)\n"
    "  --max-idle D        delete what was idle longer: a whole number and a unit,\n"
    "                      s, m, h or d (90s, 15m, 12h, 30d)\n"
    "  --dry-run           only say what it would do\n"
    "  --json              print as JSON\n",
    std::string("  ") + kChangeKeys + ", dry_run (true: nothing was changed, the rest\n"
    "  says what would be); with a byte budget: max_bytes, stored_bytes_before,\n"
    "  stored_bytes_after, freed_bytes, chunks (payloads evicted), evicted[] (ids\n"
    "  of the conversations that lost KV data, least recently used first), fits\n"
    "  (stored_bytes_after <= max_bytes); with an idle time: max_idle_ms,\n"
    "  expired[] (ids deleted, least recently used first), expired_chunks,\n"
    "  expired_bytes\n",
    1, 1, {{"--max-bytes", true}, {"--max-idle", true}, {"--dry-run", false}, {"--json", false}, {"--progress", false},
           {"--quiet", false}, {"--sync", true}, {"--busy-timeout", true}, {"--tenant", true}}, cmd_gc};
}

}  // namespace colikv_cli
