// Tensor: a shared Storage, a Layout and a DType. Views share storage and never copy.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/layout.h"
#include "core/storage.h"

namespace fornace {

class Tensor {
 public:
  Tensor() = default;
  Tensor(std::shared_ptr<Storage> storage, Layout layout, DType dtype);

  // A new contiguous tensor with uninitialised elements.
  static Tensor empty(const Dims& shape, DType dtype, Device device = Device::cpu);

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_->device(); }
  const Layout& layout() const { return layout_; }
  const Dims& shape() const { return layout_.shape; }
  const Dims& strides() const { return layout_.strides; }
  int rank() const { return layout_.rank(); }
  int64_t dim(int64_t index) const;  // Extent of a dim; negative counts from the end.
  int64_t numel() const { return layout_.numel(); }
  size_t element_size() const { return dtype_size(dtype_); }
  bool is_contiguous() const { return layout_.is_contiguous(); }
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  bool shares_storage(const Tensor& other) const { return storage_ == other.storage_; }

  // Pointer to the element at the layout's offset.
  void* raw() const;
  template <typename T>
  T* data() const {
    return static_cast<T*>(raw());
  }

  // Views: new layouts over the same storage. None copies.
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor permute(const std::vector<int64_t>& order) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor broadcast_as(const Dims& shape) const;
  // A view with a new shape (one extent may be -1). Throws Error when the strides do not allow a
  // view; ops' reshape() copies in that case instead.
  Tensor view(const Dims& shape) const;

  // "bf16[1, 14, 7, 64]" with " (strided)" when not contiguous; for error messages.
  std::string describe() const;

 private:
  Tensor with_layout(Layout layout) const;
  std::shared_ptr<Storage> storage_;
  Layout layout_;
  DType dtype_ = DType::f32;
};

}  // namespace fornace
