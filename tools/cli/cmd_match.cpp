// colikv match: the conversation holding the longest prefix of a prompt.
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "colikv/coli_kv.h"
#include "colikv/model.h"
#include "colikv/store.h"
#include "args.h"
#include "cli_output.h"
#include "commands.h"
#include "json.h"
#include "store_json.h"
#include "token_stream.h"

namespace colikv_cli {
namespace {

// A pipe (--tokens <(...), /dev/stdin) is read once, as text: peeking at its
// first bytes here would take them away from the reader that follows.
bool is_coli_kv(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) return false;
  char magic[8] = {};
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw Failure{path + ": " + std::strerror(errno)};
  const size_t n = std::fread(magic, 1, sizeof magic, f);
  std::fclose(f);
  return n == sizeof magic && std::memcmp(magic, "COLIKV1\0", 8) == 0;
}

// The token ids of a prompt file, one at a time: a .coli_kv file (its
// counted records), or token ids as decimal text separated by whitespace.
std::unique_ptr<TokenStream> prompt_tokens(const std::string& path) {
  if (!is_coli_kv(path)) return std::make_unique<TextTokens>(path);
  colikv::ColiKvInspection in = colikv::inspect_coli_kv(path, 0);
  if (!in.ok()) throw Failure{path + ": " + in.problems.front()};
  return std::make_unique<ColiKvTokens>(path, in.record_bytes, std::min(in.header_count, in.records_on_disk));
}

// The most tokens any conversation of the model holds: no match is longer.
int64_t longest_conversation(colikv::Store& store, const colikv::ModelSignature& model) {
  int64_t longest = 0;
  colikv::ListOptions lo;
  lo.limit = 500;
  for (lo.offset = 0;; lo.offset += lo.limit) {
    const std::vector<colikv::ConversationInfo> page = store.list(lo);
    for (const auto& c : page)
      if (c.model == model) longest = std::max(longest, c.tokens);
    if (static_cast<int64_t>(page.size()) < lo.limit) return longest;
  }
}

// The prompt is read to its end (every token checked and counted), but only
// its first `keep` tokens are kept: memory is bounded by the store, not by
// the file.
struct Prompt {
  std::vector<int32_t> kept;
  int64_t tokens = 0;
};

Prompt read_prompt(TokenStream& tokens, int64_t keep) {
  Prompt prompt;
  for (int32_t t; tokens.next(t); ++prompt.tokens)
    if (prompt.tokens < keep) prompt.kept.push_back(t);
  return prompt;
}

Json match_json(const std::string& store_path, const colikv::ModelSignature& model, int64_t prompt_tokens,
                const colikv::PrefixMatch& m) {
  Json j = Json::object();
  j.set("store", Json::string(colikv::shown_store_location(store_path)));
  j.set("model", model_json(model));
  j.set("prompt_tokens", Json::integer(prompt_tokens));
  j.set("id", m.id.empty() ? Json::null() : Json::string(m.id));
  j.set("tokens", Json::integer(m.tokens));
  j.set("loadable", Json::integer(m.loadable));
  j.set("evicted", Json::boolean(m.evicted()));
  return j;
}

std::string match_text(const colikv::ModelSignature& model, int64_t prompt_tokens, const colikv::PrefixMatch& m) {
  if (m.tokens == 0)
    return "no conversation of model " + shown(model.to_string()) + " holds a prefix of the " +
           plural(prompt_tokens, "prompt token", "prompt tokens") + "\n";
  std::string line = "'" + shown(m.id) + "' holds the first " + std::to_string(m.tokens) + " of the " +
                     plural(prompt_tokens, "prompt token", "prompt tokens");
  if (m.evicted())
    line += "; its KV data was evicted from position " + std::to_string(m.loadable) + " on (" +
            std::to_string(m.loadable) + " can be loaded, the rest must be recomputed)";
  return line + "\n";
}

int cmd_match(const Args& a) {
  const std::string& store_path = a.positional[0];
  if (!a.has("--model-of")) throw UsageError{"--model-of ID is required"};
  if (!a.has("--tokens")) throw UsageError{"--tokens FILE is required"};
  std::unique_ptr<TokenStream> tokens = prompt_tokens(a.value("--tokens"));
  colikv::Store store(store_path, read_options(a));
  const colikv::ModelSignature model = store.info(a.value("--model-of")).model;
  const Prompt prompt = read_prompt(*tokens, longest_conversation(store, model));
  const colikv::PrefixMatch m =
      store.match(model, prompt.kept.data(), static_cast<int64_t>(prompt.kept.size()));
  print(a.has("--json") ? match_json(store_path, model, prompt.tokens, m).dump()
                        : match_text(model, prompt.tokens, m));
  return kExitOk;
}

}  // namespace

CommandSpec match_command() {
  return {"match", "STORE --model-of ID --tokens FILE [--json]",
    "find the conversation holding the longest prefix of a prompt",
    "Answers which conversation of the model of conversation ID holds the longest\n"
    "prefix of the prompt in FILE, and how many of its tokens. FILE holds token ids\n"
    "as decimal numbers separated by whitespace, or is a .coli_kv file (its counted\n"
    "records' token ids). Ties go to the most recently used conversation; only equal\n"
    "token ids count; other models are never matched. An evicted conversation\n"
    "matches too, and the output says how much of it can still be loaded. Exit 0\n"
    "whether or not a conversation matches. The store is opened read-only.\n",
    "  --model-of ID       match conversations of the model of conversation ID\n"
    "  --tokens FILE       the prompt's token ids\n"
    "  --json              print as JSON\n",
    std::string("  store, model{...}, prompt_tokens, id (null when nothing matches), tokens\n"
                "  (leading prompt tokens it holds), loadable (of those, how many still have\n"
                "  their KV data), evicted (loadable < tokens)\n") +
        kModelKeys,
    1, 1, {{"--model-of", true}, {"--tokens", true}, {"--json", false}, {"--busy-timeout", true}, {"--tenant", true}}, cmd_match};
}

}  // namespace colikv_cli
