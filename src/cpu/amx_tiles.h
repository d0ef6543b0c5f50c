// The AMX tile configuration that ldtilecfg loads (palette 1: 8 tiles of up to 16 rows x 64 bytes).
#pragma once

#include <cstdint>

namespace fornace::cpu {

struct alignas(64) AmxTileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
};

// Every one of the 8 tiles 16 rows of 64 bytes.
constexpr AmxTileConfig full_amx_tiles() {
  AmxTileConfig config;
  for (int tile = 0; tile < 8; ++tile) {
    config.bytes_per_row[tile] = 64;
    config.rows[tile] = 16;
  }
  return config;
}

}  // namespace fornace::cpu
