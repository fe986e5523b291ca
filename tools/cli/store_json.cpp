#include "store_json.h"

#include "cli_output.h"

namespace colikv_cli {

const char* const kModelKeys =
    "  model{...}: signature (canonical text), n_layers, kv_lora, qk_rope, index_hd,\n"
    "    n_indexed, vocab, weights_id (\"\" when none), record_bytes\n";
const char* const kConversationKeys =
    "  id, model{...}, tokens, raw_bytes (tokens * record_bytes), stored_bytes (bytes\n"
    "  of the chunk blobs it references, shared ones counted fully), ratio (raw /\n"
    "  stored with 3 decimals, null when nothing is stored), title, metadata (JSON\n"
    "  text, as a string), parent (id or null), forked_at, created, updated, last_used\n"
    "  (UTC, ISO 8601 with milliseconds, or null), created_ms, updated_ms, last_used_ms\n"
    "  (Unix milliseconds); evicted (present, and true, only when some of its KV data\n"
    "  was evicted under a byte budget: see colikv gc)\n";

Json ratio_json(int64_t raw, int64_t stored) {
  if (stored <= 0) return Json::null();
  return Json::number(static_cast<double>(raw) / static_cast<double>(stored), 3);
}

Json time_json(int64_t ms) { return ms > 0 ? Json::string(format_time(ms, true)) : Json::null(); }

Json model_json(const colikv::ModelSignature& m) {
  Json j = Json::object();
  j.set("signature", Json::string(m.to_string()));
  j.set("n_layers", Json::integer(m.n_layers));
  j.set("kv_lora", Json::integer(m.kv_lora));
  j.set("qk_rope", Json::integer(m.qk_rope));
  j.set("index_hd", Json::integer(m.index_hd));
  j.set("n_indexed", Json::integer(m.n_indexed));
  j.set("vocab", Json::integer(m.vocab));
  j.set("weights_id", Json::string(m.weights_id));
  j.set("record_bytes", Json::integer(m.record_bytes()));
  return j;
}

Json tenant_json(const colikv::TenantInfo& t) {
  auto limit = [](const std::optional<int64_t>& v) { return v ? Json::integer(*v) : Json::null(); };
  Json j = Json::object();
  j.set("name", Json::string(t.name));
  j.set("conversations", Json::integer(t.conversations));
  j.set("stored_bytes", Json::integer(t.stored_bytes));
  j.set("max_bytes", limit(t.limits.max_bytes));
  j.set("max_idle_ms", limit(t.limits.max_idle_ms));
  return j;
}

std::vector<std::string> tenant_row(const colikv::TenantInfo& t) {
  // The default tenant's name is empty: shown as "" so that its row is seen.
  return {t.name.empty() ? "\"\"" : shown(t.name), std::to_string(t.conversations), bytes_both(t.stored_bytes),
          t.limits.max_bytes ? bytes_both(*t.limits.max_bytes) : "-",
          t.limits.max_idle_ms ? duration_text(*t.limits.max_idle_ms) : "-"};
}

Json change_json(const Args& a) {
  Json j = Json::object();
  j.set("store", Json::string(colikv::shown_store_location(a.positional.at(0))));
  j.set("tenant", Json::string(a.value("--tenant")));
  return j;
}

const char* const kChangeKeys = "store, tenant (\"\" for the default one)";

const char* const kTenantKeys =
    "name (\"\" for the default tenant), conversations, stored_bytes (payload bytes of\n"
    "  the chunks its conversations use), max_bytes (its quota) and max_idle_ms (its\n"
    "  retention), null when none";

Json conversation_json(const colikv::ConversationInfo& c) {
  Json j = Json::object();
  j.set("id", Json::string(c.id));
  j.set("model", model_json(c.model));
  j.set("tokens", Json::integer(c.tokens));
  j.set("raw_bytes", Json::integer(c.raw_bytes));
  j.set("stored_bytes", Json::integer(c.stored_bytes));
  j.set("ratio", ratio_json(c.raw_bytes, c.stored_bytes));
  j.set("title", Json::string(c.title));
  j.set("metadata", Json::string(c.metadata));
  j.set("parent", c.parent.empty() ? Json::null() : Json::string(c.parent));
  j.set("forked_at", Json::integer(c.forked_at));
  j.set("created", time_json(c.created_ms));
  j.set("updated", time_json(c.updated_ms));
  j.set("last_used", time_json(c.last_used_ms));
  j.set("created_ms", Json::integer(c.created_ms));
  j.set("updated_ms", Json::integer(c.updated_ms));
  j.set("last_used_ms", Json::integer(c.last_used_ms));
  if (c.evicted) j.set("evicted", Json::boolean(true));
  return j;
}

}  // namespace colikv_cli
