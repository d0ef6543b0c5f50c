// attention() against a double-precision loop: grouped-query heads, causal masks, decode and
// prefill shapes, K/V in the layouts the KV caches produce, every ISA kernel and thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "common/settings_support.h"
#include "cpu/cpu_features.h"
#include "cpu/thread_pool.h"
#include "ops/copy.h"
#include "ops/math.h"
#include "ops/quantized.h"
#include "test_tensors.h"

namespace fornace {
namespace {

using test::random_values;

struct Shape {
  int64_t batch, query_heads, kv_heads, query_length, kv_length, head_dim;
};

// Logical values in [B, H, S, D] row-major order.
struct Inputs {
  Shape shape;
  std::vector<float> query, key, value;
};

Inputs random_inputs(const Shape& shape, uint64_t seed) {
  Inputs inputs{shape};
  int64_t query_count = shape.batch * shape.query_heads * shape.query_length * shape.head_dim;
  int64_t kv_count = shape.batch * shape.kv_heads * shape.kv_length * shape.head_dim;
  inputs.query = random_values(query_count, seed);
  inputs.key = random_values(kv_count, seed + 1);
  inputs.value = random_values(kv_count, seed + 2);
  return inputs;
}

std::vector<double> reference_attention(const Inputs& inputs, double scale, bool causal,
                                        int64_t window = 0) {
  const Shape& s = inputs.shape;
  std::vector<double> out(s.batch * s.query_heads * s.query_length * s.head_dim, 0.0);
  int64_t group = s.query_heads / s.kv_heads;
  std::vector<double> scores(s.kv_length);
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.query_heads; ++h) {
      int64_t kv = h / group;
      for (int64_t i = 0; i < s.query_length; ++i) {
        const float* q = &inputs.query[((b * s.query_heads + h) * s.query_length + i) * s.head_dim];
        int64_t visible = causal ? s.kv_length - s.query_length + i + 1 : s.kv_length;
        int64_t first = window ? std::max<int64_t>(0, visible - window) : 0;
        double maximum = -INFINITY;
        for (int64_t j = first; j < visible; ++j) {
          const float* k = &inputs.key[((b * s.kv_heads + kv) * s.kv_length + j) * s.head_dim];
          double dot = 0;
          for (int64_t d = 0; d < s.head_dim; ++d) dot += double(q[d]) * k[d];
          scores[j] = dot * scale;
          maximum = std::max(maximum, scores[j]);
        }
        double total = 0;
        for (int64_t j = first; j < visible; ++j) {
          total += scores[j] = std::exp(scores[j] - maximum);
        }
        double* o = &out[((b * s.query_heads + h) * s.query_length + i) * s.head_dim];
        for (int64_t j = first; j < visible; ++j) {
          const float* v = &inputs.value[((b * s.kv_heads + kv) * s.kv_length + j) * s.head_dim];
          for (int64_t d = 0; d < s.head_dim; ++d) o[d] += scores[j] / total * v[d];
        }
      }
    }
  }
  return out;
}

// How K or V is stored.
enum class KvLayout {
  contiguous,   // [B, H, S, D]
  transposed,   // a [B, S, H, D] buffer viewed as [B, H, S, D] (cat's V)
  narrowed,     // the first S positions of a preallocated [B, H, S + 37, D] cache
  reversed,     // every stride reversed, so D is not unit-stride (the slow path)
};
constexpr KvLayout kKvLayouts[] = {KvLayout::contiguous, KvLayout::transposed,
                                   KvLayout::narrowed, KvLayout::reversed};

Tensor make_kv(const std::vector<float>& values, const Shape& s, int64_t heads, int64_t length,
               KvLayout layout, DType dtype) {
  Dims shape{s.batch, heads, length, s.head_dim};
  switch (layout) {
    case KvLayout::contiguous:
      return from_vector(values, shape, dtype);
    case KvLayout::transposed: {
      std::vector<float> physical(values.size());
      for (int64_t b = 0; b < s.batch; ++b)
        for (int64_t h = 0; h < heads; ++h)
          for (int64_t p = 0; p < length; ++p)
            for (int64_t d = 0; d < s.head_dim; ++d)
              physical[((b * length + p) * heads + h) * s.head_dim + d] =
                  values[((b * heads + h) * length + p) * s.head_dim + d];
      return from_vector(physical, {s.batch, length, heads, s.head_dim}, dtype).transpose(1, 2);
    }
    case KvLayout::narrowed: {
      const int64_t capacity = length + 37;
      std::vector<float> physical(s.batch * heads * capacity * s.head_dim, NAN);
      for (int64_t row = 0; row < s.batch * heads; ++row)
        for (int64_t p = 0; p < length; ++p)
          for (int64_t d = 0; d < s.head_dim; ++d)
            physical[(row * capacity + p) * s.head_dim + d] =
                values[(row * length + p) * s.head_dim + d];
      return from_vector(physical, {s.batch, heads, capacity, s.head_dim}, dtype)
          .narrow(2, 0, length);
    }
    case KvLayout::reversed:
      return test::make_tensor(values, shape, dtype, test::Storage::reversed);
  }
  return {};
}

