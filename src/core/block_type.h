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

const BlockFormat& block_format(BlockType type);
// The type with this GGUF id, or nothing for ids Fornace does not support.
std::optional<BlockType> block_type_from_ggml(uint32_t ggml_type);
// Parses a name as block_format().name (any case); nothing when unknown.
std::optional<BlockType> parse_block_type(std::string_view name);
bool is_quantized(BlockType type);
// Bytes of a row of `elements`; throws Error when `elements` is not a multiple of the block.
size_t block_row_bytes(BlockType type, int64_t elements);

}  // namespace fornace
