// The API key check of `fornace serve --api-key`: a bearer token compared in constant time.
#pragma once

#include <string_view>

namespace fornace::server {

// Whether `a` equals `b`, in a time that depends on their lengths but not on where they differ.
bool constant_time_equals(std::string_view a, std::string_view b);

// Whether an Authorization header value is "Bearer <key>" (scheme case-insensitive).
bool authorized(std::string_view authorization_header, std::string_view key);

}  // namespace fornace::server
