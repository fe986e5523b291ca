#include "table.h"

#include <algorithm>

namespace colikv_cli {
namespace {

void drop_trailing_spaces(std::string& line) {
  while (!line.empty() && line.back() == ' ') line.pop_back();
}

}  // namespace

Table::Table(std::vector<std::string> header, std::vector<bool> right_aligned) : right_(std::move(right_aligned)) {
  rows_.push_back(std::move(header));
}

std::vector<size_t> Table::column_widths() const {
  std::vector<size_t> width(rows_[0].size(), 0);
  for (const auto& r : rows_)
    for (size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
  return width;
}

std::string Table::render() const {
  const std::vector<size_t> width = column_widths();
  std::string out;
  for (const auto& r : rows_) {
    std::string line;
    for (size_t c = 0; c < r.size(); ++c) {
      bool last = c + 1 == r.size();
      size_t pad = width[c] - r[c].size();
      if (c) line += "  ";
      if (right_[c]) line.append(pad, ' ');
      line += r[c];
      if (!right_[c] && !last) line.append(pad, ' ');
    }
    drop_trailing_spaces(line);
    out += line + '\n';
  }
  return out;
}

size_t KeyValues::key_width() const {
  size_t w = 0;
  for (const auto& r : rows_) w = std::max(w, r.first.size());
  return w;
}

std::string KeyValues::render(const std::string& prefix, size_t min_width) const {
  const size_t w = std::max(key_width(), min_width);
  std::string out;
  for (const auto& r : rows_) {
    std::string line = prefix + r.first + std::string(w - r.first.size() + 2, ' ') + r.second;
    drop_trailing_spaces(line);
    out += line + '\n';
  }
  return out;
}

}  // namespace colikv_cli
