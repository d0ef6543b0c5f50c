// The table of GGUF tensor types and their block geometry (ggml's type ids and block layouts).
#include "core/block_type.h"

#include <array>
#include <string>
#include <utility>

#include "core/error.h"

namespace fornace {
namespace {

constexpr std::array<BlockFormat, 12> kFormats = {{
    {BlockType::f32, "F32", 0, 1, 4},
    {BlockType::f16, "F16", 1, 1, 2},
    {BlockType::bf16, "BF16", 30, 1, 2},
    {BlockType::q4_0, "Q4_0", 2, 32, 2 + 16},
    {BlockType::q4_1, "Q4_1", 3, 32, 2 + 2 + 16},
    {BlockType::q5_0, "Q5_0", 6, 32, 2 + 4 + 16},
    {BlockType::q5_1, "Q5_1", 7, 32, 2 + 2 + 4 + 16},
    {BlockType::q8_0, "Q8_0", 8, 32, 2 + 32},
    {BlockType::q4_k, "Q4_K", 12, 256, 2 + 2 + 12 + 128},
    {BlockType::q5_k, "Q5_K", 13, 256, 2 + 2 + 12 + 32 + 128},
    {BlockType::q6_k, "Q6_K", 14, 256, 128 + 64 + 16 + 2},
    {BlockType::q8_k, "Q8_K", 15, 256, 4 + 256 + 2 * 16},
}};

}  // namespace

const BlockFormat& block_format(BlockType type) { return kFormats[static_cast<size_t>(type)]; }

std::optional<BlockType> block_type_from_ggml(uint32_t ggml_type) {
  for (const BlockFormat& format : kFormats) {
    if (format.ggml_type == ggml_type) return format.type;
  }
  return std::nullopt;
}

bool is_quantized(BlockType type) { return block_format(type).block_elements > 1; }

size_t block_row_bytes(BlockType type, int64_t elements) {
  const BlockFormat& format = block_format(type);
  if (elements < 0 || elements % format.block_elements != 0) {
    throw Error(std::string(format.name) + " rows hold whole blocks of " +
                std::to_string(format.block_elements) + " elements, not " +
                std::to_string(elements));
  }
  return static_cast<size_t>(elements / format.block_elements) * format.block_bytes;
}

namespace {
constexpr std::array<std::pair<ActivationRounding, const char*>, 3> kRoundingNames = {
    {{ActivationRounding::f32, "f32"},
     {ActivationRounding::int8, "int8"},
     {ActivationRounding::int8x2, "int8x2"}}};
}  // namespace

const char* activation_rounding_name(ActivationRounding rounding) {
  for (const auto& [each, name] : kRoundingNames) {
    if (each == rounding) return name;
  }
  return "?";
}

ActivationRounding parse_activation_rounding(std::string_view name) {
  for (const auto& [each, known] : kRoundingNames) {
    if (name == known) return each;
  }
  fail("expects int8, int8x2 or f32, got '", name, "'");
}

}  // namespace fornace
