// Copy kernels on raw pointers: the generic strided copy (with dtype conversion) and block copy.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/layout.h"

namespace fornace::cpu {

// Both strided copies return the number of unbroken runs they copied in: stretches that are
// consecutive in source and destination alike (one element each where a side is not).

// Copies every element of `source_layout` (over `source`, typed `source_dtype`) into the
// contiguous buffer `destination` of `destination_dtype`, in row-major order.
int64_t strided_to_contiguous(void* destination, DType destination_dtype, const void* source,
                           DType source_dtype, const Layout& source_layout);

// Copies between two layouts of one shape, any strides, converting dtype as needed.
int64_t strided_to_strided(void* destination, DType destination_dtype,
                        const Layout& destination_layout, const void* source, DType source_dtype,
                        const Layout& source_layout);

// Converts `count` contiguous elements.
void convert(void* destination, DType destination_dtype, const void* source, DType source_dtype,
             int64_t count);

}  // namespace fornace::cpu
