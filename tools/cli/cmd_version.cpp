// colikv version (and colikv --version): the tool's and the linked library's
// versions, which differ when a newer libcolikv is installed under an older tool.
#include <string>

#include "colikv/store.h"
#include "colikv/version.h"
#include "args.h"
#include "cli_output.h"
#include "commands.h"
#include "json.h"

namespace colikv_cli {

std::string version_line() {
  return std::string("colikv ") + COLIKV_VERSION_STRING + " (library " + colikv::version() + ", SQLite schema " +
         std::to_string(colikv::Store::library_schema_version()) + ")\n";
}

namespace {

int cmd_version(const Args& a) {
  if (!a.has("--json")) {
    print(version_line());
    return kExitOk;
  }
  Json j = Json::object();
  j.set("tool_version", Json::string(COLIKV_VERSION_STRING));
  j.set("library_version", Json::string(colikv::version()));
  j.set("library_version_number", Json::integer(colikv::version_number()));
  j.set("schema_version", Json::integer(colikv::Store::library_schema_version()));
  print(j.dump());
  return kExitOk;
}

}  // namespace

CommandSpec version_command() {
  return {"version", "[--json]", "show the tool's and the linked library's versions",
    "Prints the version of this tool, of the libcolikv it runs with (a shared\n"
    "library may be newer than the tool) and the SQLite schema version that\n"
    "library writes. 'colikv --version' prints the same line.\n",
    "  --json              print as JSON\n",
    "  tool_version, library_version (\"MAJOR.MINOR.PATCH\"), library_version_number\n"
    "  (MAJOR * 10000 + MINOR * 100 + PATCH), schema_version\n",
    0, 0, {{"--json", false}}, cmd_version, false};
}

}  // namespace colikv_cli
