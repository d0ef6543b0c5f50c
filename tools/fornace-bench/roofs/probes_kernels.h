// The ISA-specific loops behind probes.h.
#pragma once

#include <cstdint>

namespace fornace::roofs::kernels {

uint64_t sum_words_avx512(const uint64_t* words, int64_t count);
// 24 x 64 FLOPs per iteration.
float bf16_dot_loop_avx512(int64_t iterations);
// 4 tile products of 16 x 16 x 32 (x 2 FLOPs) per iteration. Needs cpu::amx_selected().
float amx_dot_loop_avx512(int64_t iterations);
// 12 x 16 FLOPs per iteration.
float fma_loop_avx2(int64_t iterations);

}  // namespace fornace::roofs::kernels
