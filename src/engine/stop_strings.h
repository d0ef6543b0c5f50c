// Stop strings over streamed text: text that could still be the start of a stop string is held
// back, and the text ends before the first stop string that appears.
#pragma once

#include <string>
#include <vector>

namespace fornace {

class StopStrings {
 public:
  // Empty strings among `stops` are ignored.
  explicit StopStrings(std::vector<std::string> stops);

  // Adds `piece` to the text; returns what may be released now. After a stop string is found,
  // stopped() is true and the release ends before it; later pieces release nothing.
  std::string push(const std::string& piece);
  // The text still held back (at the end of the completion, when no stop string came).
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;  // Text not yet released: a possible start of a stop string.
  bool stopped_ = false;
};

}  // namespace fornace
