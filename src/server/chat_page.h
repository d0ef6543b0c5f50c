// The chat page that `fornace serve` answers at `/`: one HTML file with its styles and script,
// embedded at build time from src/server/chat_page.html.
#pragma once

#include <string_view>

namespace fornace::server {

std::string_view chat_page_html();

}  // namespace fornace::server
