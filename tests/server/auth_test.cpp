// The API key check: constant-time equality and the bearer header.
#include "server/auth.h"

#include <gtest/gtest.h>

namespace fornace::server {
namespace {

TEST(ConstantTimeEquals, EqualOnlyForTheSameBytes) {
  EXPECT_TRUE(constant_time_equals("secret-key", "secret-key"));
  EXPECT_TRUE(constant_time_equals("", ""));
  EXPECT_FALSE(constant_time_equals("secret-key", "secret-kex"));
  EXPECT_FALSE(constant_time_equals("secret-key", "Secret-key"));
  EXPECT_FALSE(constant_time_equals("secret-key", "secret-ke"));
  EXPECT_FALSE(constant_time_equals("secret-key", "secret-keyy"));
  EXPECT_FALSE(constant_time_equals("secret-key", ""));
  EXPECT_FALSE(constant_time_equals("", "x"));
  // A guess that repeats the key is not the key.
  EXPECT_FALSE(constant_time_equals("ab", "abab"));
  EXPECT_FALSE(constant_time_equals(std::string_view("a\0b", 3), std::string_view("a\0c", 3)));
}

TEST(Authorized, NeedsBearerAndTheKey) {
  EXPECT_TRUE(authorized("Bearer sk-123", "sk-123"));
  EXPECT_TRUE(authorized("bearer sk-123", "sk-123"));
  EXPECT_TRUE(authorized("BEARER  sk-123", "sk-123"));
  EXPECT_FALSE(authorized("Bearer sk-124", "sk-123"));
  EXPECT_FALSE(authorized("Basic sk-123", "sk-123"));
  EXPECT_FALSE(authorized("sk-123", "sk-123"));
  EXPECT_FALSE(authorized("", "sk-123"));
  EXPECT_FALSE(authorized("Bearer ", "sk-123"));
  EXPECT_FALSE(authorized("Bearer sk-123 ", "sk-123"));
}

}  // namespace
}  // namespace fornace::server
