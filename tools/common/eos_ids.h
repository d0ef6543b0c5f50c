// The ids that end a generation: config.json's eos_token_id, else the tokenizer's eos token.
#pragma once

#include <cstdint>
#include <vector>

#include "io/config.h"
#include "text/tokenizer.h"

namespace fornace::tools {

inline std::vector<int64_t> end_of_sequence_ids(const ModelConfig& config, const Tokenizer* tokenizer) {
  std::vector<int64_t> ids = config.eos_token_ids;
  if (ids.empty() && tokenizer && tokenizer->eos_token_id()) ids.push_back(*tokenizer->eos_token_id());
  return ids;
}

}  // namespace fornace::tools
