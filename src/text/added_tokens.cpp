// The added-token search: a scan for bytes that can start a token, then the longest candidate.
#include "text/added_tokens.h"

#include <algorithm>

namespace fornace::text {

void AddedTokenMatcher::add(std::string_view content, uint32_t id, bool special) {
  if (content.empty()) return;
  Token token{std::string(content), id, special};
  auto place = std::find_if(tokens_.begin(), tokens_.end(), [&](const Token& other) {
    return other.content.size() < token.content.size();
  });
  tokens_.insert(place, std::move(token));
  is_first_byte_[static_cast<uint8_t>(content[0])] = true;
}

std::optional<AddedTokenMatcher::Match> AddedTokenMatcher::find(std::string_view text, size_t from,
                                                                bool include_special) const {
  for (size_t position = from; position < text.size(); ++position) {
    if (!is_first_byte_[static_cast<uint8_t>(text[position])]) continue;
    std::string_view rest = text.substr(position);
    for (const Token& token : tokens_) {
      if (token.special && !include_special) continue;
      if (rest.starts_with(token.content)) return Match{position, token.content.size(), token.id};
    }
  }
  return std::nullopt;
}

}  // namespace fornace::text
