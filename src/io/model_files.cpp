// Opening a model path once: the GGUF file parsed, or the checkpoint's files mapped on demand.
#include "io/model_files.h"

#include "core/error.h"

namespace fornace {

std::shared_ptr<const ModelFiles> ModelFiles::open(const std::string& path,
                                                   const FileMappingOptions& mapping) {
  std::shared_ptr<ModelFiles> files(new ModelFiles());
  files->path_ = path;
  files->mapping_ = mapping;
  if (is_gguf_path(path)) files->gguf_ = GgufFile::open(path, mapping);
  return files;
}

const Checkpoint& ModelFiles::checkpoint() const {
  if (gguf_) fail(path_, ": a GGUF file, not a checkpoint directory");
  std::call_once(checkpoint_opened_,
                 [&] { checkpoint_.emplace(Checkpoint::open_directory(path_, mapping_)); });
  return *checkpoint_;
}

std::vector<std::string> ModelFiles::weight_files() const {
  if (gguf_) return {path_};
  std::vector<std::string> paths;
  for (const auto& file : checkpoint().files()) paths.push_back(file->path());
  return paths;
}

std::vector<std::shared_ptr<const FileMapping>> ModelFiles::mappings() const {
  std::vector<std::shared_ptr<const FileMapping>> mappings;
  if (gguf_) {
    if (gguf_->file_mapping()) mappings.push_back(gguf_->file_mapping());
    return mappings;
  }
  if (!checkpoint_) return mappings;
  for (const auto& file : checkpoint_->files()) mappings.push_back(file->file_mapping());
  return mappings;
}

void ModelFiles::release_pages() const {
  for (const auto& mapping : mappings()) mapping->release_all_pages();
}

}  // namespace fornace
