// Builds the tokenizer's state from a GGUF file's tokenizer.ggml.* values: byte-level BPE for the
// gpt2 model, SentencePiece-style BPE merging by score for the llama model.
#include <array>
#include <cmath>

#include "core/error.h"
#include "text/gguf_pre_tokenizers.h"
#include "text/gguf_vocabulary.h"
#include "text/tokenizer_state.h"

namespace fornace::text {
namespace {

constexpr std::string_view space_marker = "\xE2\x96\x81";  // "▁", SentencePiece's space.

class GgufTokenizerBuilder {
 public:
  GgufTokenizerBuilder(const GgufVocabulary& vocabulary, TokenizerState& state)
      : vocabulary_(vocabulary), state_(state) {}

  void build() {
    if (vocabulary_.model != "gpt2" && vocabulary_.model != "llama") {
      error(gguf_key::model,
            concat(vocabulary_.model.empty() ? "missing" : "'" + vocabulary_.model + "'",
                   " is not supported (only gpt2, byte-level BPE, or llama, SentencePiece)"));
    }
    read_tokens();
    const size_t count = vocabulary_.tokens.size();
    if (!vocabulary_.scores.empty() && vocabulary_.scores.size() != count) {
      error(gguf_key::scores, concat(vocabulary_.scores.size(), " values for ", count, " tokens"));
    }
    for (auto [id, key] : {std::pair{vocabulary_.bos_token_id, gguf_key::bos_token_id},
                           std::pair{vocabulary_.eos_token_id, gguf_key::eos_token_id},
                           std::pair{vocabulary_.unknown_token_id, gguf_key::unknown_token_id},
                           std::pair{vocabulary_.padding_token_id, gguf_key::padding_token_id}}) {
      if (id && *id >= count) {
        error(key, concat(*id, " is out of range (the vocabulary has ", count, " tokens)"));
      }
    }
    bool add_bos_by_default =
        vocabulary_.model == "gpt2" ? build_byte_level_bpe() : build_sentencepiece_bpe();
    index_added_tokens(state_);
    state_.eos_token_id = vocabulary_.eos_token_id;
    if (vocabulary_.add_bos_token.value_or(add_bos_by_default) && vocabulary_.bos_token_id) {
      state_.template_prefix_token = vocabulary_.tokens[*vocabulary_.bos_token_id];
    }
  }

 private:
  [[noreturn]] void error(std::string_view key, std::string_view what) const {
    fail(state_.source_name, ": ", key, ": ", what);
  }

  GgufTokenType type(size_t id) const {
    return vocabulary_.token_types.empty()
               ? GgufTokenType::normal
               : static_cast<GgufTokenType>(vocabulary_.token_types[id]);
  }

  // The vocabulary, and the control, unknown and user-defined tokens as raw added tokens.
  void read_tokens() {
    const std::vector<std::string>& tokens = vocabulary_.tokens;
    const std::vector<int32_t>& types = vocabulary_.token_types;
    if (tokens.empty()) error(gguf_key::tokens, "missing or empty");
    if (tokens.size() >= UINT32_MAX) error(gguf_key::tokens, "too many tokens");
    if (!types.empty() && types.size() != tokens.size()) {
      error(gguf_key::token_type, concat(types.size(), " values for ", tokens.size(), " tokens"));
    }
    Vocabulary& vocabulary = state_.model.vocabulary;
    for (uint32_t id = 0; id < tokens.size(); ++id) {
      if (!types.empty() && (types[id] < 1 || types[id] > 6)) {
        error(concat(gguf_key::token_type, "[", id, "]"),
              concat(types[id], " is not a token type (1 to 6)"));
      }
      // An empty text gets the name llama.cpp gives it.
      std::string_view text = tokens[id];
      std::string empty_name;
      if (text.empty()) text = empty_name = concat("[EMPTY_", id, "]");
      vocabulary.add(text, id);
      GgufTokenType token_type = type(id);
      if (token_type == GgufTokenType::control || token_type == GgufTokenType::unknown ||
          token_type == GgufTokenType::user_defined) {
        bool special = token_type != GgufTokenType::user_defined;
        state_.added_tokens.push_back({std::string(text), id, special, false});
        // The converter writes the "▁" of SentencePiece's user-defined tokens as spaces (Gemma's
        // runs of "▁"); SentencePiece and Hugging Face also match them written with "▁".
        if (vocabulary_.model == "llama" && !special && text.find(' ') != std::string::npos) {
          std::string marked;
          append_replaced(text, " ", space_marker, marked);
          state_.added_tokens.push_back({std::move(marked), id, special, false});
        }
      }
    }
    if (std::optional<uint32_t> duplicate = vocabulary.build_index()) {
      error(gguf_key::tokens, concat("the token '", vocabulary.text(*duplicate),
                                     "' has more than one id (one is ", *duplicate, ")"));
    }
  }

