// colikv verify: every stored chunk and the file checked.
#include <sys/stat.h>

#include <cstdint>
#include <string>
#include <utility>

#include "colikv/store.h"
#include "args.h"
#include "cli_output.h"
#include "commands.h"
#include "json.h"
#include "progress.h"

namespace colikv_cli {
namespace {

Json optional_int(int64_t v) { return v < 0 ? Json::null() : Json::integer(v); }

bool sound(const colikv::VerifyReport& rep) { return rep.ok() && rep.integrity == "ok"; }

// Reads the whole store (or conversation id), with its progress on stderr.
colikv::VerifyReport verify_store(const Args& a, const std::string& store_path, const std::string& id) {
  ProgressMode mode = progress_mode(a);
  struct stat st {};
  int64_t store_bytes = ::stat(store_path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
  colikv::Store store(store_path, read_options(a));
  Progress progress("verify " + shown(id.empty() ? colikv::shown_store_location(store_path) : id), store_bytes, mode);
  return store.verify(id, progress.fn());
}

Json problem_json(const colikv::VerifyProblem& p) {
  Json pj = Json::object();
  pj.set("conversation", p.conversation.empty() ? Json::null() : Json::string(p.conversation));
  pj.set("chunk_seq", optional_int(p.chunk_seq));
  pj.set("chunk_id", optional_int(p.chunk_id));
  pj.set("first_pos", optional_int(p.first_pos));
  pj.set("end_pos", optional_int(p.end_pos));
  pj.set("what", Json::string(p.what));
  return pj;
}

Json uncompared_share_json(const colikv::UncomparedShare& u) {
  Json uj = Json::object();
  uj.set("chunk_id", Json::integer(u.chunk_id));
  uj.set("first_pos", Json::integer(u.first_pos));
  uj.set("end_pos", Json::integer(u.end_pos));
  Json names = Json::array();
  for (const auto& c : u.conversations) names.push(Json::string(c));
  uj.set("conversations", std::move(names));
  return uj;
}

Json verify_json(const std::string& store_path, const std::string& id, const colikv::VerifyReport& rep) {
  Json j = Json::object();
  j.set("store", Json::string(colikv::shown_store_location(store_path)));
  j.set("conversation", id.empty() ? Json::null() : Json::string(id));
  j.set("conversations", Json::integer(rep.conversations));
  j.set("chunks", Json::integer(rep.chunks));
  j.set("bytes", Json::integer(rep.bytes));
  j.set("integrity", Json::string(rep.integrity));
  j.set("ok", Json::boolean(sound(rep)));
  Json probs = Json::array();
  for (const auto& p : rep.problems) probs.push(problem_json(p));
  j.set("problems", std::move(probs));
  Json shares = Json::array();
  for (const auto& u : rep.uncompared_shares) shares.push(uncompared_share_json(u));
  j.set("uncompared_shares", std::move(shares));
  return j;
}

// "problem: conversation 'a', chunk 3 (chunk_id 7), positions [0, 64): what"
std::string problem_line(const colikv::VerifyProblem& p) {
  std::string where = p.conversation.empty() ? "store" : "conversation '" + shown(p.conversation) + "'";
  if (p.chunk_seq >= 0) where += ", chunk " + std::to_string(p.chunk_seq);
  if (p.chunk_id >= 0) where += " (chunk_id " + std::to_string(p.chunk_id) + ")";
  if (p.first_pos >= 0)
    where += ", positions [" + std::to_string(p.first_pos) + ", " + std::to_string(p.end_pos) + ")";
  return "problem: " + where + ": " + shown(p.what) + "\n";
}

std::string uncompared_share_line(const colikv::UncomparedShare& u) {
  std::string names;
  for (const auto& c : u.conversations) names += (names.empty() ? "'" : ", '") + shown(c) + "'";
  return "warning: chunk_id " + std::to_string(u.chunk_id) + ", positions [" + std::to_string(u.first_pos) + ", " +
         std::to_string(u.end_pos) + "): shared by " + names +
         " (not forks of one another) without comparing their values, by a colikv before schema 5; "
         "all but one may load values appended to another\n";
}

std::string verify_text(const colikv::VerifyReport& rep) {
  std::string out = "checked " + plural(rep.conversations, "conversation", "conversations") + ", " +
                    plural(rep.chunks, "chunk", "chunks") + ", " + bytes_both(rep.bytes) +
                    " decoded; integrity_check: " + rep.integrity + "\n";
  for (const auto& p : rep.problems) out += problem_line(p);
  for (const auto& u : rep.uncompared_shares) out += uncompared_share_line(u);
  if (sound(rep))
    out += rep.uncompared_shares.empty()
               ? "ok: no problems found\n"
               : "ok: no problems found; " +
                     plural(static_cast<int64_t>(rep.uncompared_shares.size()), "chunk", "chunks") +
                     " shared without a content comparison (warnings above)\n";
  return out;
}

// The one-line error of an unsound store: exit 1.
Failure unsound(const std::string& store_path, const std::string& id, const colikv::VerifyReport& rep) {
  std::string what = rep.problems.empty()
                         ? "integrity_check: " + rep.integrity
                         : plural(static_cast<int64_t>(rep.problems.size()), "problem", "problems") + " found";
  return Failure{colikv::shown_store_location(store_path) + (id.empty() ? "" : " conversation '" + id + "'") + ": " + what};
}

int cmd_verify(const Args& a) {
  const std::string& store_path = a.positional[0];
  const std::string id = a.positional.size() > 1 ? a.positional[1] : "";
  const colikv::VerifyReport rep = verify_store(a, store_path, id);
  print(a.has("--json") ? verify_json(store_path, id, rep).dump() : verify_text(rep));
  if (!sound(rep)) throw unsound(store_path, id, rep);
  return kExitOk;
}

}  // namespace

CommandSpec verify_command() {
  return {"verify", "STORE [ID] [--json]", "check every stored chunk and the file",
    "Reads and checks every chunk of every conversation (or of ID): checksum,\n"
    "decompression, sizes, token ranges and chunk-list completeness; and runs\n"
    "PRAGMA integrity_check. Reports each problem with its conversation, chunk and\n"
    "position range. Exit 1 if any problem is found. Warns about chunks that a\n"
    "colikv before schema 5 shared by token ids alone between conversations that\n"
    "are not forks of one another (their values were never compared; exit 0).\n"
    "The store is opened read-only.\n",
    "  --json              print as JSON\n",
    "  store, conversation (ID or null), conversations (checked), chunks (distinct\n"
    "  chunks read), bytes (decoded payload bytes checked), integrity (the result of\n"
    "  integrity_check, \"ok\" when sound), ok, problems[], each with conversation,\n"
    "  chunk_seq, chunk_id, first_pos, end_pos (each null when not applicable), what;\n"
    "  uncompared_shares[] (warnings: chunks stored before schema 5 that\n"
    "  conversations of different fork lineage share, their values never\n"
    "  compared), each with chunk_id, first_pos, end_pos, conversations[]\n",
    1, 2, {{"--json", false}, {"--progress", false}, {"--quiet", false}, {"--busy-timeout", true}, {"--tenant", true}}, cmd_verify};
}

}  // namespace colikv_cli
