// Bench prompt files: UTF-8 text for the model's tokenizer, or token ids in a file ending ".ids".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fornace::bench {

// A prompt file whose name ends in ".ids" holds token ids separated by spaces, commas or line
// breaks; any other file is text.
bool is_ids_prompt(const std::string& path);

// Reads and checks a prompt file: it must exist, be readable and not be empty, and an ids file
// must hold only ids. Throws Error naming the path. Returns the file's text.
std::string read_prompt_file(const std::string& path);

// The ids of an ids file's text; throws Error naming `path` on anything that is not an id.
std::vector<uint32_t> parse_prompt_ids(const std::string& text, const std::string& path);

// Splits "a,b,c" into its items; an empty item throws Error.
std::vector<std::string> split_list(const std::string& text);

}  // namespace fornace::bench
