// Fuzzes the JSON schema compiler (compile_json_schema) and its grammar: a schema it accepts must
// give a matcher in which a walk (random bytes, then the shortest way to the end) never gets
// stuck and ends in text that nlohmann parses as JSON.
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <string_view>

#include "fuzz_support.h"
#include "text/json_schema.h"

namespace {

using namespace fornace;

void walk(const text::Grammar& grammar, uint64_t seed) {
  text::GrammarMatcher matcher(grammar);
  std::mt19937_64 random(seed);
  int32_t state = matcher.initial_state();
  const size_t random_bytes = random() % 64;
  std::string output;
  for (size_t step = 0; step < 4096; ++step) {
    if (matcher.accepting(state) && (output.size() >= random_bytes || random() % 4 == 0)) break;
    // The allowed bytes, and the one that leads closest to the end.
    uint8_t allowed[256];
    size_t count = 0;
    int closest = -1;
    int64_t closest_completion = text::Grammar::kUnbounded;
    for (int byte = 0; byte < 256; ++byte) {
      const int32_t next = matcher.next(state, static_cast<uint8_t>(byte));
      if (next == text::GrammarMatcher::kDead) continue;
      allowed[count++] = static_cast<uint8_t>(byte);
      if (matcher.min_completion(next) < closest_completion) {
        closest_completion = matcher.min_completion(next);
        closest = byte;
      }
    }
    if (count == 0) {
      fuzz::check(matcher.accepting(state), "a state that is not a whole sentence allows a byte");
      break;
    }
    fuzz::check(matcher.accepting(state) || closest_completion < matcher.min_completion(state),
                "some byte brings the end closer");
    const uint8_t byte =
        output.size() < random_bytes ? allowed[random() % count] : static_cast<uint8_t>(closest);
    output += static_cast<char>(byte);
    state = matcher.next(state, byte);
  }
  fuzz::check(matcher.accepting(state), "the walk ends in a whole sentence");
  fuzz::check(nlohmann::json::accept(output), "a sentence is JSON");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  nlohmann::ordered_json schema;
  try {
    schema = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception&) {
    return 0;
  }
  fuzz::expect_only_fornace_errors([&] {
    const text::Grammar grammar = text::compile_json_schema(schema);
    walk(grammar, size);
    walk(grammar, size * 7919 + 1);
  });
  return 0;
}
