// The configure-time paths, compiled in this one file so that every other test object stays the
// same in any clone (ccache hits across clones).
#include "common/source_paths.h"

namespace fornace::test_paths {

namespace {

std::string joined(const char* root, const std::string& relative) {
  return relative.empty() ? std::string(root) : std::string(root) + "/" + relative;
}

}  // namespace

std::string source(const std::string& relative) { return joined(FORNACE_SOURCE_DIR, relative); }
std::string build(const std::string& relative) { return joined(FORNACE_BINARY_DIR, relative); }
std::string python() { return FORNACE_PYTHON; }

}  // namespace fornace::test_paths
