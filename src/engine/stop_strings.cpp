// Stop strings: hold back a possible start of one, cut the text at the first one found.
#include "engine/stop_strings.h"

#include <algorithm>

namespace fornace {

StopStrings::StopStrings(std::vector<std::string> stops) {
  for (std::string& stop : stops) {
    if (!stop.empty()) stops_.push_back(std::move(stop));
  }
}

std::string StopStrings::push(const std::string& piece) {
  if (stopped_) return {};
  held_ += piece;
  // The earliest stop string in the held text ends it.
  size_t first = std::string::npos;
  for (const std::string& stop : stops_) first = std::min(first, held_.find(stop));
  if (first != std::string::npos) {
    stopped_ = true;
    std::string released = held_.substr(0, first);
    held_.clear();
    return released;
  }
  // Hold the longest tail that is the beginning of some stop string.
  size_t keep = 0;
  for (const std::string& stop : stops_) {
    for (size_t length = std::min(stop.size() - 1, held_.size()); length > keep; --length) {
      if (held_.compare(held_.size() - length, length, stop, 0, length) == 0) {
        keep = length;
        break;
      }
    }
  }
  std::string released = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return released;
}

std::string StopStrings::flush() {
  std::string released;
  released.swap(held_);
  return released;
}

}  // namespace fornace
