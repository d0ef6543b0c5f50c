// The error type of a malformed command line, which the tools report with exit code 2.
#pragma once

#include "core/error.h"

namespace fornace::tools {

// A malformed command line: printed as "error: ..." with exit code 2.
class UsageError : public Error {
 public:
  using Error::Error;
};

}  // namespace fornace::tools
