// colikv inspect: a .coli_kv file checked without importing it.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>

#include "colikv/coli_kv.h"
#include "args.h"
#include "cli_output.h"
#include "commands.h"
#include "json.h"
#include "store_json.h"
#include "table.h"
#include "token_stream.h"

namespace colikv_cli {
namespace {

// Complete records past the header's count: not content.
int64_t records_past_count(const colikv::ColiKvInspection& r) {
  return std::max<int64_t>(0, r.records_on_disk - r.header_count);
}

void print_json(const std::string& file, const colikv::ColiKvInspection& r, TokenStream& first_tokens) {
  Json j = Json::object();
  j.set("file", Json::string(file));
  j.set("file_bytes", Json::integer(r.file_bytes));
  j.set("header_read", Json::boolean(r.header_read));
  j.set("model", r.header_read ? model_json(r.model) : Json::null());
  j.set("header_count", Json::integer(r.header_count));
  j.set("record_bytes", Json::integer(r.record_bytes));
  j.set("records_on_disk", Json::integer(r.records_on_disk));
  j.set("records_past_count", Json::integer(records_past_count(r)));
  j.set("trailing_bytes", Json::integer(r.trailing_bytes));
  j.set("first_tokens", Json::int_stream([&](int64_t& v) {
          int32_t t;
          if (!first_tokens.next(t)) return false;
          v = t;
          return true;
        }));
  j.set("ok", Json::boolean(r.ok()));
  Json probs = Json::array();
  for (const auto& p : r.problems) probs.push(Json::string(p));
  j.set("problems", std::move(probs));
  j.print_to(stdout);
}

// The header's fields and the record counts, for a person.
KeyValues header_lines(const std::string& file, const colikv::ColiKvInspection& r) {
  KeyValues head;
  head.add("file", shown(file));
  head.add("file size", bytes_both(r.file_bytes));
  if (!r.header_read) {
    head.add("header", "not readable");
    return head;
  }
  head.add("model", r.model.to_string());
  head.add("record size", r.record_bytes > 0 ? std::to_string(r.record_bytes) + " B" : "- (invalid header)");
  head.add("header count", plural(r.header_count, "record", "records"));
  head.add("on disk", plural(r.records_on_disk, "complete record", "complete records") + ", " +
                          plural(r.trailing_bytes, "trailing byte", "trailing bytes"));
  if (r.record_bytes > 0 && r.header_count >= 0)
    head.add("content", bytes_both(std::min(r.header_count, r.records_on_disk) * r.record_bytes));
  const int64_t past = records_past_count(r);
  if (past > 0) head.add("past the count", plural(past, "record", "records") + " (not content: import ignores them)");
  return head;
}

// first_n of the tokens, printed as they are read.
void print_first_tokens(const colikv::ColiKvInspection& r, TokenStream& first_tokens, int64_t first_n) {
  int32_t t;
  for (int64_t i = 0; first_tokens.next(t); ++i) print((i ? " " : "") + std::to_string(t));
  print(first_n == 0 ? "-\n" : first_n < r.header_count ? " ...\n" : "\n");
}

void print_text(const std::string& file, const colikv::ColiKvInspection& r, TokenStream& first_tokens,
                int64_t first_n) {
  KeyValues head = header_lines(file, r);
  KeyValues tail;
  tail.add("problems", r.problems.empty() ? "none" : std::to_string(r.problems.size()));
  const std::string tokens_key = "first tokens";
  const size_t width = std::max({head.key_width(), tail.key_width(), r.header_read ? tokens_key.size() : 0});
  print(head.render("", width));
  if (r.header_read) {
    print(tokens_key + std::string(width - tokens_key.size() + 2, ' '));
    print_first_tokens(r, first_tokens, first_n);
  }
  std::string out = tail.render("", width);
  for (const auto& p : r.problems) out += "  - " + shown(p) + "\n";
  print(out);
}

// The one-line error of a file import would refuse: exit 1.
Failure not_well_formed(const std::string& file, const colikv::ColiKvInspection& r) {
  const int64_t more = static_cast<int64_t>(r.problems.size()) - 1;
  return Failure{file + " is not a well-formed .coli_kv file: " + r.problems.front() +
                 (more > 0 ? " (and " + plural(more, "more problem", "more problems") + ")" : "")};
}

int cmd_inspect(const Args& a) {
  const std::string& file = a.positional[0];
  const int64_t want = a.has("--tokens") ? parse_count(a.value("--tokens"), "--tokens") : 16;
  colikv::ColiKvInspection r = colikv::inspect_coli_kv(file, 0);
  // The first tokens are streamed from the file as they are printed: memory
  // stays bounded whatever N is and whatever the file holds.
  const int64_t counted =
      r.record_bytes > 0 ? std::min(std::max<int64_t>(r.header_count, 0), r.records_on_disk) : 0;
  const int64_t first_n = std::min(want, counted);
  ColiKvTokens first_tokens(file, r.record_bytes > 0 ? r.record_bytes : 1, first_n);

  if (a.has("--json"))
    print_json(file, r, first_tokens);
  else
    print_text(file, r, first_tokens, first_n);
  if (!r.ok()) throw not_well_formed(file, r);
  return kExitOk;
}

}  // namespace

CommandSpec inspect_command() {
  return {"inspect", "FILE.coli_kv [--tokens N] [--json]", "check a .coli_kv file without importing it",
    "Shows the header, the record size, the record count on disk against the\n"
    "header's, the first token ids and every problem found (each token id of the\n"
    "counted records is checked against the vocabulary). Exit 1 if the file is not\n"
    "well-formed, that is, if import would refuse it.\n",
    "  --tokens N          show the first N token ids (default 16)\n"
    "  --json              print as JSON\n",
    std::string("  file, file_bytes, header_read, model{...} (null when the header is not\n"
                "  readable), header_count, record_bytes (0 when the header is invalid),\n"
                "  records_on_disk (complete records after the header), records_past_count,\n"
                "  trailing_bytes (after the last complete record), first_tokens[], ok,\n"
                "  problems[] (strings)\n") +
        kModelKeys,
    1, 1, {{"--tokens", true}, {"--json", false}}, cmd_inspect, false};
}

}  // namespace colikv_cli
