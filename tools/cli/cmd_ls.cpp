// colikv ls: the conversations of a store, most recently used first.
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "colikv/store.h"
#include "args.h"
#include "cli_output.h"
#include "commands.h"
#include "json.h"
#include "store_json.h"
#include "table.h"

namespace colikv_cli {
namespace {

// The first limit conversations (all when limit < 0), read page by page.
std::vector<colikv::ConversationInfo> list_conversations(colikv::Store& store, int64_t limit) {
  std::vector<colikv::ConversationInfo> all;
  const int64_t page = 500;
  for (int64_t offset = 0;;) {
    colikv::ListOptions lo;
    lo.offset = offset;
    lo.limit = limit >= 0 ? std::min(page, limit - static_cast<int64_t>(all.size())) : page;
    if (lo.limit <= 0) break;
    std::vector<colikv::ConversationInfo> part = store.list(lo);
    for (auto& c : part) all.push_back(std::move(c));
    if (static_cast<int64_t>(part.size()) < lo.limit) break;
    offset += static_cast<int64_t>(part.size());
  }
  return all;
}

Json ls_json(const std::string& store_path, const std::vector<colikv::ConversationInfo>& all) {
  Json j = Json::object();
  j.set("store", Json::string(colikv::shown_store_location(store_path)));
  Json list = Json::array();
  for (const auto& c : all) list.push(conversation_json(c));
  j.set("conversations", std::move(list));
  return j;
}

std::string conversations_table(const std::vector<colikv::ConversationInfo>& all) {
  Table t({"ID", "TOKENS", "RAW", "STORED", "RATIO", "LAST USED (UTC)", "PARENT", "MODEL"},
          {false, true, true, true, true, false, false, false});
  for (const auto& c : all)
    t.add({shown(c.id), std::to_string(c.tokens), bytes_both(c.raw_bytes),
           c.evicted ? bytes_both(c.stored_bytes) + " (evicted)" : bytes_both(c.stored_bytes),
           ratio_text(c.raw_bytes, c.stored_bytes), format_time(c.last_used_ms, false),
           c.parent.empty() ? "-" : shown(c.parent), shown(c.model.to_string())});
  return t.render();
}

int cmd_ls(const Args& a) {
  const std::string& store_path = a.positional[0];
  int64_t limit = a.has("--limit") ? parse_count(a.value("--limit"), "--limit") : -1;
  colikv::Store store(store_path, read_options(a));
  const std::vector<colikv::ConversationInfo> all = list_conversations(store, limit);
  if (a.has("--json") && a.has("--ids")) throw UsageError{"--json and --ids exclude each other"};
  if (a.has("--ids")) {
    std::string out;
    for (const auto& c : all) out += shown(c.id) + "\n";
    print(out);
  } else if (a.has("--json"))
    print(ls_json(store_path, all).dump());
  else if (limit == 0)  // nothing listed, as asked; the store is not necessarily empty
    print("0 of " + plural(store.conversation_count(), "conversation", "conversations") + " listed (--limit 0)\n");
  else if (all.empty())
    print("no conversations in " + shown(colikv::shown_store_location(store_path)) + "\n");
  else
    print(conversations_table(all));
  return kExitOk;
}

}  // namespace

CommandSpec ls_command() {
  return {"ls", "STORE [--limit N] [--json | --ids]", "list the conversations, most recently used first",
    "Lists every conversation (or the first N) with its tokens, sizes, ratio, last\n"
    "use, fork parent and model. The store is opened read-only.\n",
    "  --limit N           list at most N conversations (default: all; 0 lists none\n"
    "                      and says how many there are)\n"
    "  --json              print as JSON\n"
    "  --ids               print only the ids, one a line (control characters\n"
    "                      escaped as in the table): for scripts and completion\n",
    std::string("  store, conversations[], each with:\n") + kConversationKeys + kModelKeys, 1, 1,
    {{"--limit", true}, {"--json", false}, {"--ids", false}, {"--busy-timeout", true}, {"--tenant", true}}, cmd_ls};
}

}  // namespace colikv_cli
