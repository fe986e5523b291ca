// The man page colikv(1), written in roff from the help texts themselves:
// the build runs `colikv help --man` (tools/CMakeLists.txt), so the page says
// what --help says and cannot drift from it.
#include <string>

#include "colikv/version.h"
#include "commands.h"

namespace colikv_cli {
namespace {

// Help text as roff lines shown as they are (.nf): backslashes escaped, and a
// line that would start with a control character ('.' or ''') made plain.
std::string verbatim(const std::string& text) {
  std::string out = ".nf\n";
  bool line_start = true;
  for (char ch : text) {
    if (line_start && (ch == '.' || ch == '\'')) out += "\\&";
    if (ch == '\\')
      out += "\\e";
    else if (ch == '-')
      out += "\\-";  // a minus sign, so that options can be searched and copied
    else
      out += ch;
    line_start = ch == '\n';
  }
  if (!line_start) out += '\n';
  return out + ".fi\n";
}

}  // namespace

std::string man_page() {
  std::string m = std::string(".TH COLIKV 1 \"\" \"colikv ") + COLIKV_VERSION_STRING + "\" \"User Commands\"\n";
  m += ".SH NAME\n";
  m += "colikv \\- keep LLM conversations' KV caches in a SQLite file or a PostgreSQL database\n";
  m += ".SH SYNOPSIS\n";
  m += ".B colikv\n.I COMMAND\n[ARGS...] [OPTIONS]\n";
  m += ".SH DESCRIPTION\n";
  m += verbatim(main_help());
  m += ".SH COMMANDS\n";
  for (const auto& c : commands()) {
    m += std::string(".SS ") + c.name + "\n";
    m += verbatim(command_help(c));
  }
  m += ".SH SEE ALSO\n";
  m += ".BR sqlite3 (1),\n.BR psql (1)\n";
  return m;
}

}  // namespace colikv_cli
