// Test-only fault injection, read from FORNACE_BENCH_TEST_FAULT; the fault tests use it to make
// a child abort or hang and to make writing the CSV fail. Never set it for a real bench.
//   abort:<kind>  the child of that KV cache aborts after its first recorded run
//   hang:<kind>   the child of that KV cache sleeps forever after its first recorded run
//   fail-write    writing the runs CSV throws after its header
#pragma once

#include <cstdlib>
#include <string>

namespace fornace::bench {

struct TestFault {
  enum class Kind { none, abort_child, hang_child, fail_write };
  Kind kind = Kind::none;
  std::string kv_cache;  // For abort_child and hang_child.

  static TestFault from_environment() {
    TestFault fault;
    const char* value = std::getenv("FORNACE_BENCH_TEST_FAULT");
    if (!value) return fault;
    std::string text = value;
    if (text == "fail-write") {
      fault.kind = Kind::fail_write;
    } else if (text.rfind("abort:", 0) == 0) {
      fault.kind = Kind::abort_child;
      fault.kv_cache = text.substr(6);
    } else if (text.rfind("hang:", 0) == 0) {
      fault.kind = Kind::hang_child;
      fault.kv_cache = text.substr(5);
    }
    return fault;
  }
};

}  // namespace fornace::bench