  // Returns llama.cpp's add_bos default for the pre-tokenizer.
  bool build_byte_level_bpe() {
    const std::string& name = vocabulary_.pre;
    const GgufPreTokenizer* pre_tokenizer = find_gguf_pre_tokenizer(name);
    if (pre_tokenizer == nullptr) {
      error(gguf_key::pre,
            concat(name.empty() ? "missing" : "'" + name + "' is not supported",
                   " (supported with model gpt2: ", supported_gguf_pre_names(), ")"));
    }
    apply_gguf_pre_tokenizer(*pre_tokenizer, state_);
    BpeModel& model = state_.model;
    if (std::optional<uint8_t> byte = model.find_byte_tokens()) {
      error(gguf_key::tokens, concat("has no token for the byte ", int{*byte},
                                     " (byte-level BPE needs one for each)"));
    }
    if (vocabulary_.merges.empty()) error(gguf_key::merges, "missing (model gpt2 needs merges)");
    MergeList merges;
    for (size_t rank = 0; rank < vocabulary_.merges.size(); ++rank) {
      std::string_view line = vocabulary_.merges[rank];
      size_t space = line.find(' ');
      if (space == std::string_view::npos || line.find(' ', space + 1) != std::string_view::npos) {
        error(concat(gguf_key::merges, "[", rank, "]"),
              concat("'", line, "': expected two tokens separated by one space"));
      }
      merges.add(line.substr(0, space), line.substr(space + 1));
    }
    if (std::optional<BpeModel::MissingText> missing = model.set_merges(merges)) {
      error(concat(gguf_key::merges, "[", missing->rank, "]"),
            concat("'", missing->text, "' is not a token"));
    }
    state_.decoder = TokenDecoder{};  // ByteLevel.
    return pre_tokenizer->add_bos;
  }

  // SentencePiece: spaces become "▁" (with one before the text when add_space_prefix is set),
  // the text is one piece of characters (a character without a token becomes its "<0xNN>" byte
  // tokens), and normal tokens merge by score. Returns llama.cpp's add_bos default.
  bool build_sentencepiece_bpe() {
    const size_t count = vocabulary_.tokens.size();
    if (vocabulary_.scores.empty())
      error(gguf_key::scores, "missing (model llama merges by score)");
    const bool add_space_prefix = vocabulary_.add_space_prefix.value_or(true);
    if (add_space_prefix) state_.normalizer.add_prepend(std::string(space_marker));
    state_.normalizer.add_replace(" ", std::string(space_marker));
    BpeModel& model = state_.model;
    std::vector<bool> mergeable(count, false);
    bool byte_fallback = false;
    for (uint32_t id = 0; id < count; ++id) {
      if (std::isnan(vocabulary_.scores[id]))
        error(concat(gguf_key::scores, "[", id, "]"), "not a number");
      GgufTokenType token_type = type(id);
      mergeable[id] = token_type == GgufTokenType::normal;
      if (token_type == GgufTokenType::unknown && model.unknown_id == BpeModel::no_token)
        model.unknown_id = id;
      if (token_type != GgufTokenType::byte) continue;
      if (byte_fallback_value(model.vocabulary.text(id)) < 0) {
        error(concat(gguf_key::tokens, "[", id, "]"),
              concat("'", model.vocabulary.text(id), "' has the byte type (6) but is not <0xNN>"));
      }
      byte_fallback = true;
    }
    if (vocabulary_.unknown_token_id) model.unknown_id = *vocabulary_.unknown_token_id;
    model.find_character_tokens(byte_fallback);
    model.fuse_unknown = true;
    insert_merges_by_score(mergeable);
    state_.decoder = TokenDecoder{};
    state_.decoder.byte_level = false;
    state_.decoder.replacements = {{std::string(space_marker), " "}};
    state_.decoder.byte_fallback = byte_fallback;
    state_.decoder.strip_leading_space = add_space_prefix;  // As llama.cpp's detokenize does.
    return true;
  }

  // Every split of a mergeable token into two mergeable tokens, ranked by the token's score.
  void insert_merges_by_score(const std::vector<bool>& mergeable) {
    MergeTable& merges = state_.model.merges;
    // The table's slots miss the cache: each is prefetched `distance` merges before its insert.
    constexpr size_t distance = 16;
    struct Merge {
      uint32_t left, right, merged;
    };
    std::array<Merge, distance> pending;
    size_t found = 0;
    const auto insert = [&](const Merge& merge) {
      merges.insert(merge.left, merge.right,
                    {rank_of_score(vocabulary_.scores[merge.merged]), merge.merged});
    };
    merges.reserve(2 * mergeable.size());
    for_each_split(state_.model.vocabulary, mergeable,
                   [&](uint32_t left, uint32_t right, uint32_t merged) {
                     if (found >= distance) insert(pending[found % distance]);
                     pending[found++ % distance] = {left, right, merged};
                     merges.prefetch(left, right);
                   });
    for (size_t index = found > distance ? found - distance : 0; index < found; ++index)
      insert(pending[index % distance]);
  }

  const GgufVocabulary& vocabulary_;
  TokenizerState& state_;
};

}  // namespace

void build_from_gguf_vocabulary(const GgufVocabulary& vocabulary, TokenizerState& state) {
  GgufTokenizerBuilder(vocabulary, state).build();
}

}  // namespace fornace::text
