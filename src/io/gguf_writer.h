// Writes GGUF files (version 3): metadata of every value type, aligned tensor data streamed one
// tensor at a time, through a temporary file and a rename.
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "io/gguf.h"

namespace fornace {

// A tensor that GgufWriter will write: dims in GGUF order (dims[0] is the row length).
struct GgufTensorSpec {
  std::string name;
  BlockType type = BlockType::f32;
  std::vector<int64_t> dims;
};

// Collects metadata and tensor infos, then writes the file. Tensors are laid out in the order
// they were added, each at the next multiple of the alignment (general.alignment when it is
// set, else 32).
class GgufWriter {
 public:
  // Fills `data` (exactly the tensor's bytes, zeroed) with tensor `index`, in add_tensor order.
  using Producer = std::function<void(size_t index, std::span<std::byte> data)>;

  // Sets `key`; setting a key again replaces its value and keeps its place.
  void set(const std::string& key, GgufValue value);
  // Adds a tensor of `type` with GGUF `dims` (dims[0] is the row length). The checks of
  // gguf_tensor_bytes and unique names are made when the file is written.
  void add_tensor(const std::string& name, BlockType type, std::vector<int64_t> dims);

  const std::vector<GgufKeyValue>& metadata() const { return metadata_; }
  const std::vector<GgufTensorSpec>& tensors() const { return tensors_; }

  // Writes `path` atomically: `produce` is called once per tensor, in order, and at most one
  // tensor's bytes are held at a time. On any error (including one thrown by `produce`) no file
  // is left at `path` (an existing one stays as it was) and the error is thrown. Errors name
  // `path` and the tensor or key.
  void write(const std::string& path, const Producer& produce) const;

 private:
  std::vector<GgufKeyValue> metadata_;
  std::vector<GgufTensorSpec> tensors_;
};

}  // namespace fornace
