// Strided f32 loads and stores with dtype conversion, and row offsets of a layout.
#include "cpu/strided_access.h"

#include "cpu/elementwise.h"

namespace fornace::cpu {

int64_t row_offset(const Layout& layout, int64_t row) {
  int64_t offset = layout.offset;
  for (int dim = layout.rank() - 2; dim >= 0; --dim) {
    int64_t extent = layout.shape[dim];
    offset += (row % extent) * layout.strides[dim];
    row /= extent;
  }
  return offset;
}

namespace {

template <typename Element, typename Convert>
void load_run(const Element* source, int64_t stride, int64_t count, float* buffer,
              Convert convert) {
  if (stride == 1) {
    for (int64_t i = 0; i < count; ++i) buffer[i] = convert(source[i]);
  } else {
    for (int64_t i = 0; i < count; ++i) buffer[i] = convert(source[i * stride]);
  }
}

}  // namespace

void load_f32(const void* base, DType dtype, int64_t offset, int64_t stride, int64_t count,
              float* buffer) {
  switch (dtype) {
    case DType::f32:
      load_run(static_cast<const float*>(base) + offset, stride, count, buffer,
               [](float value) { return value; });
      break;
    case DType::bf16:
      load_run(static_cast<const uint16_t*>(base) + offset, stride, count, buffer, bf16_to_f32);
      break;
    case DType::f16:
      if (stride == 1) {
        widen_f16_run(static_cast<const uint16_t*>(base) + offset, buffer, count);
      } else {
        load_run(static_cast<const uint16_t*>(base) + offset, stride, count, buffer, f16_to_f32);
      }
      break;
    case DType::i32:
      load_run(static_cast<const int32_t*>(base) + offset, stride, count, buffer,
               [](int32_t value) { return static_cast<float>(value); });
      break;
    case DType::u32:
      load_run(static_cast<const uint32_t*>(base) + offset, stride, count, buffer,
               [](uint32_t value) { return static_cast<float>(value); });
      break;
  }
}

const float* read_f32(const void* base, DType dtype, int64_t offset, int64_t stride,
                      int64_t count, float* buffer) {
  if (dtype == DType::f32 && (stride == 1 || count == 1)) {
    return static_cast<const float*>(base) + offset;
  }
  load_f32(base, dtype, offset, stride, count, buffer);
  return buffer;
}

void store_f32(void* base, DType dtype, int64_t offset, const float* values, int64_t count) {
  switch (dtype) {
    case DType::f32: {
      float* out = static_cast<float*>(base) + offset;
      if (out != values) std::copy(values, values + count, out);
      break;
    }
    case DType::bf16:
      round_to_bf16_run(values, static_cast<uint16_t*>(base) + offset, count);
      break;
    case DType::f16: {
      uint16_t* out = static_cast<uint16_t*>(base) + offset;
      for (int64_t i = 0; i < count; ++i) out[i] = f32_to_f16(values[i]);
      break;
    }
    case DType::i32: {
      int32_t* out = static_cast<int32_t*>(base) + offset;
      for (int64_t i = 0; i < count; ++i) out[i] = static_cast<int32_t>(values[i]);
      break;
    }
    case DType::u32: {
      uint32_t* out = static_cast<uint32_t*>(base) + offset;
      for (int64_t i = 0; i < count; ++i) out[i] = static_cast<uint32_t>(values[i]);
      break;
    }
  }
}

}  // namespace fornace::cpu
