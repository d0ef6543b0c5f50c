// The normalizer steps, applied in the file's order.
#include "text/normalizer.h"

#include "text/utf8.h"

namespace fornace::text {

void append_replaced(std::string_view text, std::string_view pattern, std::string_view content,
                     std::string& out) {
  size_t position = 0;
  for (size_t found = text.find(pattern); found != std::string_view::npos;
       found = text.find(pattern, position)) {
    out.append(text.substr(position, found - position));
    out.append(content);
    position = found + pattern.size();
  }
  out.append(text.substr(position));
}

std::string_view Normalizer::normalize(std::string_view text, std::string& buffer) const {
  std::string scratch;
  for (const Step& step : steps_) {
    if (step.kind == Kind::nfc) {
      if (is_ascii(text)) continue;
      scratch = to_nfc(text);
    } else if (step.kind == Kind::prepend) {
      if (text.empty()) continue;
      scratch.assign(step.pattern).append(text);
    } else {
      if (text.find(step.pattern) == std::string_view::npos) continue;
      scratch.clear();
      append_replaced(text, step.pattern, step.content, scratch);
    }
    buffer.swap(scratch);
    text = buffer;
  }
  return text;
}

}  // namespace fornace::text
