// CSV text: RFC 4180 quoting on write, and a parser that reads it back with named columns.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace fornace::bench {

// One field, quoted when it holds a comma, a quote or a line break.
std::string csv_field(const std::string& value);
// The fields joined by commas, ending in "\n".
std::string csv_line(const std::vector<std::string>& fields);

// A parsed CSV: the header row's names and the data rows. Every row has as many fields as the
// header.
class CsvTable {
 public:
  // Parses `text`; errors name `source_name` and the line.
  static CsvTable parse(const std::string& text, const std::string& source_name);

  size_t rows() const { return rows_.size(); }
  bool has_column(const std::string& name) const { return columns_.count(name) != 0; }
  // Throws Error naming the source when the column is missing.
  void require_columns(const std::vector<std::string>& names) const;
  const std::string& text(size_t row, const std::string& column) const;
  // Numeric fields; errors name the source, the line and the column.
  double number(size_t row, const std::string& column) const;
  int64_t integer(size_t row, const std::string& column) const;

 private:
  std::string source_name_;
  std::map<std::string, size_t> columns_;
  std::vector<std::vector<std::string>> rows_;
  std::vector<size_t> line_numbers_;  // Line in the source where each row starts.
};

}  // namespace fornace::bench