std::vector<cpu::Isa> supported_isas() {
  std::vector<cpu::Isa> isas{cpu::Isa::portable};
  if (cpu::detected_isa() >= cpu::Isa::avx2) isas.push_back(cpu::Isa::avx2);
  if (cpu::detected_isa() >= cpu::Isa::avx512) isas.push_back(cpu::Isa::avx512);
  return isas;
}

// Restores the thread count and ISA after a test changes them.
class AttentionTest : public ::testing::Test {
 protected:
  void TearDown() override {
    set_num_threads(0);
    cpu::reset_isa();
  }
};

// Checks attention() against the double loop and returns its result.
Tensor check(const Shape& shape, bool causal, KvLayout layout, DType kv_dtype, uint64_t seed,
             int64_t window = 0) {
  Inputs inputs = random_inputs(shape, seed);
  inputs.key = test::representable(inputs.key, kv_dtype);
  inputs.value = test::representable(inputs.value, kv_dtype);
  double scale = 1.0 / std::sqrt(double(shape.head_dim));
  std::vector<double> expected = reference_attention(inputs, scale, causal, window);
  Tensor query = from_vector(inputs.query, {shape.batch, shape.query_heads, shape.query_length,
                                            shape.head_dim});
  Tensor key = make_kv(inputs.key, shape, shape.kv_heads, shape.kv_length, layout, kv_dtype);
  Tensor value = make_kv(inputs.value, shape, shape.kv_heads, shape.kv_length, layout, kv_dtype);
  Tensor result = attention(query, key, value, scale, causal, window);
  std::string context = concat("attention (", cpu::isa_name(cpu::active_isa()), ", ",
                               num_threads(), " threads, causal ", causal, ", window ", window,
                               ") of q ",
                               query.describe(), ", k ", key.describe(), ", v ", value.describe(),
                               " strides ", value.strides().to_string());
  EXPECT_EQ(result.shape(), query.shape()) << context;
  EXPECT_TRUE(result.is_contiguous()) << context;
  // A bf16 cache runs on bf16 dot products with AVX512_BF16: Q and the softmax weights are
  // rounded to bf16 too (8 significant bits), so the result is as close as bf16 allows: about
  // 2^-8 of the values' scale (they lie in [-2, 2]).
  bool bf16_products = kv_dtype == DType::bf16 && cpu::active_isa() == cpu::Isa::avx512;
  test::expect_close(to_f64_vector(result), expected, bf16_products ? 2.0 / 256 : 2e-5,
                     bf16_products ? 1.0 / 128 : 1e-4, context);
  return result;
}

TEST_F(AttentionTest, DecodeMatchesTheReferenceForEveryCacheLayoutIsaAndThreadCount) {
  for (cpu::Isa isa : supported_isas()) {
    cpu::set_isa(isa);
    for (int threads : {1, 2, 3}) {
      set_num_threads(threads);
      for (KvLayout layout : kKvLayouts) {
        check({1, 14, 2, 1, 513, 64}, true, layout, DType::f32, 20);
        check({1, 14, 2, 1, 2049, 64}, false, layout, DType::f32, 21);
      }
    }
  }
}

TEST_F(AttentionTest, PrefillMatchesTheReferenceWithACausalMask) {
  for (cpu::Isa isa : supported_isas()) {
    cpu::set_isa(isa);
    for (KvLayout layout : kKvLayouts) {
      check({1, 14, 2, 33, 33, 64}, true, layout, DType::f32, 30);
      check({2, 4, 2, 17, 17, 3}, true, layout, DType::f32, 31);
      // Queries that continue a longer cache: row i sits at position Skv - Sq + i.
      check({1, 6, 3, 5, 70, 64}, true, layout, DType::f32, 32);
      check({1, 2, 2, 3, 4097, 17}, false, layout, DType::f32, 33);
    }
  }
}

