// The tokenizer's GGUF metadata (tokenizer.ggml.* and tokenizer.chat_template): read from a GGUF
// file, or made from a checkpoint's tokenizer.json for `fornace quantize`.
#pragma once

#include <string>
#include <vector>

#include "io/gguf.h"

namespace fornace {

// The tokenizer keys for a GGUF file of the model at `model_path`: copied from a GGUF file, or
// made from a checkpoint directory's tokenizer.json and tokenizer_config.json, with the
// vocabulary padded to `vocab_size` ids (the embedding's rows).
std::vector<GgufKeyValue> gguf_tokenizer_metadata(const std::string& model_path, int64_t vocab_size);

}  // namespace fornace
