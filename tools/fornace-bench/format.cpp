// Fixed-point numbers, thousands separators and ranges for the bench's outputs.
#include "format.h"

#include <cstdio>

namespace fornace::bench {

std::string format_fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

std::string group_thousands(const std::string& number) {
  size_t start = number.empty() || number[0] != '-' ? 0 : 1;
  size_t end = number.find('.');
  if (end == std::string::npos) end = number.size();
  std::string result = number.substr(0, start);
  for (size_t i = start; i < end; ++i) {
    if (i > start && (end - i) % 3 == 0) result += ',';
    result += number[i];
  }
  return result + number.substr(end);
}

std::string with_thousands(int64_t value) { return group_thousands(std::to_string(value)); }

std::string format_range(double low, double high, int decimals, bool thousands) {
  auto format = [&](double value) {
    std::string text = format_fixed(value, decimals);
    return thousands ? group_thousands(text) : text;
  };
  std::string low_text = format(low);
  std::string high_text = format(high);
  return low_text == high_text ? low_text : low_text + "\u2013" + high_text;
}
std::string path_file_name(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace fornace::bench