TEST_F(AttentionTest, SlidingWindowRowsSeeOnlyTheirLastKeys) {
  for (cpu::Isa isa : supported_isas()) {
    cpu::set_isa(isa);
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      for (KvLayout layout : kKvLayouts) {
        check({1, 4, 1, 100, 100, 64}, true, layout, DType::f32, 35, 17);
        check({1, 4, 2, 37, 300, 64}, true, layout, DType::f32, 36, 64);
        check({1, 4, 2, 37, 300, 64}, true, layout, DType::f32, 37, 65);
        check({1, 8, 2, 9, 40, 16}, true, layout, DType::f32, 38, 1);
        // Decode over a long cache (key-range splits), and a window wider than the cache.
        check({1, 14, 2, 1, 2049, 64}, true, layout, DType::f32, 39, 512);
        check({1, 14, 2, 5, 20, 64}, true, layout, DType::bf16, 34, 512);
      }
    }
  }
}

TEST_F(AttentionTest, SizesOneAndOddHeadDimensions) {
  for (cpu::Isa isa : supported_isas()) {
    cpu::set_isa(isa);
    check({1, 1, 1, 1, 1, 1}, true, KvLayout::contiguous, DType::f32, 40);
    check({3, 3, 1, 1, 3, 17}, false, KvLayout::transposed, DType::f32, 41);
    check({1, 4, 4, 3, 3, 128}, true, KvLayout::narrowed, DType::f32, 42);
  }
}

TEST_F(AttentionTest, KeyBlockEdgesForDecodeAndPrefillInEveryLayout) {
  // The kernel walks keys in blocks of 128 and transposes them in 16-, 8- or 4-key tiles.
  for (cpu::Isa isa : supported_isas()) {
    cpu::set_isa(isa);
    for (KvLayout layout : kKvLayouts) {
      for (int64_t length : {1, 3, 17, 63, 64, 65, 127, 128, 129, 257}) {
        for (bool causal : {false, true}) {
          check({1, 14, 2, 1, length, 64}, causal, layout, DType::f32, 70 + length);
          check({1, 14, 2, length, length, 64}, causal, layout, DType::f32, 80 + length);
        }
      }
    }
  }
}

TEST_F(AttentionTest, LongCachesAndQueryTileEdges) {
  for (cpu::Isa isa : supported_isas()) {
    cpu::set_isa(isa);
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      // 4097 keys: 32 full blocks and one of a single key.
      check({1, 14, 2, 1, 4097, 64}, false, KvLayout::narrowed, DType::f32, 90);
      check({1, 2, 1, 65, 4097, 64}, true, KvLayout::transposed, DType::f32, 91);
      // A tile holds 84 query rows of one kv head: 12 positions of a 7-head group fill one
      // exactly, 13 spill one row group into a second, 25 need three tiles.
      for (int64_t length : {12, 13, 25}) {
        check({1, 14, 2, length, length, 64}, true, KvLayout::transposed, DType::f32, 92);
        check({1, 14, 2, length, 100, 64}, true, KvLayout::contiguous, DType::f32, 93);
      }
    }
  }
}

TEST_F(AttentionTest, HeadDimensionsThatAreNotAMultipleOfTheRegisterTile) {
  for (cpu::Isa isa : supported_isas()) {
    cpu::set_isa(isa);
    for (int64_t head_dim : {8, 72, 80, 128}) {
      check({1, 4, 2, 1, 150, head_dim}, false, KvLayout::transposed, DType::f32, 100);
      check({1, 4, 2, 70, 70, head_dim}, true, KvLayout::narrowed, DType::f32, 101);
    }
  }
}

TEST_F(AttentionTest, EveryCacheLayoutGivesBitwiseTheSameResult) {
  // The model demands identical logits from every KV cache kind, so the arithmetic must not
  // depend on where K and V come from.
  const Shape shapes[] = {{1, 14, 2, 1, 2049, 64}, {1, 14, 2, 1, 77, 64}, {1, 14, 2, 45, 45, 64},
                          {1, 14, 2, 3, 300, 64}};
  for (cpu::Isa isa : supported_isas()) {
    cpu::set_isa(isa);
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      for (const Shape& shape : shapes) {
        bool causal = shape.query_length > 1;
        Tensor first = check(shape, causal, KvLayout::contiguous, DType::f32, 110);
        for (KvLayout layout : {KvLayout::transposed, KvLayout::narrowed, KvLayout::reversed}) {
          Tensor other = check(shape, causal, layout, DType::f32, 110);
          EXPECT_EQ(to_f32_vector(other), to_f32_vector(first))
              << cpu::isa_name(isa) << ", " << threads << " threads, layout "
              << static_cast<int>(layout) << ", q " << other.describe();
        }
      }
    }
  }
}

