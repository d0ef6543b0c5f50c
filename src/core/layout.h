// Dims (a fixed-capacity shape), and Layout: shape, strides in elements and a start offset.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

namespace fornace {

constexpr int kMaxRank = 6;

// A small inline vector of extents or strides; it never allocates.
class Dims {
 public:
  Dims() = default;
  Dims(std::initializer_list<int64_t> values);
  explicit Dims(const std::vector<int64_t>& values);

  int size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int64_t operator[](int index) const { return values_[index]; }
  int64_t& operator[](int index) { return values_[index]; }
  const int64_t* begin() const { return values_.data(); }
  const int64_t* end() const { return values_.data() + size_; }
  int64_t back() const { return values_[size_ - 1]; }
  void push_back(int64_t value);
  void insert(int index, int64_t value);
  void erase(int index);
  int64_t product() const;
  std::vector<int64_t> to_vector() const { return {begin(), end()}; }
  std::string to_string() const;  // "[2, 3, 4]"

  friend bool operator==(const Dims& left, const Dims& right);

 private:
  std::array<int64_t, kMaxRank> values_{};
  int size_ = 0;
};

// Maps a possibly negative dim to [0, rank); throws Error naming `op` when it is out of range.
int normalize_dim(int64_t dim, int rank, const char* op);

struct Layout {
  Dims shape;
  Dims strides;  // In elements; 0 for a broadcast dim.
  int64_t offset = 0;

  static Layout contiguous(const Dims& shape, int64_t offset = 0);
  int rank() const { return shape.size(); }
  int64_t numel() const { return shape.product(); }
  // Row-major with unit innermost stride (extent-1 dims may have any stride).
  bool is_contiguous() const;
  // The element span [min, max] offsets that the layout touches, for bounds checks.
  int64_t max_offset() const;

  // Views. Each returns a new layout over the same elements and throws Error on bad arguments.
  Layout transpose(int64_t dim0, int64_t dim1) const;
  Layout permute(const std::vector<int64_t>& order) const;
  Layout narrow(int64_t dim, int64_t start, int64_t length) const;
  Layout squeeze(int64_t dim) const;
  Layout unsqueeze(int64_t dim) const;
  Layout broadcast_as(const Dims& target) const;
  // A view with a new shape, when the strides allow one; nullopt when a copy would be needed.
  std::optional<Layout> reshaped(const Dims& target) const;
};

// Resolves one -1 extent in `target` against `numel`; throws Error naming `op` on a mismatch.
Dims infer_shape(const Dims& target, int64_t numel, const Dims& source, const char* op);
// The shape two operands broadcast to (NumPy rules); throws Error naming `op`.
Dims broadcast_shapes(const Dims& left, const Dims& right, const char* op);

}  // namespace fornace
