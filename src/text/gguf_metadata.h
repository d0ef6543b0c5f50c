// The tokenizer's GGUF metadata (tokenizer.ggml.* and tokenizer.chat_template): read from a GGUF
// file, or made from a checkpoint's tokenizer.json for `fornace quantize`.
#pragma once

#include <string>
#include <vector>

#include "io/gguf.h"
#include "io/model_files.h"
#include "text/gguf_vocabulary.h"

namespace fornace {

// The vocabulary a GGUF file's tokenizer keys hold. Throws Error naming the file and key when
// one has the wrong type.
text::GgufVocabulary read_gguf_vocabulary(const GgufFile& file);
// The keys and values that hold `vocabulary`, with the types llama.cpp reads.
std::vector<GgufKeyValue> gguf_vocabulary_metadata(const text::GgufVocabulary& vocabulary);

// The tokenizer keys for a GGUF file of the model of `files`: copied from a GGUF file, or made
// from a checkpoint directory's tokenizer.json and tokenizer_config.json, with the vocabulary
// padded to `vocab_size` ids (the embedding's rows).
std::vector<GgufKeyValue> gguf_tokenizer_metadata(const ModelFiles& files, int64_t vocab_size);

}  // namespace fornace