TEST_F(AttentionTest, Bf16CachesGiveBitwiseTheSameResultInEveryLayoutTheCachesMake) {
  const Shape shapes[] = {{1, 14, 2, 1, 2049, 64}, {1, 14, 2, 1, 77, 64}, {1, 14, 2, 45, 45, 64},
                          {1, 4, 2, 3, 301, 128}};
  for (cpu::Isa isa : supported_isas()) {
    cpu::set_isa(isa);
    for (const Shape& shape : shapes) {
      bool causal = shape.query_length > 1;
      Tensor first = check(shape, causal, KvLayout::contiguous, DType::bf16, 120);
      for (KvLayout layout : {KvLayout::transposed, KvLayout::narrowed}) {
        Tensor other = check(shape, causal, layout, DType::bf16, 120);
        EXPECT_EQ(to_f32_vector(other), to_f32_vector(first))
            << cpu::isa_name(isa) << ", layout " << static_cast<int>(layout) << ", q "
            << other.describe();
      }
    }
  }
}

TEST_F(AttentionTest, Bf16CachesOnAmxTilesAndOnVectorPairsBothMatchTheReference) {
  // With AMX (where the CPU has it), scores come from 16-key tiles and weights · V from 32-key
  // tiles, up to 16 query rows a pass: key counts around those edges and the block's, tiles of
  // 84 rows (12 positions of a 7-head group), 13 and 25 positions, D 128, windows, splits.
  if (cpu::detected_isa() < cpu::Isa::avx512) GTEST_SKIP() << "no AVX-512 BF16 on this CPU";
  cpu::set_isa(cpu::Isa::avx512);
  std::vector<const char*> settings{"0"};
  if (cpu::cpu_features().amx_bf16) settings.push_back("1");
  for (const char* amx : settings) {
    cpu::select_kernels(settings_with("FORNACE_AMX", amx));
    EXPECT_EQ(cpu::amx_selected(), std::string(amx) == "1");
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      for (int64_t length : {1, 15, 16, 17, 31, 32, 33, 127, 128, 129, 257}) {
        check({1, 14, 2, 1, length, 64}, true, KvLayout::narrowed, DType::bf16, 130 + length);
        check({1, 14, 2, length, length, 64}, true, KvLayout::contiguous, DType::bf16,
              150 + length);
      }
      for (int64_t length : {12, 13, 25}) {
        check({1, 14, 2, length, 300, 64}, true, KvLayout::transposed, DType::bf16, 170);
      }
      check({1, 8, 1, 1, 1000, 128}, false, KvLayout::narrowed, DType::bf16, 171);
      check({1, 16, 1, 3, 200, 32}, true, KvLayout::contiguous, DType::bf16, 172);
      check({1, 4, 2, 37, 300, 64}, true, KvLayout::narrowed, DType::bf16, 173, 65);
      check({1, 14, 2, 1, 4097, 64}, true, KvLayout::narrowed, DType::bf16, 174, 512);
    }
  }
  cpu::select_kernels(EngineSettings{});
}

TEST_F(AttentionTest, ReadsHalfPrecisionCaches) {
  for (cpu::Isa isa : supported_isas()) {
    cpu::set_isa(isa);
    for (DType dtype : {DType::bf16, DType::f16}) {
      check({1, 14, 2, 1, 300, 64}, true, KvLayout::transposed, dtype, 50);
      check({1, 4, 2, 9, 9, 64}, true, KvLayout::contiguous, dtype, 51);
      check({1, 14, 2, 1, 301, 37}, true, KvLayout::contiguous, dtype, 52);
    }
  }
}

