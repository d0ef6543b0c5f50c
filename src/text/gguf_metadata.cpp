// Tokenizer metadata for GGUF files.
#include "text/gguf_metadata.h"

#include <filesystem>

namespace fornace {

std::vector<GgufKeyValue> gguf_tokenizer_metadata(const std::string& model_path, int64_t) {
  std::vector<GgufKeyValue> metadata;
  if (std::filesystem::is_regular_file(model_path)) {
    std::shared_ptr<GgufFile> file = GgufFile::open(model_path);
    for (const GgufKeyValue& entry : file->metadata()) {
      if (entry.key.rfind("tokenizer.", 0) == 0) metadata.push_back(entry);
    }
  }
  return metadata;
}

}  // namespace fornace
