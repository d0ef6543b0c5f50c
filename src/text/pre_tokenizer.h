// The Split pre-tokenizer: a PCRE2 regex (UTF, UCP, JIT) whose matches and the gaps between
// them become pieces, each match alone ("Isolated") or joined to the gap before it
// ("MergedWithPrevious").
#pragma once

#include <string>
#include <string_view>
#include <vector>

struct pcre2_real_code_8;

namespace fornace::text {

class RegexSplitter {
 public:
  enum class Behavior { isolated, merged_with_previous };

  // Compiles `pattern`; a pattern PCRE2 rejects throws Error naming `field`.
  RegexSplitter(const std::string& pattern, const std::string& field,
                Behavior behavior = Behavior::isolated);
  ~RegexSplitter();
  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;

  // Appends the pieces of `text` (valid UTF-8) to `pieces`, in order; together they cover it.
  void split(std::string_view text, std::vector<std::string_view>& pieces) const;

  const std::string& pattern() const { return pattern_; }
  Behavior behavior() const { return behavior_; }

 private:
  std::string pattern_;
  pcre2_real_code_8* code_ = nullptr;
  bool jit_ = false;
  Behavior behavior_;
};

// A regex that matches `literal` exactly (for a Split pattern given as {"String": ...}).
std::string escape_regex(std::string_view literal);

}  // namespace fornace::text
