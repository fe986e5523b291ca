// colikv stats: sizes per model and in total.
#include <string>
#include <utility>

#include "colikv/store.h"
#include "args.h"
#include "cli_output.h"
#include "commands.h"
#include "json.h"
#include "store_json.h"
#include "table.h"

namespace colikv_cli {
namespace {

Json usage_json(const colikv::UsageStats& u, bool with_model) {
  Json j = Json::object();
  if (with_model) {
    j.set("model", model_json(u.model));
    j.set("chunk_tokens", Json::integer(u.chunk_tokens));
  }
  j.set("conversations", Json::integer(u.conversations));
  j.set("tokens", Json::integer(u.tokens));
  j.set("chunks", Json::integer(u.chunks));
  j.set("logical_bytes", Json::integer(u.logical_bytes));
  j.set("unique_bytes", Json::integer(u.unique_bytes));
  j.set("stored_bytes", Json::integer(u.stored_bytes));
  j.set("saved_by_sharing", Json::integer(u.saved_by_sharing()));
  j.set("saved_by_compression", Json::integer(u.saved_by_compression()));
  j.set("ratio", ratio_json(u.logical_bytes, u.stored_bytes));
  return j;
}

void add_usage(KeyValues& kv, const colikv::UsageStats& u) {
  kv.add("conversations", std::to_string(u.conversations));
  kv.add("tokens", std::to_string(u.tokens));
  kv.add("chunks", std::to_string(u.chunks));
  kv.add("logical bytes", bytes_both(u.logical_bytes));
  kv.add("unique bytes", bytes_both(u.unique_bytes));
  kv.add("stored bytes", bytes_both(u.stored_bytes));
  kv.add("saved by sharing", bytes_both(u.saved_by_sharing()));
  kv.add("saved by compression", bytes_both(u.saved_by_compression()));
  kv.add("ratio", ratio_text(u.logical_bytes, u.stored_bytes));
}

Json stats_json(const std::string& store_path, const colikv::StoreStats& s) {
  Json j = Json::object();
  j.set("store", Json::string(colikv::shown_store_location(store_path)));
  j.set("file_bytes", Json::integer(s.file_bytes));
  Json models = Json::array();
  for (const auto& m : s.models) models.push(usage_json(m, true));
  j.set("models", std::move(models));
  j.set("total", usage_json(s.total, false));
  return j;
}

std::string stats_text(const colikv::StoreStats& s) {
  std::string out;
  for (const auto& m : s.models) {
    KeyValues kv;
    add_usage(kv, m);
    out += "model " + shown(m.model.to_string()) + " (" + plural(m.chunk_tokens, "token", "tokens") + " per chunk)\n";
    out += kv.render("  ");
  }
  KeyValues total;
  add_usage(total, s.total);
  out += "total\n" + total.render("  ");
  out += "file size  " + bytes_both(s.file_bytes) + "\n";
  return out;
}

int cmd_stats(const Args& a) {
  const std::string& store_path = a.positional[0];
  colikv::Store store(store_path, read_options(a));
  if (a.has("--prometheus")) {  // every tenant's gauges, for a textfile collector
    print(colikv::gauges_text(store.gauges()));
    return kExitOk;
  }
  const colikv::StoreStats s = store.stats();
  print(a.has("--json") ? stats_json(store_path, s).dump() : stats_text(s));
  return kExitOk;
}

}  // namespace

CommandSpec stats_command() {
  return {"stats", "STORE [--json | --prometheus]", "show sizes per model and in total",
    "Per model and in total: conversations, tokens, chunks, logical bytes (what\n"
    "the .coli_kv files of every conversation would take), unique bytes (the same,\n"
    "counting shared chunks once), stored bytes (of the compressed chunk blobs),\n"
    "the bytes saved by sharing and by compression; and the file size. The store is\n"
    "opened read-only.\n",
    "  --json              print as JSON\n"
    "  --prometheus        print every tenant's gauges by model, the file and WAL\n"
    "                      sizes and the held chunks in Prometheus's text format\n"
    "                      (for node_exporter's textfile collector; README, Operators)\n",
    std::string("  store, file_bytes (database plus WAL), models[] and total, each with\n"
                "  conversations, tokens, chunks, logical_bytes, unique_bytes, stored_bytes,\n"
                "  saved_by_sharing, saved_by_compression, ratio (logical / stored, or null);\n"
                "  each element of models[] starts with model{...} and chunk_tokens\n") +
        kModelKeys,
    1, 1, {{"--json", false}, {"--prometheus", false}, {"--busy-timeout", true}, {"--tenant", true}}, cmd_stats};
}

}  // namespace colikv_cli
