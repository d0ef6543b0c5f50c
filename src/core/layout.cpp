// Layout arithmetic: contiguity, views and broadcasting rules.
#include "core/layout.h"

#include <algorithm>

#include "core/error.h"

namespace fornace {

Dims::Dims(std::initializer_list<int64_t> values) {
  for (int64_t value : values) push_back(value);
}

Dims::Dims(const std::vector<int64_t>& values) {
  for (int64_t value : values) push_back(value);
}

void Dims::push_back(int64_t value) {
  if (size_ >= kMaxRank) fail("rank above the maximum of ", kMaxRank);
  values_[size_++] = value;
}

void Dims::insert(int index, int64_t value) {
  if (size_ >= kMaxRank) fail("rank above the maximum of ", kMaxRank);
  for (int i = size_; i > index; --i) values_[i] = values_[i - 1];
  values_[index] = value;
  ++size_;
}

void Dims::erase(int index) {
  for (int i = index; i + 1 < size_; ++i) values_[i] = values_[i + 1];
  --size_;
}

int64_t Dims::product() const {
  int64_t result = 1;
  for (int64_t value : *this) result *= value;
  return result;
}

std::string Dims::to_string() const {
  std::string text = "[";
  for (int i = 0; i < size_; ++i) {
    if (i) text += ", ";
    text += std::to_string(values_[i]);
  }
  return text + "]";
}

bool operator==(const Dims& left, const Dims& right) {
  return left.size_ == right.size_ && std::equal(left.begin(), left.end(), right.begin());
}

int normalize_dim(int64_t dim, int rank, const char* op) {
  int64_t normalized = dim < 0 ? dim + rank : dim;
  if (normalized < 0 || normalized >= rank) {
    fail(op, ": dim ", dim, " out of range for rank ", rank);
  }
  return static_cast<int>(normalized);
}

Layout Layout::contiguous(const Dims& shape, int64_t offset) {
  Layout layout;
  layout.shape = shape;
  layout.offset = offset;
  layout.strides = shape;
  int64_t stride = 1;
  for (int i = shape.size() - 1; i >= 0; --i) {
    layout.strides[i] = stride;
    stride *= shape[i];
  }
  return layout;
}

bool Layout::is_contiguous() const {
  int64_t expected = 1;
  for (int i = rank() - 1; i >= 0; --i) {
    if (shape[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

int64_t Layout::max_offset() const {
  int64_t result = offset;
  for (int i = 0; i < rank(); ++i) {
    if (shape[i] == 0) return offset;
    result += (shape[i] - 1) * strides[i];
  }
  return result;
}

Layout Layout::transpose(int64_t dim0, int64_t dim1) const {
  int first = normalize_dim(dim0, rank(), "transpose");
  int second = normalize_dim(dim1, rank(), "transpose");
  Layout result = *this;
  std::swap(result.shape[first], result.shape[second]);
  std::swap(result.strides[first], result.strides[second]);
  return result;
}

Layout Layout::permute(const std::vector<int64_t>& order) const {
  if (static_cast<int>(order.size()) != rank()) {
    fail("permute: ", order.size(), " dims given for a tensor of shape ", shape.to_string());
  }
  Layout result = *this;
  std::array<bool, kMaxRank> seen{};
  for (int i = 0; i < rank(); ++i) {
    int source = normalize_dim(order[i], rank(), "permute");
    if (seen[source]) fail("permute: dim ", order[i], " repeated");
    seen[source] = true;
    result.shape[i] = shape[source];
    result.strides[i] = strides[source];
  }
  return result;
}

Layout Layout::narrow(int64_t dim, int64_t start, int64_t length) const {
  int axis = normalize_dim(dim, rank(), "narrow");
  if (start < 0 || length < 0 || start + length > shape[axis]) {
    fail("narrow: range [", start, ", ", start + length, ") out of bounds for dim ", dim,
         " of shape ", shape.to_string());
  }
  Layout result = *this;
  result.shape[axis] = length;
  result.offset += start * strides[axis];
  return result;
}

Layout Layout::squeeze(int64_t dim) const {
  int axis = normalize_dim(dim, rank(), "squeeze");
  if (shape[axis] != 1) fail("squeeze: dim ", dim, " of shape ", shape.to_string(), " is not 1");
  Layout result = *this;
  result.shape.erase(axis);
  result.strides.erase(axis);
  return result;
}

Layout Layout::unsqueeze(int64_t dim) const {
  int axis = normalize_dim(dim, rank() + 1, "unsqueeze");
  Layout result = *this;
  int64_t stride = axis < rank() ? shape[axis] * strides[axis] : 1;
  result.shape.insert(axis, 1);
  result.strides.insert(axis, stride);
  return result;
}

Layout Layout::broadcast_as(const Dims& target) const {
  if (target.size() < rank()) {
    fail("broadcast_as: cannot broadcast ", shape.to_string(), " to ", target.to_string());
  }
  Layout result;
  result.offset = offset;
  result.shape = target;
  result.strides = target;
  int lead = target.size() - rank();
  for (int i = 0; i < target.size(); ++i) {
    if (i < lead) {
      result.strides[i] = 0;
      continue;
    }
    int64_t extent = shape[i - lead];
    if (extent == target[i]) {
      result.strides[i] = strides[i - lead];
    } else if (extent == 1) {
      result.strides[i] = 0;
    } else {
      fail("broadcast_as: cannot broadcast ", shape.to_string(), " to ", target.to_string());
    }
  }
  return result;
}

std::optional<Layout> Layout::reshaped(const Dims& target) const {
  Layout result = Layout::contiguous(target, offset);
  if (numel() == 0 || rank() == 0) return result;
  // Source dims fall into chunks that are each one uniform-stride block. Each chunk must map to a
  // run of target dims with the same element count; those take strides from the chunk's base.
  int target_dim = target.size() - 1;
  int64_t chunk_base_stride = strides[rank() - 1];
  int64_t chunk_numel = 1;
  int64_t target_numel = 1;
  for (int source_dim = rank() - 1; source_dim >= 0; --source_dim) {
    chunk_numel *= shape[source_dim];
    bool chunk_ends = source_dim == 0 || (shape[source_dim - 1] != 1 &&
                                          strides[source_dim - 1] != chunk_numel * chunk_base_stride);
    if (!chunk_ends) continue;
    while (target_dim >= 0 && (target_numel < chunk_numel || target[target_dim] == 1)) {
      result.strides[target_dim] = target_numel * chunk_base_stride;
      target_numel *= target[target_dim];
      --target_dim;
    }
    if (target_numel != chunk_numel) return std::nullopt;
    if (source_dim > 0) {
      chunk_base_stride = strides[source_dim - 1];
      chunk_numel = 1;
      target_numel = 1;
    }
  }
  if (target_dim != -1) return std::nullopt;
  return result;
}

Dims infer_shape(const Dims& target, int64_t numel, const Dims& source, const char* op) {
  Dims resolved = target;
  int unknown = -1;
  int64_t known = 1;
  for (int i = 0; i < target.size(); ++i) {
    if (target[i] == -1) {
      if (unknown >= 0) fail(op, ": more than one -1 in ", target.to_string());
      unknown = i;
    } else if (target[i] < 0) {
      fail(op, ": negative extent in ", target.to_string());
    } else {
      known *= target[i];
    }
  }
  if (unknown >= 0) {
    if (known == 0 || numel % known != 0) {
      fail(op, ": cannot reshape ", source.to_string(), " to ", target.to_string());
    }
    resolved[unknown] = numel / known;
  } else if (known != numel) {
    fail(op, ": cannot reshape ", source.to_string(), " (", numel, " elements) to ",
         target.to_string());
  }
  return resolved;
}

Dims broadcast_shapes(const Dims& left, const Dims& right, const char* op) {
  int rank = std::max(left.size(), right.size());
  Dims result;
  for (int i = 0; i < rank; ++i) {
    int64_t a = i - (rank - left.size()) >= 0 ? left[i - (rank - left.size())] : 1;
    int64_t b = i - (rank - right.size()) >= 0 ? right[i - (rank - right.size())] : 1;
    if (a != b && a != 1 && b != 1) {
      fail(op, ": shapes ", left.to_string(), " and ", right.to_string(), " do not broadcast");
    }
    result.push_back(a == 1 ? b : a);
  }
  return result;
}

}  // namespace fornace