// Rows of blocks [B, H, S, words] laid out as a cache makes them: contiguous (a prealloc ring),
// transposed ([B, S, H, words] viewed), or the first S positions of a longer buffer whose other
// positions hold all-ones words (f16 NaN scales: reading one would show).
Tensor lay_out_blocks(const Tensor& blocks, KvLayout layout) {
  switch (layout) {
    case KvLayout::transposed:
      return contiguous(blocks.transpose(1, 2)).transpose(1, 2);
    case KvLayout::narrowed: {
      Dims dims = blocks.shape();
      const int64_t length = dims[2];
      dims[2] += 37;
      Tensor buffer = Tensor::empty(dims, DType::u32);
      std::fill(buffer.data<uint32_t>(), buffer.data<uint32_t>() + buffer.numel(), ~0u);
      slice_set(buffer, blocks, 2, 0);
      return buffer.narrow(2, 0, length);
    }
    default:
      return blocks;
  }
}

// attention() over K and V rounded to `type` blocks against the double loop over the values the
// blocks stand for (widened by cpu/quant's portable dequantize_row): the kernel's widening in
// registers must give exactly those values, so the bound is the f32 path's. With AVX512_BF16 the
// products run on bf16 pairs over the blocks' integer levels (exact in bf16), their scales
// applied in f32; Q and the softmax weights (times V's scales) are rounded to bf16 as for a bf16
// cache, so the bound is the bf16 cache's.
Tensor check_blocks(const Shape& shape, bool causal, KvLayout layout, BlockType type, uint64_t seed,
                    int64_t window = 0) {
  Inputs inputs = random_inputs(shape, seed);
  const Dims kv_dims{shape.batch, shape.kv_heads, shape.kv_length, shape.head_dim};
  Tensor key_blocks = quantize_rows(from_vector(inputs.key, kv_dims), type);
  Tensor value_blocks = quantize_rows(from_vector(inputs.value, kv_dims), type);
  inputs.key = to_f32_vector(dequantize_rows(key_blocks, type, shape.head_dim));
  inputs.value = to_f32_vector(dequantize_rows(value_blocks, type, shape.head_dim));
  double scale = 1.0 / std::sqrt(double(shape.head_dim));
  std::vector<double> expected = reference_attention(inputs, scale, causal, window);
  Tensor query = from_vector(inputs.query,
                             {shape.batch, shape.query_heads, shape.query_length, shape.head_dim});
  Tensor key = lay_out_blocks(key_blocks, layout);
  Tensor value = lay_out_blocks(value_blocks, layout);
  Tensor result = attention(query, key, value, scale, causal, window, type);
  std::string context = concat(
      "attention over ", block_format(type).name, " blocks (", cpu::isa_name(cpu::active_isa()),
      ", ", num_threads(), " threads, causal ", causal, ", window ", window, ", layout ",
      static_cast<int>(layout), ") of q ", query.describe(), ", k ", key.describe());
  const bool bf16_products = cpu::active_isa() == cpu::Isa::avx512;
  test::expect_close(to_f64_vector(result), expected, bf16_products ? 2.0 / 256 : 2e-5,
                     bf16_products ? 1.0 / 128 : 1e-4, context);
  return result;
}

constexpr KvLayout kBlockLayouts[] = {KvLayout::contiguous, KvLayout::transposed,
                                      KvLayout::narrowed};

TEST_F(AttentionTest, QuantizedCachesMatchTheReferenceOverTheirDequantizedValues) {
  for (cpu::Isa isa : supported_isas()) {
    cpu::set_isa(isa);
    for (BlockType type : {BlockType::q8_0, BlockType::q4_0}) {
      for (int threads : {1, 2}) {
        set_num_threads(threads);
        for (KvLayout layout : kBlockLayouts) {
          // Decode (with key-range splits at 2,049 keys), prefill, a sliding window, and head
          // dims of one block (Q4_0's 18 bytes padded to 5 words), two and four.
          check_blocks({1, 14, 2, 1, 513, 64}, true, layout, type, 200);
          check_blocks({1, 14, 2, 1, 2049, 64}, false, layout, type, 201);
          check_blocks({1, 14, 2, 33, 33, 64}, true, layout, type, 202);
          check_blocks({1, 4, 2, 37, 300, 64}, true, layout, type, 203, 65);
          check_blocks({2, 4, 1, 5, 129, 32}, true, layout, type, 204);
          check_blocks({1, 4, 4, 3, 70, 128}, true, layout, type, 205);
        }
      }
    }
  }
}

