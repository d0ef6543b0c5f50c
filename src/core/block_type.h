// GGUF tensor types: plain floats and llama.cpp's block-quantized formats, with their block sizes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace fornace {

// The tensor types Fornace reads and writes in GGUF files. q8_k is the activation block of the
// K-quant dot products (GGUF type 15); files do not store weights in it.
enum class BlockType : uint8_t { f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q4_k, q5_k, q6_k, q8_k };

struct BlockFormat {
  BlockType type;
  const char* name;       // As llama.cpp names it: "Q4_K", "BF16", ...
  uint32_t ggml_type;     // The type id in GGUF tensor infos.
  int64_t block_elements;  // Elements per block (1 for plain floats).
  size_t block_bytes;      // Bytes per block.
};

// How the input of a quantized layer meets its weights.
enum class InputRounding {
  // f32 input against weights widened in registers: no rounding.
  none,
  // Each block of the input rounded to int8 with its own scale, integer dot products (as
  // llama.cpp does): an element moves by up to 1/254 of its block's largest magnitude.
  int8,
  // int8, and what that rounding left rounded to int8 again: two integer dot products per
  // weight block (one pass over the weights), an element within 1/64,516 of its block's largest.
  int8_residual,
};
// "f32" (none), "int8", "int8x2"; parse_input_rounding reads them back (nothing when unknown).
const char* input_rounding_name(InputRounding rounding);
std::optional<InputRounding> parse_input_rounding(std::string_view name);

const BlockFormat& block_format(BlockType type);
// The type with this GGUF id, or nothing for ids Fornace does not support.
std::optional<BlockType> block_type_from_ggml(uint32_t ggml_type);
// Parses a name as block_format().name (any case); nothing when unknown.
std::optional<BlockType> parse_block_type(std::string_view name);
bool is_quantized(BlockType type);
// Bytes of a row of `elements`; throws Error when `elements` is not a multiple of the block.
size_t block_row_bytes(BlockType type, int64_t elements);

}  // namespace fornace
