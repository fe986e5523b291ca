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

// "1 token", "2 tokens".
std::string plural(int64_t n, const std::string& one, const std::string& many);

// raw / stored with three decimals, or "-" when stored is 0.
std::string ratio_text(int64_t raw, int64_t stored);

// Unix milliseconds as UTC: "2025-01-31T12:34:56.789Z" (iso) or
// "2025-01-31 12:34:56" (human); "" (iso) or "-" (human) when not set.
std::string format_time(int64_t ms, bool iso);

// Milliseconds as the largest unit `colikv tenant --max-idle` takes that
// divides them ("30d", "12h", "90s"; "1500ms" otherwise).
std::string duration_text(int64_t ms);
// Writes text to stdout as it is (errors are found by the final flush).
void print(const std::string& text);

}  // namespace colikv_cli

#endif  // COLIKV_TOOLS_CLI_CLI_OUTPUT_H
