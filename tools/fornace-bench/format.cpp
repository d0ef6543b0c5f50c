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

std::vector<std::string> distinct_path_labels(const std::vector<std::string>& paths) {
  std::vector<std::string> trimmed;
  for (std::string path : paths) {
    while (path.size() > 1 && path.back() == '/') path.pop_back();
    trimmed.push_back(path);
  }
  // The last `count` components of a path, or all of it when it has fewer.
  auto tail = [](const std::string& path, size_t count) {
    size_t begin = path.size();
    for (size_t found = 0; found < count; ++found) {
      size_t slash = begin == 0 ? std::string::npos : path.find_last_of('/', begin - 1);
      if (slash == std::string::npos) return path;
      begin = slash;
    }
    return path.substr(begin + 1);
  };
  std::vector<std::string> labels;
  for (const std::string& path : trimmed) {
    std::string label;
    for (size_t count = 1;; ++count) {
      label = tail(path, count);
      bool shared = false;
      for (const std::string& other : trimmed) {
        shared = shared || (other != path && tail(other, count) == label);
      }
      if (!shared || label == path) break;
    }
    labels.push_back(label);
  }
  return labels;
}

}  // namespace fornace::bench