TEST_F(AttentionTest, QuantizedCachesGiveBitwiseTheSameResultInEveryLayout) {
  for (cpu::Isa isa : supported_isas()) {
    cpu::set_isa(isa);
    for (BlockType type : {BlockType::q8_0, BlockType::q4_0}) {
      Tensor first = check_blocks({1, 14, 2, 1, 300, 64}, false, KvLayout::contiguous, type, 210);
      for (KvLayout layout : {KvLayout::transposed, KvLayout::narrowed}) {
        Tensor other = check_blocks({1, 14, 2, 1, 300, 64}, false, layout, type, 210);
        EXPECT_EQ(to_f32_vector(other), to_f32_vector(first)) << cpu::isa_name(isa);
      }
    }
  }
}

TEST_F(AttentionTest, ANonFiniteScaleInOneCallNeverReachesTheNext) {
  // The tile's scratch outlives a call, scales past a block's keys included. One thread, so both
  // calls share it: the first call's last block holds 34 keys, the last with an infinite V
  // scale; the second call has one block of 33, whose odd last key pairs with that 34th place
  // (weight 0).
  set_num_threads(1);
  for (cpu::Isa isa : supported_isas()) {
    cpu::set_isa(isa);
    for (BlockType type : {BlockType::q8_0, BlockType::q4_0}) {
      Inputs inputs = random_inputs({1, 7, 1, 1, 290, 64}, 220);
      const Dims kv_dims{1, 1, 290, 64};
      Tensor key = quantize_rows(from_vector(inputs.key, kv_dims), type);
      Tensor value = quantize_rows(from_vector(inputs.value, kv_dims), type);
      const uint16_t infinity = 0x7c00;  // f16
      std::memcpy(value.data<uint32_t>() + 289 * value.shape()[3], &infinity, sizeof infinity);
      Tensor query = from_vector(inputs.query, {1, 7, 1, 64});
      std::vector<float> poisoned = to_f32_vector(attention(query, key, value, 0.125, false, 0, type));
      EXPECT_FALSE(std::isfinite(poisoned[0])) << cpu::isa_name(isa);
      check_blocks({1, 7, 1, 1, 33, 64}, false, KvLayout::contiguous, type, 221);
    }
  }
}

TEST_F(AttentionTest, QuantizedCachesRefuseRowsThatAreNotBlocksOfTheHeadDim) {
  Tensor query = from_vector(random_values(4 * 48, 1), {1, 4, 1, 48});
  Tensor rows = Tensor::empty({1, 2, 5, 10}, DType::u32);
  EXPECT_THROW(attention(query, rows, rows, 1.0, false, 0, BlockType::q8_0), Error);
  // Float rows, rows of the wrong width, and a block type the kernel does not read.
  Tensor query64 = from_vector(random_values(4 * 64, 1), {1, 4, 1, 64});
  Tensor floats = from_vector(random_values(2 * 5 * 64, 2), {1, 2, 5, 64});
  EXPECT_THROW(attention(query64, floats, floats, 1.0, false, 0, BlockType::q4_0), Error);
  Tensor q8_rows = quantize_rows(floats, BlockType::q8_0);
  EXPECT_THROW(attention(query64, q8_rows, q8_rows, 1.0, false, 0, BlockType::q4_0), Error);
  EXPECT_THROW(attention(query64, q8_rows, q8_rows, 1.0, false, 0, BlockType::q4_k), Error);
  EXPECT_NO_THROW(attention(query64, q8_rows, q8_rows, 1.0, false, 0, BlockType::q8_0));
}

TEST_F(AttentionTest, TransposedQueriesAndBf16QueriesKeepTheirDtype) {
  Shape shape{1, 4, 2, 5, 5, 8};
  Inputs inputs = random_inputs(shape, 60);
  inputs.query = test::representable(inputs.query, DType::bf16);
  std::vector<double> expected = reference_attention(inputs, 0.5, true);
  // Query stored as [B, S, H, D] and viewed as [B, H, S, D], in bf16.
  Tensor query = make_kv(inputs.query, shape, shape.query_heads, shape.query_length,
                         KvLayout::transposed, DType::bf16);
  Tensor key = from_vector(inputs.key, {1, 2, 5, 8});
  Tensor value = from_vector(inputs.value, {1, 2, 5, 8});
  Tensor result = attention(query, key, value, 0.5, true);
  EXPECT_EQ(result.dtype(), DType::bf16);
  test::expect_close(to_f64_vector(result), expected, 1e-3, 1.0 / 128, "bf16 attention");
}

