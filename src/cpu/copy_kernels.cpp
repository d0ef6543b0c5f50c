// The generic strided copy: walks the source layout with an odometer over its outer dims and
// copies the innermost dim as a run (memcpy when it is unit-stride and the dtypes agree).
#include "cpu/copy_kernels.h"

#include <cstring>

#include "core/error.h"
#include "cpu/elementwise.h"

namespace fornace::cpu {
namespace {

inline float load_float(const void* base, DType dtype, int64_t index) {
  switch (dtype) {
    case DType::f32:
      return static_cast<const float*>(base)[index];
    case DType::bf16:
      return bf16_to_f32(static_cast<const uint16_t*>(base)[index]);
    case DType::f16:
      return f16_to_f32(static_cast<const uint16_t*>(base)[index]);
    case DType::i32:
      return static_cast<float>(static_cast<const int32_t*>(base)[index]);
    case DType::u32:
      return static_cast<float>(static_cast<const uint32_t*>(base)[index]);
  }
  return 0;
}

inline void store_float(void* base, DType dtype, int64_t index, float value) {
  switch (dtype) {
    case DType::f32:
      static_cast<float*>(base)[index] = value;
      break;
    case DType::bf16:
      static_cast<uint16_t*>(base)[index] = f32_to_bf16(value);
      break;
    case DType::f16:
      static_cast<uint16_t*>(base)[index] = f32_to_f16(value);
      break;
    case DType::i32:
      static_cast<int32_t*>(base)[index] = static_cast<int32_t>(value);
      break;
    case DType::u32:
      static_cast<uint32_t*>(base)[index] = static_cast<uint32_t>(value);
      break;
  }
}

// Copies `count` elements from source[i * source_stride] to destination[i * destination_stride].
void copy_run(char* destination, DType destination_dtype, int64_t destination_stride,
              const char* source, DType source_dtype, int64_t source_stride, int64_t count) {
  if (count <= 0) return;  // An empty tensor may have no storage: no memcpy from null.
  size_t size = dtype_size(source_dtype);
  if (destination_dtype == source_dtype) {
    if (destination_stride == 1 && source_stride == 1) {
      std::memcpy(destination, source, count * size);
      return;
    }
    if (size == 4) {
      auto* out = reinterpret_cast<uint32_t*>(destination);
      auto* in = reinterpret_cast<const uint32_t*>(source);
      for (int64_t i = 0; i < count; ++i) out[i * destination_stride] = in[i * source_stride];
    } else {
      auto* out = reinterpret_cast<uint16_t*>(destination);
      auto* in = reinterpret_cast<const uint16_t*>(source);
      for (int64_t i = 0; i < count; ++i) out[i * destination_stride] = in[i * source_stride];
    }
    return;
  }
  if (destination_dtype == DType::bf16 && source_dtype == DType::f32 && destination_stride == 1 &&
      source_stride == 1) {
    round_to_bf16_run(reinterpret_cast<const float*>(source),
                      reinterpret_cast<uint16_t*>(destination), count);
    return;
  }
  bool exact_integers = (destination_dtype == DType::i32 || destination_dtype == DType::u32) &&
                        (source_dtype == DType::i32 || source_dtype == DType::u32);
  if (exact_integers) {
    auto* out = reinterpret_cast<uint32_t*>(destination);
    auto* in = reinterpret_cast<const uint32_t*>(source);
    for (int64_t i = 0; i < count; ++i) out[i * destination_stride] = in[i * source_stride];
    return;
  }
  for (int64_t i = 0; i < count; ++i) {
    store_float(destination, destination_dtype, i * destination_stride,
                load_float(source, source_dtype, i * source_stride));
  }
}

int64_t copy_merged(void* destination, DType destination_dtype,
                    const Layout& destination_layout, const void* source, DType source_dtype,
                    const Layout& source_layout);

}  // namespace

int64_t strided_to_strided(void* destination, DType destination_dtype,
                           const Layout& destination_layout, const void* source,
                           DType source_dtype, const Layout& source_layout) {
  if (source_layout.numel() == 0) return 0;
  // Drop extent-1 dims and merge neighbours that are one block on both sides, so that a
  // contiguous region becomes one long run.
  Layout source_merged;
  Layout destination_merged;
  source_merged.offset = source_layout.offset;
  destination_merged.offset = destination_layout.offset;
  for (int dim = 0; dim < source_layout.rank(); ++dim) {
    int64_t extent = source_layout.shape[dim];
    if (extent == 1) continue;
    int last = source_merged.rank() - 1;
    if (last >= 0 &&
        source_merged.strides[last] == source_layout.strides[dim] * extent &&
        destination_merged.strides[last] == destination_layout.strides[dim] * extent) {
      source_merged.shape[last] *= extent;
      destination_merged.shape[last] *= extent;
      source_merged.strides[last] = source_layout.strides[dim];
      destination_merged.strides[last] = destination_layout.strides[dim];
      continue;
    }
    source_merged.shape.push_back(extent);
    source_merged.strides.push_back(source_layout.strides[dim]);
    destination_merged.shape.push_back(extent);
    destination_merged.strides.push_back(destination_layout.strides[dim]);
  }
  return copy_merged(destination, destination_dtype, destination_merged, source, source_dtype,
                     source_merged);
}

namespace {
int64_t copy_merged(void* destination, DType destination_dtype,
                    const Layout& destination_layout, const void* source, DType source_dtype,
                    const Layout& source_layout) {
  int rank = source_layout.rank();
  auto* out = static_cast<char*>(destination);
  auto* in = static_cast<const char*>(source);
  size_t out_size = dtype_size(destination_dtype);
  size_t in_size = dtype_size(source_dtype);
  if (rank == 0) {
    copy_run(out + destination_layout.offset * out_size, destination_dtype, 1,
             in + source_layout.offset * in_size, source_dtype, 1, 1);
    return 1;
  }
  int64_t inner = source_layout.shape[rank - 1];
  int64_t outer = source_layout.numel() / inner;
  bool unit_inner_strides =
      source_layout.strides[rank - 1] == 1 && destination_layout.strides[rank - 1] == 1;
  Dims index = source_layout.shape;
  for (int i = 0; i < rank; ++i) index[i] = 0;
  int64_t in_offset = source_layout.offset;
  int64_t out_offset = destination_layout.offset;
  for (int64_t row = 0; row < outer; ++row) {
    copy_run(out + out_offset * out_size, destination_dtype, destination_layout.strides[rank - 1],
             in + in_offset * in_size, source_dtype, source_layout.strides[rank - 1], inner);
    // Advance the odometer over the outer dims.
    for (int dim = rank - 2; dim >= 0; --dim) {
      ++index[dim];
      in_offset += source_layout.strides[dim];
      out_offset += destination_layout.strides[dim];
      if (index[dim] < source_layout.shape[dim]) break;
      in_offset -= source_layout.strides[dim] * source_layout.shape[dim];
      out_offset -= destination_layout.strides[dim] * source_layout.shape[dim];
      index[dim] = 0;
    }
  }
  return unit_inner_strides ? outer : outer * inner;
}

}  // namespace

int64_t strided_to_contiguous(void* destination, DType destination_dtype, const void* source,
                              DType source_dtype, const Layout& source_layout) {
  return strided_to_strided(destination, destination_dtype, Layout::contiguous(source_layout.shape),
                     source, source_dtype, source_layout);
}

void convert(void* destination, DType destination_dtype, const void* source, DType source_dtype,
             int64_t count) {
  copy_run(static_cast<char*>(destination), destination_dtype, 1,
           static_cast<const char*>(source), source_dtype, 1, count);
}

}  // namespace fornace::cpu
