// The machine's limits that kernels are measured against: streaming read bandwidth (decode's
// roof) and the register-only BF16 dot-product rate (prefill's), on the global pool's threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

#include "cpu/cpu_features.h"

namespace fornace::roofs {

// One pass of summing [data, data + bytes) as 64-bit words, split into contiguous parts across
// the pool's threads (a streaming read); returns the sum so the reads stay.
uint64_t stream_read(const void* data, size_t bytes);
// The same over several regions in one hand-off of the threads, which split the regions' words
// taken one after another (a model's weights, without a hand-off per tensor).
uint64_t stream_read(std::span<const std::pair<const void*, size_t>> regions);

// GB/s (1e9 bytes) of the fastest of `passes` stream_read passes over [data, data + bytes).
double read_bandwidth_gbs(const void* data, size_t bytes, int passes);
// The same over several regions (a model's weights where its kernels read them), a pass being
// one stream_read of them all.
double read_bandwidth_gbs(std::span<const std::pair<const void*, size_t>> regions, int passes);

// The same over a new buffer of `bytes`, placed like large tensors (2 MiB pages where the kernel
// gives them), filled before the first pass.
double measure_read_bandwidth_gbs(size_t bytes, int passes);

// One run of `iterations` steps of 24 independent vdpbf16ps on each of the pool's threads;
// returns the sum of the accumulators. The caller checks has_bf16_dot() first.
float bf16_dot_loop(int64_t iterations);
// FLOPs that bf16_dot_loop performs per thread (16 lanes x 2 products x multiply and add).
double bf16_dot_loop_flops(int64_t iterations);
bool has_bf16_dot();

// GFLOP/s of the fastest of `passes` bf16_dot_loop runs (about 0.1 s in all); 0 without
// AVX512_BF16.
double measure_bf16_dot_peak_gflops(int passes = 3);

// One run of `iterations` steps of 4 independent AMX tile products (tdpbf16ps, 16 x 16 x 32) on
// the calling thread; returns the sum of one element of each sum tile. The caller checks
// has_amx_dot() first.
float amx_dot_loop(int64_t iterations);
double amx_dot_loop_flops(int64_t iterations);
// Whether the bf16 GEMM runs on AMX tiles (cpu::amx_selected()).
bool has_amx_dot();

// One run of `iterations` steps of 12 independent 256-bit FMAs (the AVX2 GEMM's arithmetic);
// returns the sum of the accumulators. Needs AVX2 and FMA (detected_isa() at least avx2).
float fma_loop(int64_t iterations);
// FLOPs that fma_loop performs per thread (8 lanes x multiply and add).
double fma_loop_flops(int64_t iterations);

// The register-only rate of the arithmetic that `isa`'s GEMM runs: AMX tile products at avx512
// where the bf16 GEMM runs on them, else vdpbf16ps; 256-bit FMA at avx2 (the f32 GEMM); 0 at
// portable. gemm_peak_name() names it (amx_tiles: the bf16 GEMM ran on AMX tiles).
double measure_gemm_peak_gflops(Isa isa, int passes = 3);
const char* gemm_peak_name(Isa isa, bool amx_tiles);

}  // namespace fornace::roofs
