// CSV quoting and parsing for the bench's run and step files.
#include "csv.h"

#include <cerrno>
#include <cstdlib>

#include "core/error.h"

namespace fornace::bench {

std::string csv_field(const std::string& value) {
  if (value.find_first_of(",\"\r\n") == std::string::npos) return value;
  std::string quoted = "\"";
  for (char character : value) {
    if (character == '"') quoted += '"';
    quoted += character;
  }
  return quoted + "\"";
}

std::string csv_line(const std::vector<std::string>& fields) {
  std::string line;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) line += ',';
    line += csv_field(fields[i]);
  }
  return line + "\n";
}

CsvTable CsvTable::parse(const std::string& text, const std::string& source_name) {
  CsvTable table;
  table.source_name_ = source_name;
  std::vector<std::vector<std::string>> records;
  std::vector<size_t> record_lines;
  std::vector<std::string> record;
  std::string field;
  bool quoted = false;
  bool field_started = false;  // The current record has at least one character or comma.
  size_t line = 1;
  size_t record_line = 1;
  auto end_record = [&] {
    record.push_back(field);
    field.clear();
    records.push_back(record);
    record_lines.push_back(record_line);
    record.clear();
    field_started = false;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    char character = text[i];
    if (quoted) {
      if (character == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          field += '"';
          ++i;
        } else {
          quoted = false;
        }
      } else {
        if (character == '\n') ++line;
        field += character;
      }
      continue;
    }
    if (!field_started) record_line = line;
    if (character == '"' && field.empty()) {
      quoted = true;
      field_started = true;
    } else if (character == ',') {
      record.push_back(field);
      field.clear();
      field_started = true;
    } else if (character == '\n' || character == '\r') {
      if (character == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      if (field_started || !field.empty()) end_record();
      ++line;
    } else {
      field += character;
      field_started = true;
    }
  }
  if (quoted) fail(source_name, ": line ", record_line, ": a quoted field is not closed");
  if (field_started || !field.empty()) end_record();
  if (records.empty()) fail(source_name, ": empty CSV (no header row)");

  const std::vector<std::string>& header = records[0];
  for (size_t column = 0; column < header.size(); ++column) {
    if (!table.columns_.emplace(header[column], column).second) {
      fail(source_name, ": column '", header[column], "' appears twice in the header");
    }
  }
  for (size_t row = 1; row < records.size(); ++row) {
    if (records[row].size() != header.size()) {
      fail(source_name, ": line ", record_lines[row], " has ", records[row].size(),
           " fields, the header has ", header.size());
    }
    table.rows_.push_back(std::move(records[row]));
    table.line_numbers_.push_back(record_lines[row]);
  }
  return table;
}

void CsvTable::require_columns(const std::vector<std::string>& names) const {
  for (const std::string& name : names) {
    if (!has_column(name)) fail(source_name_, ": missing column '", name, "'");
  }
}

const std::string& CsvTable::text(size_t row, const std::string& column) const {
  auto found = columns_.find(column);
  if (found == columns_.end()) fail(source_name_, ": missing column '", column, "'");
  return rows_.at(row)[found->second];
}

double CsvTable::number(size_t row, const std::string& column) const {
  const std::string& value = text(row, column);
  char* end = nullptr;
  errno = 0;
  double parsed = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || errno != 0) {
    fail(source_name_, ": line ", line_numbers_[row], ": column '", column, "' is not a number: '",
         value, "'");
  }
  return parsed;
}

int64_t CsvTable::integer(size_t row, const std::string& column) const {
  const std::string& value = text(row, column);
  char* end = nullptr;
  errno = 0;
  long long parsed = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || errno != 0) {
    fail(source_name_, ": line ", line_numbers_[row], ": column '", column,
         "' is not an integer: '", value, "'");
  }
  return parsed;
}

}  // namespace fornace::bench
