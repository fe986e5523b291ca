// colikv import: a .coli_kv file into a store, as a new conversation.
#include <sys/stat.h>

#include <cstdint>
#include <string>

#include "colikv/coli_kv.h"
#include "colikv/error.h"
#include "colikv/model.h"
#include "colikv/store.h"
#include "args.h"
#include "cli_output.h"
#include "commands.h"
#include "json.h"
#include "progress.h"
#include "store_json.h"
#include "table.h"

namespace colikv_cli {
namespace {

// Imports file into the store at path, with its progress on stderr; a
// store opened with Options::create_staged is published once it holds it.
colikv::ImportResult import_into(const std::string& path, const colikv::Options& opts, const std::string& file,
                                 colikv::ImportOptions io, ProgressMode mode) {
  struct stat st {};
  const int64_t file_bytes = ::stat(file.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
  colikv::Store store(path, opts);
  Progress progress("import " + shown(file), file_bytes, mode);
  io.progress = progress.fn();
  const colikv::ImportResult r = colikv::import_coli_kv(store, file, io);
  if (opts.create_staged) store.publish();
  return r;
}

// A store this import creates is built aside and given its name only once
// it holds the conversation (Options::create_staged): a failed import never
// deletes a store, not even one another process has just created.
colikv::ImportResult import_file(const std::string& store_path, colikv::Options opts, const std::string& file,
                                 const colikv::ImportOptions& io, ProgressMode mode) {
  if (is_new_store_file(store_path)) {
    colikv::Options fresh = opts;
    fresh.create_staged = true;
    try {
      return import_into(store_path, fresh, file, io, mode);
    } catch (const colikv::Error& e) {
      // Another process created the store meanwhile: import into it instead.
      if (e.code() != colikv::ErrorCode::kConflict || is_new_store_file(store_path)) throw;
    }
    opts.create_if_missing = false;
  }
  return import_into(store_path, opts, file, io, mode);
}

Json import_json(const std::string& store_path, const std::string& file, const colikv::ImportResult& r) {
  Json j = Json::object();
  j.set("store", Json::string(colikv::shown_store_location(store_path)));
  j.set("file", Json::string(file));
  j.set("id", Json::string(r.id));
  j.set("model", model_json(r.model));
  j.set("tokens", Json::integer(r.tokens));
  j.set("raw_bytes", Json::integer(r.tokens * r.model.record_bytes()));
  j.set("header_count", Json::integer(r.header_count));
  j.set("ignored_records", Json::integer(r.ignored_records));
  j.set("ignored_bytes", Json::integer(r.ignored_bytes));
  j.set("salvaged", Json::boolean(r.salvaged));
  return j;
}

// What was kept and what was left out of the file, for a person.
std::string import_text(const std::string& file, const colikv::ImportResult& r) {
  const int64_t record_bytes = r.model.record_bytes();
  std::string out = "imported " + shown(file) + " as '" + shown(r.id) + "'\n";
  KeyValues kv;
  kv.add("model", shown(r.model.to_string()));
  kv.add("tokens", std::to_string(r.tokens));
  kv.add("records", bytes_both(r.tokens * record_bytes) + " of " + std::to_string(record_bytes) + " B each");
  out += kv.render("  ");
  if (r.salvaged)
    out += "salvaged: the header counts " + plural(r.header_count, "record", "records") + " but only " +
           std::to_string(r.tokens) + " complete ones are present; kept " + std::to_string(r.tokens) + "\n";
  if (r.ignored_records > 0)
    out += "ignored " + plural(r.ignored_records, "record", "records") + " past the header's count of " +
           std::to_string(r.header_count) + " (" + bytes_both(r.ignored_bytes) +
           " after the counted records): not content, not imported\n";
  else if (r.ignored_bytes > 0)
    out += "ignored " + bytes_both(r.ignored_bytes) + " after the " +
           (r.salvaged ? std::string("complete") : "counted") + " records (less than one record): not imported\n";
  return out;
}

// --weights-id-from: the identity an engine adapter derives from its model
// folder (integrations/colibri), so an imported slot file resumes under it;
// without --id, a slot file .coli_kv[.N] lands where the adapter looks for
// it: <weights-id>/slot<N>.
void take_weights_id_from_dir(const Args& a, const std::string& file, colikv::ImportOptions& io) {
  if (a.has("--weights-id")) throw UsageError{"--weights-id and --weights-id-from exclude each other"};
  io.weights_id = colikv::weights_id_from_dir(a.value("--weights-id-from"));
  const std::string name = file.substr(file.find_last_of('/') + 1);
  if (a.has("--id") || name.rfind(".coli_kv", 0) != 0) return;
  const std::string n = name.size() > 9 && name[8] == '.' ? name.substr(9) : "0";
  if (n.find_first_not_of("0123456789") == std::string::npos) io.id = io.weights_id + "/slot" + n;
}

int cmd_import(const Args& a) {
  const std::string& store_path = a.positional[0];
  const std::string& file = a.positional[1];
  // An empty STORE would be built aside, imported, and then fail to be named.
  if (store_path.empty()) throw UsageError{"STORE is empty"};
  colikv::Options opts = base_options(a);
  opts.create_if_missing = true;
  ProgressMode mode = progress_mode(a);

  colikv::ImportOptions io;
  if (a.has("--id") && a.value("--id").empty()) throw UsageError{"--id must not be empty"};
  io.id = a.value("--id");
  io.weights_id = a.value("--weights-id");
  if (a.has("--weights-id-from")) take_weights_id_from_dir(a, file, io);
  io.salvage = a.has("--salvage");

  const colikv::ImportResult r = import_file(store_path, opts, file, io, mode);
  print(a.has("--json") ? import_json(store_path, file, r).dump() : import_text(file, r));
  return kExitOk;
}

}  // namespace

CommandSpec import_command() {
  return {"import", "STORE FILE.coli_kv [--id ID] [--weights-id W | --weights-id-from DIR] [--salvage] [--json]",
    "import a .coli_kv file as a new conversation",
    "Stores the whole file as one conversation in one transaction: either all of it\n"
    "is stored or nothing is. A store that does not exist is built beside it as\n"
    ".colikv-import-XXXXXX and given its name only once the import succeeded: a\n"
    "failed import leaves no store behind and never deletes one. (Such files of an\n"
    "import killed midway are removed by the next import creating a store in that\n"
    "directory.) A store another process creates meanwhile is imported into instead.\n"
    "Records past the header's count are not content: they are ignored, and the\n"
    "output says how many. A file whose header counts more records than it holds is\n"
    "refused unless --salvage is given.\n",
    "  --id ID             the conversation id (default: the file name without its\n"
    "                      directory and .coli_kv); an existing id is refused\n"
    "  --weights-id W      weights identity recorded in the model signature (default\n"
    "                      none)\n"
    "  --weights-id-from DIR  the weights identity of the model folder DIR, as\n"
    "                      colikv_weights_id_from_dir computes it (a hash of\n"
    "                      config.json and the *.safetensors names and sizes);\n"
    "                      without --id, an engine slot file .coli_kv[.N] is\n"
    "                      imported as <identity>/slot<N>, where the colibri\n"
    "                      adapter (integrations/colibri) looks for it\n"
    "  --salvage           keep the complete records when the header counts more than\n"
    "                      are present, as the engine itself would\n"
    "  --file-mode MODE    permission bits (octal, less the umask) of a store this\n"
    "                      import creates and of its -wal and -shm (default 0600:\n"
    "                      the owner only)\n"
    "  --json              print the result as JSON\n",
    std::string("  store, file, id, model{...}, tokens (records stored), raw_bytes, header_count\n"
                "  (the header's nrec), ignored_records (complete records past nrec),\n"
                "  ignored_bytes (all bytes past the stored records), salvaged\n") +
        kModelKeys,
    2, 2,
    {{"--id", true}, {"--weights-id", true}, {"--weights-id-from", true}, {"--salvage", false}, {"--json", false}, {"--sync", true},
     {"--progress", false}, {"--quiet", false}, {"--busy-timeout", true}, {"--tenant", true}, {"--file-mode", true}},
    cmd_import};
}

}  // namespace colikv_cli
