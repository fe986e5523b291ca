// Aligned text for people: tables of rows and "key   value" lines.
#ifndef COLIKV_TOOLS_CLI_TABLE_H
#define COLIKV_TOOLS_CLI_TABLE_H

#include <string>
#include <utility>
#include <vector>

namespace colikv_cli {

// An aligned text table: two spaces between columns, numbers right-aligned,
// the last column not padded.
class Table {
 public:
  Table(std::vector<std::string> header, std::vector<bool> right_aligned);
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string render() const;

 private:
  std::vector<size_t> column_widths() const;

  std::vector<std::vector<std::string>> rows_;
  std::vector<bool> right_;
};

// "key   value" lines with the values aligned.
class KeyValues {
 public:
  void add(const std::string& key, const std::string& value) { rows_.emplace_back(key, value); }
  size_t key_width() const;
  // min_width aligns the values with other rows printed around these.
  std::string render(const std::string& prefix = "", size_t min_width = 0) const;

 private:
  std::vector<std::pair<std::string, std::string>> rows_;
};

}  // namespace colikv_cli

#endif  // COLIKV_TOOLS_CLI_TABLE_H
