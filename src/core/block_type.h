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

// How activations (the input of a quantized layer) meet its weights; `--activations` takes
// the value names.
enum class ActivationRounding {
  // f32 input against weights widened in registers: no rounding.
  f32,
  // Each block of the input rounded to int8 with its own scale, integer dot products (as
  // llama.cpp does): an element moves by up to 1/254 of its block's largest magnitude.
  int8,
  // int8, and what that rounding left rounded to int8 again: two integer dot products per
  // weight block (one pass over the weights), an element within 1/64,516 of its block's largest.
  int8x2,
};
// "f32", "int8", "int8x2"; parse_activation_rounding reads them back and throws Error
// ("expects int8, int8x2 or f32, got '...'") otherwise.
const char* activation_rounding_name(ActivationRounding rounding);
ActivationRounding parse_activation_rounding(std::string_view name);

const BlockFormat& block_format(BlockType type);
// The type with this GGUF id, or nothing for ids Fornace does not support.
std::optional<BlockType> block_type_from_ggml(uint32_t ggml_type);
bool is_quantized(BlockType type);
// Bytes of a row of `elements`; throws Error when `elements` is not a multiple of the block.
size_t block_row_bytes(BlockType type, int64_t elements);

}  // namespace fornace