TEST_F(AttentionTest, WritesTheHeadsMergedThroughATransposedOutput) {
  // Prefill tiles, and decode with key-range splits (combined into the output afterwards).
  for (const Shape& shape : {Shape{1, 4, 1, 37, 37, 64}, Shape{1, 4, 1, 1, 700, 32}}) {
    Inputs inputs = random_inputs(shape, 70);
    const bool causal = shape.query_length > 1;
    std::vector<double> expected = reference_attention(inputs, 0.25, causal);
    const auto [batch, query_heads, kv_heads, length, kv_length, head_dim] = shape;
    Tensor query = from_vector(inputs.query, {batch, query_heads, length, head_dim});
    Tensor key = from_vector(inputs.key, {batch, kv_heads, kv_length, head_dim});
    Tensor value = from_vector(inputs.value, {batch, kv_heads, kv_length, head_dim});
    for (cpu::Isa isa : supported_isas()) {
      cpu::set_isa(isa);
      for (int threads : {1, 2}) {
        set_num_threads(threads);
        Tensor merged = full({batch, length, query_heads * head_dim}, -7.0f);
        attention_into(merged.view({batch, length, query_heads, head_dim}).transpose(1, 2),
                       query, key, value, 0.25, causal);
        // merged[b, s, h * D + d] is result[b, h, s, d].
        std::vector<double> got = to_f64_vector(
            contiguous(merged.view({batch, length, query_heads, head_dim}).transpose(1, 2)));
        test::expect_close(got, expected, 2e-5, 1e-4,
                           concat("merged output, ", cpu::isa_name(isa), ", ", threads,
                                  " threads, q ", query.describe()));
        // A bf16 output (what o_proj of a bf16 model takes) holds the same values rounded.
        Tensor merged_bf16 = Tensor::empty({batch, length, query_heads * head_dim}, DType::bf16);
        attention_into(merged_bf16.view({batch, length, query_heads, head_dim}).transpose(1, 2),
                       query, key, value, 0.25, causal);
        std::vector<float> exact = to_f32_vector(merged);
        const auto* bits = merged_bf16.data<uint16_t>();
        for (size_t i = 0; i < exact.size(); ++i) {
          ASSERT_EQ(bits[i], f32_to_bf16(exact[i]))
              << "bf16 merged output element " << i << ", " << cpu::isa_name(isa);
        }
      }
    }
  }
  // Other strided outputs are refused.
  Tensor query = zeros({1, 2, 3, 8});
  Tensor kv = zeros({1, 2, 3, 8});
  std::string message = test::error_message([&] {
    attention_into(zeros({1, 2, 8, 3}).transpose(2, 3), query, kv, kv, 1.0, true);
  });
  EXPECT_NE(message.find("attention: output"), std::string::npos) << message;
}

TEST_F(AttentionTest, RejectsMismatchedShapesNamingThem) {
  Tensor query = zeros({1, 14, 1, 64});
  std::string message = test::error_message(
      [&] { attention(query, zeros({1, 3, 5, 64}), zeros({1, 3, 5, 64}), 1.0, true); });
  EXPECT_NE(message.find("attention: 14 query heads are not a multiple of 3 kv heads, query "
                         "f32[1, 14, 1, 64], key f32[1, 3, 5, 64]"),
            std::string::npos)
      << message;
  message = test::error_message(
      [&] { attention(query, zeros({1, 2, 5, 64}), zeros({1, 2, 6, 64}), 1.0, true); });
  EXPECT_NE(message.find("attention: key and value differ"), std::string::npos) << message;
  message = test::error_message(
      [&] { attention(query, zeros({1, 2, 5, 32}), zeros({1, 2, 5, 32}), 1.0, true); });
  EXPECT_NE(message.find("attention: batch or head_dim differ"), std::string::npos) << message;
  message = test::error_message(
      [&] { attention(zeros({1, 2, 4, 8}), zeros({1, 2, 3, 8}), zeros({1, 2, 3, 8}), 1.0, true); });
  EXPECT_NE(message.find("attention: causal with more query rows than keys"), std::string::npos)
      << message;
  message = test::error_message(
      [&] { attention(zeros({14, 64}), zeros({1, 2, 5, 64}), zeros({1, 2, 5, 64}), 1.0, true); });
  EXPECT_NE(message.find("attention: expected rank-4 [B, H, S, D] tensors, got query f32[14, 64]"),
            std::string::npos)
      << message;
}

}  // namespace
}  // namespace fornace
