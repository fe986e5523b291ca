// colikv gc: KV data evicted until the store fits a byte budget.
#include <cstdint>
#include <string>
#include <utility>

#include "colikv/store.h"
#include "args.h"
#include "cli_output.h"
#include "commands.h"
#include "json.h"

namespace colikv_cli {
namespace {

Json gc_json(const std::string& store_path, int64_t max_bytes, const colikv::EvictionReport& r) {
  Json j = Json::object();
  j.set("store", Json::string(colikv::shown_store_location(store_path)));
  j.set("max_bytes", Json::integer(max_bytes));
  j.set("stored_bytes_before", Json::integer(r.stored_bytes_before));
  j.set("stored_bytes_after", Json::integer(r.stored_bytes_after));
  j.set("freed_bytes", Json::integer(r.freed_bytes));
  j.set("chunks", Json::integer(r.chunks));
  Json list = Json::array();
  for (const auto& id : r.conversations) list.push(Json::string(id));
  j.set("evicted", std::move(list));
  j.set("fits", Json::boolean(r.fits));
  return j;
}

// Sizes before and after, and the first evicted conversations by name.
std::string gc_text(int64_t max_bytes, const colikv::EvictionReport& r) {
  std::string out = "KV data " + bytes_both(r.stored_bytes_before) + " -> " + bytes_both(r.stored_bytes_after) +
                    " (budget " + bytes_both(max_bytes) + "): evicted " +
                    plural(r.chunks, "chunk", "chunks") + " of " +
                    plural(static_cast<int64_t>(r.conversations.size()), "conversation", "conversations");
  for (size_t i = 0; i < r.conversations.size() && i < 20; ++i) out += (i ? ", " : ": ") + shown(r.conversations[i]);
  if (r.conversations.size() > 20) out += ", ...";
  out += "\n";
  if (!r.fits) out += "the conversations that remain share data that does not fit the budget\n";
  return out;
}

int cmd_gc(const Args& a) {
  const std::string& store_path = a.positional[0];
  if (!a.has("--max-bytes")) throw UsageError{"--max-bytes N is required"};
  const int64_t max_bytes = parse_count(a.value("--max-bytes"), "--max-bytes");
  colikv::Store store(store_path, write_options(a));
  const colikv::EvictionReport r = store.gc(max_bytes);
  print(a.has("--json") ? gc_json(store_path, max_bytes, r).dump() : gc_text(max_bytes, r));
  return kExitOk;
}

}  // namespace

CommandSpec gc_command() {
  return {"gc", "STORE --max-bytes N [--json]", "evict KV data until the store fits a byte budget",
    "Evicts the KV data of the least recently used conversations until the chunk\n"
    "payloads take at most N bytes (the stored bytes of 'colikv stats'; 0 evicts\n"
    "all). Evicted conversations keep their rows, metadata and token ids: loading\n"
    "one fails with 'evicted' and returns its token ids, and appending it again\n"
    "re-saves it. Chunks still used by a kept conversation stay. One transaction.\n"
    "The freed pages are reused by SQLite; 'colikv vacuum' gives them back.\n",
    "  --max-bytes N       the budget in bytes of KV data\n"
    "  --json              print as JSON\n",
    "  store, max_bytes, stored_bytes_before, stored_bytes_after, freed_bytes, chunks\n"
    "  (payloads evicted), evicted[] (ids of the conversations that lost KV data,\n"
    "  least recently used first), fits (stored_bytes_after <= max_bytes)\n",
    1, 1, {{"--max-bytes", true}, {"--json", false}, {"--sync", true}, {"--busy-timeout", true}, {"--tenant", true}}, cmd_gc};
}

}  // namespace colikv_cli
