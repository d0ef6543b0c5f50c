// PCRE2 compilation and the match loop of the Split pre-tokenizer.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "text/pre_tokenizer.h"

#include <pcre2.h>

#include <memory>

#include "core/error.h"

namespace fornace::text {
namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  if (pcre2_get_error_message(code, buffer, sizeof(buffer)) < 0) return concat("error ", code);
  return reinterpret_cast<const char*>(buffer);
}

// Match data and, after a JIT stack overflow, a larger JIT stack; freed together.
struct MatchState {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* stack = nullptr;
  ~MatchState() {
    pcre2_match_data_free(data);
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
  }
};

}  // namespace

RegexSplitter::RegexSplitter(const std::string& pattern, const std::string& field,
                             Behavior behavior)
    : pattern_(pattern), behavior_(behavior) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                        PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
  if (code_ == nullptr) {
    fail(field, ": the regex does not compile: ", pcre2_message(error_code), " at offset ",
         error_offset);
  }
  // Without JIT support PCRE2 interprets the pattern: slower, same result.
  jit_ = pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE) == 0;
}

RegexSplitter::~RegexSplitter() { pcre2_code_free(code_); }

void RegexSplitter::split(std::string_view text, std::vector<std::string_view>& pieces) const {
  MatchState state;
  state.data = pcre2_match_data_create_from_pattern(code_, nullptr);
  if (state.data == nullptr) throw std::bad_alloc();
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t gap_start = 0;  // End of the last match: text from here to the next match is a gap.
  size_t search_from = 0;
  while (search_from < text.size()) {
    // pcre2_jit_match skips the checks of pcre2_match; the text is known to be valid UTF-8.
    int result = jit_ ? pcre2_jit_match(code_, subject, text.size(), search_from, 0, state.data,
                                        state.context)
                      : pcre2_match(code_, subject, text.size(), search_from, PCRE2_NO_UTF_CHECK,
                                    state.data, state.context);
    if (result == PCRE2_ERROR_JIT_STACKLIMIT && state.stack == nullptr) {
      state.context = pcre2_match_context_create(nullptr);
      state.stack = pcre2_jit_stack_create(64 * 1024, 64 * 1024 * 1024, nullptr);
      if (state.context == nullptr || state.stack == nullptr) throw std::bad_alloc();
      pcre2_jit_stack_assign(state.context, nullptr, state.stack);
      continue;
    }
    if (result == PCRE2_ERROR_NOMATCH) break;
    if (result < 0) fail("pre-tokenizer regex: matching failed: ", pcre2_message(result));
    const PCRE2_SIZE* offsets = pcre2_get_ovector_pointer(state.data);
    size_t start = offsets[0], end = offsets[1];
    if (end == start) {
      // An empty match makes no piece; step over one character.
      search_from = start + 1;
      while (search_from < text.size() &&
             (static_cast<uint8_t>(text[search_from]) & 0xC0) == 0x80) {
        ++search_from;
      }
      continue;
    }
    // MergedWithPrevious joins a match to the gap just before it (not to an earlier match).
    size_t piece_start = start;
    if (start > gap_start) {
      if (behavior_ == Behavior::merged_with_previous)
        piece_start = gap_start;
      else
        pieces.push_back(text.substr(gap_start, start - gap_start));
    }
    pieces.push_back(text.substr(piece_start, end - piece_start));
    gap_start = search_from = end;
  }
  if (gap_start < text.size()) pieces.push_back(text.substr(gap_start));
}

std::string escape_regex(std::string_view literal) {
  std::string pattern;
  for (char c : literal) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos)
      pattern.push_back('\\');
    pattern.push_back(c);
  }
  return pattern;
}

}  // namespace fornace::text
