// Text the tool shows a person: store-derived strings made safe for a terminal.
#ifndef COLIKV_TOOLS_CLI_CLI_OUTPUT_H
#define COLIKV_TOOLS_CLI_CLI_OUTPUT_H

#include <cstdint>
#include <string>

namespace colikv_cli {

// s as it may be shown on a terminal: a store (or a file name) could
// otherwise drive the user's terminal (ESC]52 writes the clipboard, ESC[2J
// clears the screen). Control characters (C0 with newline and tab, DEL, and
// the C1 range) and bytes that are not valid UTF-8 become escapes ("\x1b",
// "\u009b"), so that what is shown stays on its line; other text, including
// non-ASCII UTF-8, is kept.
std::string shown(const std::string& s);

// The length of the valid UTF-8 sequence at s[i], or 0 if it is not one.
size_t utf8_sequence(const std::string& s, size_t i);

// "512 B", "40.0 KiB", "1.1 GiB".
std::string human_bytes(int64_t bytes);

// "41004 B (40.0 KiB)": exact bytes and human units.
std::string bytes_both(int64_t bytes);

}  // namespace colikv_cli

#endif  // COLIKV_TOOLS_CLI_CLI_OUTPUT_H
