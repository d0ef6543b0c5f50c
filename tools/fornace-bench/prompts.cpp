// Reading and checking bench prompt files, and comma-separated flag values.
#include "prompts.h"

#include <cerrno>
#include <cstdlib>

#include "core/error.h"
#include "io/files.h"

namespace fornace::bench {

bool is_ids_prompt(const std::string& path) {
  const std::string extension = ".ids";
  return path.size() > extension.size() &&
         path.compare(path.size() - extension.size(), extension.size(), extension) == 0;
}

std::string read_prompt_file(const std::string& path) {
  std::string text = read_file(path);
  if (text.empty()) fail("the prompt file ", path, " is empty");
  if (is_ids_prompt(path)) parse_prompt_ids(text, path);
  return text;
}

std::vector<uint32_t> parse_prompt_ids(const std::string& text, const std::string& path) {
  std::vector<uint32_t> ids;
  size_t position = 0;
  while (position < text.size()) {
    size_t begin = text.find_first_not_of(" ,\t\r\n", position);
    if (begin == std::string::npos) break;
    size_t end = text.find_first_of(" ,\t\r\n", begin);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(begin, end - begin);
    char* parse_end = nullptr;
    errno = 0;
    unsigned long long value = std::strtoull(item.c_str(), &parse_end, 10);
    if (item[0] == '-' || *parse_end != '\0' || errno != 0 || value > UINT32_MAX) {
      fail("the prompt file ", path, " holds '", item, "', which is not a token id");
    }
    ids.push_back(static_cast<uint32_t>(value));
    position = end;
  }
  if (ids.empty()) fail("the prompt file ", path, " holds no token ids");
  return ids;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  size_t start = 0;
  while (true) {
    size_t comma = text.find(',', start);
    std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty()) fail("an empty item in '", text, "'");
    items.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return items;
}

}  // namespace fornace::bench
