// Tensor views and bookkeeping.
#include "core/tensor.h"

#include "core/error.h"

namespace fornace {

Tensor::Tensor(std::shared_ptr<Storage> storage, Layout layout, DType dtype)
    : storage_(std::move(storage)), layout_(std::move(layout)), dtype_(dtype) {
  if (!storage_) fail("tensor: null storage");
  int64_t needed = layout_.numel() == 0 ? 0 : (layout_.max_offset() + 1) * dtype_size(dtype_);
  if (layout_.offset < 0 || needed > static_cast<int64_t>(storage_->bytes())) {
    fail("tensor: layout ", layout_.shape.to_string(), " at offset ", layout_.offset,
         " needs ", needed, " bytes but the storage has ", storage_->bytes());
  }
}

Tensor Tensor::empty(const Dims& shape, DType dtype, Device device) {
  for (int64_t extent : shape) {
    if (extent < 0) fail("empty: negative extent in shape ", shape.to_string());
  }
  size_t bytes = static_cast<size_t>(shape.product()) * dtype_size(dtype);
  return Tensor(Storage::allocate(bytes, device), Layout::contiguous(shape), dtype);
}

int64_t Tensor::dim(int64_t index) const { return layout_.shape[normalize_dim(index, rank(), "dim")]; }

void* Tensor::raw() const {
  return static_cast<char*>(storage_->data()) + layout_.offset * static_cast<int64_t>(element_size());
}

Tensor Tensor::with_layout(Layout layout) const {
  Tensor result;
  result.storage_ = storage_;
  result.layout_ = std::move(layout);
  result.dtype_ = dtype_;
  return result;
}

Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const {
  return with_layout(layout_.transpose(dim0, dim1));
}
Tensor Tensor::permute(const std::vector<int64_t>& order) const {
  return with_layout(layout_.permute(order));
}
Tensor Tensor::narrow(int64_t dim, int64_t start, int64_t length) const {
  return with_layout(layout_.narrow(dim, start, length));
}
Tensor Tensor::squeeze(int64_t dim) const { return with_layout(layout_.squeeze(dim)); }
Tensor Tensor::unsqueeze(int64_t dim) const { return with_layout(layout_.unsqueeze(dim)); }
Tensor Tensor::broadcast_as(const Dims& shape) const {
  return with_layout(layout_.broadcast_as(shape));
}

Tensor Tensor::view(const Dims& shape) const {
  Dims target = infer_shape(shape, numel(), this->shape(), "view");
  std::optional<Layout> layout = layout_.reshaped(target);
  if (!layout) {
    fail("view: cannot view ", describe(), " as ", target.to_string(),
         " without a copy; use reshape");
  }
  return with_layout(*layout);
}

std::string Tensor::describe() const {
  return concat(dtype_name(dtype_), shape().to_string(), is_contiguous() ? "" : " (strided)");
}

}  // namespace fornace
