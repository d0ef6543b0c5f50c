// fnv1a_hash against the published FNV-1a 64-bit test vectors.
#include "core/hash.h"

#include <gtest/gtest.h>

namespace fornace {
namespace {

TEST(Fnv1aHash, MatchesThePublishedTestVectors) {
  EXPECT_EQ(fnv1a_hash(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a_hash("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a_hash("foobar"), 0x85944171f73967e8ull);
}

}  // namespace
}  // namespace fornace
