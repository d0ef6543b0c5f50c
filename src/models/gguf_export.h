// Writes a model as a GGUF file of a llama.cpp file type (BF16, Q8_0, Q4_0, Q4_K_M, Q5_K_M): the
// per-tensor types as llama-quantize picks them, the architecture and tokenizer metadata, and
// the tensors quantized one at a time.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/block_type.h"
#include "io/config.h"
#include "io/gguf_writer.h"
#include "io/model_files.h"

namespace fornace {

// llama-quantize's file types, and files of one block type throughout (as its --pure gives them:
// q4_1, q5_0, q5_1, q4_k, q5_k, q6_k; a matrix whose rows the type cannot hold takes llama.cpp's
// fallback), which measure each block type's kernels alone.
enum class GgufFileType {
  f32,
  bf16,
  q8_0,
  q4_0,
  q4_k_m,
  q5_k_m,
  q4_1,
  q5_0,
  q5_1,
  q4_k,
  q5_k,
  q6_k
};

// Parses a file type's name (those of the enum, any case).
std::optional<GgufFileType> parse_gguf_file_type(std::string_view name);
std::vector<std::string> gguf_file_type_names();

// The type of one tensor (GGUF name, row length) in a file of `type`, as llama-quantize picks it:
// the file's base type, more bits for the output and for some layers' attn_v and ffn_down
// (Q4_K_M, Q5_K_M), and Q5_0 / Q5_1 / Q8_0 for K-quant rows that are not whole super-blocks.
BlockType gguf_tensor_type(GgufFileType type, const std::string& gguf_name, int64_t columns,
                           int64_t layers, bool tied_embeddings);

struct GgufExportSummary {
  int64_t tensors = 0;
  int64_t bytes = 0;  // The file's size.
  std::vector<std::pair<BlockType, int64_t>> bytes_per_type;
  // What llama.cpp will read differently from what the config says (Fornace reads it as meant).
  std::vector<std::string> warnings;
};

// Keys to add to the architecture's (the tokenizer's), given the model's config.
using ExtraMetadata = std::function<std::vector<GgufKeyValue>(const ModelConfig& config)>;

// Writes the model of `files` (a checkpoint directory or a GGUF file) to `out_path`, with the
// keys `extra_metadata` gives. The file is written under a temporary name and renamed, so a
// failure leaves no file.
GgufExportSummary export_gguf(const ModelFiles& files, const std::string& out_path,
                              GgufFileType type, const ExtraMetadata& extra_metadata = {});

}  // namespace fornace
