// Where the tests find the source tree, the build tree and python3, set at configure time.
#pragma once

#include <string>

namespace fornace::test_paths {

// The source tree's root, with `relative` appended after a '/' when it is not empty.
std::string source(const std::string& relative = "");
// The build tree's root (programs in bin/), with `relative` appended likewise.
std::string build(const std::string& relative = "");
// The python3 the tests run reference scripts with.
std::string python();

}  // namespace fornace::test_paths
