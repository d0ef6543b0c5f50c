// The tokenizer.ggml.* values of a tokenizer.json, as llama.cpp's converter writes them: the file
// is loaded as Tokenizer::from_json loads it, and its state written out.
#include "text/gguf_vocabulary.h"

#include <filesystem>

#include "core/error.h"
#include "io/files.h"
#include "text/gguf_pre_tokenizers.h"
#include "text/tokenizer_config.h"
#include "text/tokenizer_state.h"

namespace fornace::text {
namespace {

constexpr std::string_view space_marker = "\xE2\x96\x81";  // "▁", SentencePiece's space.

// convert_hf_to_gguf.py's does_token_look_special: added tokens that some checkpoints leave
// unmarked but that are control tokens.
bool looks_special(std::string_view token) {
  return token == "<pad>" || token == "<mask>" || token == "<2mass>" || token == "[@BOS@]" ||
         (token.starts_with("<|") && token.ends_with("|>")) ||
         (token.starts_with("<\xEF\xBD\x9C") && token.ends_with("\xEF\xBD\x9C>")) ||  // "<｜"
         (token.starts_with("<unused") && token.ends_with(">"));
}

std::string replace_all(std::string_view text, std::string_view pattern, std::string_view content) {
  std::string out;
  append_replaced(text, pattern, content, out);
  return out;
}

class GgufVocabularyWriter {
 public:
  GgufVocabularyWriter(const TokenizerState& state, const TokenizerConfig& config,
                       size_t embedding_rows)
      : state_(state),
        config_(config),
        count_(embedding_rows > 0 ? embedding_rows : state.model.vocabulary.size()) {}

  GgufVocabulary write() {
    if (state_.model.byte_level) {
      const GgufPreTokenizer* pre_tokenizer = match_gguf_pre_tokenizer(state_);
      if (pre_tokenizer == nullptr) {
        error("pre_tokenizer", concat("its Split regexes, normalizer and model.ignore_merges are ",
                                      "those of no tokenizer.ggml.pre that Fornace knows (",
                                      supported_gguf_pre_names(), ")"));
      }
      vocabulary_.model = "gpt2";
      vocabulary_.pre = pre_tokenizer->names.front();
    } else {
      check_sentencepiece_form();
      vocabulary_.model = "llama";
    }
    write_tokens();
    if (vocabulary_.model == "gpt2") {
      write_merges();
    } else {
      write_scores();
    }
    write_special_tokens();
    return std::move(vocabulary_);
  }

 private:
  [[noreturn]] void error(std::string_view field, std::string_view what) const {
    fail(state_.source_name, ": ", field, ": ", what,
         " (no GGUF vocabulary, model gpt2 or llama, gives the same tokens)");
  }

  // tokenizer.ggml.model llama is SentencePiece: spaces become "▁" and back, the text between
  // added tokens is one piece, unknown characters fuse. (tokenizer.json has no prefix "▁" here:
  // its Prepend normalizer is not read.)
  void check_sentencepiece_form() {
    const std::string marker(space_marker);
    Normalizer replace;
    replace.add_replace(" ", marker);
    if (state_.normalizer != replace) error("normalizer", "expected Replace(' ', '▁')");
    // A split at spaces changes nothing once the normalizer has replaced them all.
    if (!state_.splitters.empty() &&
        (state_.splitters.size() > 1 || state_.splitters[0]->pattern() != escape_regex(" "))) {
      error("pre_tokenizer", "expected none, or a Split at ' '");
    }
    const std::vector<std::pair<std::string, std::string>> marker_to_space = {{marker, " "}};
    if (state_.decoder.replacements != marker_to_space)
      error("decoder", "expected Replace('▁', ' ') (then ByteFallback and Fuse, or not)");
    const BpeModel& model = state_.model;
    if (model.ignore_merges) error("model.ignore_merges", "must be false");
    if (model.unknown_id != BpeModel::no_token && !model.fuse_unknown)
      error("model.fuse_unk", "must be true with an unk_token");
    vocabulary_.add_space_prefix = false;
  }

  // Tokens and their types, as the converter types them: added tokens are control when special
  // (or when they look it), else user-defined; with SentencePiece "<0xNN>" tokens are bytes and
  // the user-defined tokens have their "▁" back as spaces, since llama.cpp matches them in the
  // raw text. Ids without a token are "[PAD<id>]", unused; added tokens past the embedding's rows
  // (Gemma 3's <image_soft_token>) are left out, as the converter leaves them.
  void write_tokens() {
    const Vocabulary& vocabulary = state_.model.vocabulary;
    const bool sentencepiece = vocabulary_.model == "llama";
    std::vector<const AddedToken*> added(std::max(count_, vocabulary.size()), nullptr);
    for (const AddedToken& token : state_.added_tokens) added[token.id] = &token;
    for (uint32_t id = static_cast<uint32_t>(count_); id < vocabulary.size(); ++id) {
      if (vocabulary.contains(id) && added[id] == nullptr) {
        error("model.vocab", concat("token ", id, " '", vocabulary.text(id),
                                    "' is past the embedding's ", count_, " rows"));
      }
    }
    vocabulary_.tokens.reserve(count_);
    vocabulary_.token_types.reserve(count_);
    mergeable_.assign(std::max(count_, vocabulary.size()), false);
    for (uint32_t id = 0; id < count_; ++id) {
      GgufTokenType type = GgufTokenType::normal;
      std::string text;
      if (!vocabulary.contains(id)) {
        text = concat("[PAD", id, "]");
        type = GgufTokenType::unused;
      } else {
        text = vocabulary.text(id);
        if (added[id] != nullptr) {
          type = added[id]->special || looks_special(text) ? GgufTokenType::control
                                                           : GgufTokenType::user_defined;
          if (sentencepiece && type == GgufTokenType::user_defined)
            text = replace_all(text, space_marker, " ");
        } else if (int byte = byte_fallback_value(text);
                   sentencepiece && byte >= 0 && state_.model.byte_fallback_ids[byte] == id) {
          type = GgufTokenType::byte;
        } else if (sentencepiece && id == state_.model.unknown_id) {
          type = GgufTokenType::unknown;
        }
      }
      mergeable_[id] = type == GgufTokenType::normal;
      vocabulary_.tokens.push_back(std::move(text));
      vocabulary_.token_types.push_back(static_cast<int32_t>(type));
    }
  }

  void write_merges() {
    const Vocabulary& vocabulary = state_.model.vocabulary;
    for (const MergeTable::RankedMerge& merge : state_.model.merges.in_rank_order()) {
      vocabulary_.merges.push_back(
          concat(vocabulary.text(merge.left), " ", vocabulary.text(merge.right)));
    }
  }

  // SentencePiece merges any two adjacent pieces whose texts together make a token, the highest
  // scoring token first. Each token's score is minus the rank of its first merge, so that
  // merging by score reproduces the merge ranks: it does (checked here) when the merges of
  // normal tokens are exactly the splits of normal tokens into two, and those of one token are
  // consecutive. The merges of added tokens (Gemma's runs of spaces and newlines) are left out:
  // llama.cpp matches those tokens before merging. Tokens that no merge makes score below all.
  void write_scores() {
    const Vocabulary& vocabulary = state_.model.vocabulary;
    const std::vector<MergeTable::RankedMerge> merges = state_.model.merges.in_rank_order();
    const float unmerged = merges.empty() ? -1.0f : -static_cast<float>(merges.back().rank) - 1;
    std::vector<float>& scores = vocabulary_.scores;
    scores.assign(count_, unmerged);
    std::vector<bool> finished(count_, false);  // Its run of merges has ended.
    uint32_t previous = BpeModel::no_token;
    for (const MergeTable::RankedMerge& merge : merges) {
      if (!mergeable_[merge.merged_id]) continue;
      const std::string field = concat("model.merges (rank ", merge.rank, ")");
      if (!mergeable_[merge.left] || !mergeable_[merge.right]) {
        error(field, concat("'", vocabulary.text(merge.merged_id),
                            "' is made from an added or byte token"));
      }
      if (merge.merged_id == previous) continue;
      if (finished[merge.merged_id]) {
        error(field, concat("the merges that make '", vocabulary.text(merge.merged_id),
                            "' are not consecutive"));
      }
      if (previous != BpeModel::no_token) finished[previous] = true;
      previous = merge.merged_id;
      scores[merge.merged_id] = -static_cast<float>(merge.rank);
    }
    for_each_split(vocabulary, mergeable_, [&](uint32_t left, uint32_t right, uint32_t merged) {
      if (state_.model.merges.find(left, right) == nullptr) {
        error("model.merges",
              concat("'", vocabulary.text(left), "' + '", vocabulary.text(right),
                     "' makes the token '", vocabulary.text(merged), "' but is no merge"));
      }
    });
  }

  // The ids of the special tokens that tokenizer_config.json names (an added token's content, as
  // the converter looks them up), and whether a bos goes first.
  void write_special_tokens() {
    const auto added_id = [&](const std::optional<std::string>& content) {
      std::optional<uint32_t> id;
      if (!content) return id;
      for (const AddedToken& token : state_.added_tokens) {
        if (token.content == *content && token.id < count_) return id = token.id;
      }
      return id;
    };
    std::optional<std::string> bos = config_.bos_token;
    if (!bos && !config_.eos_token && !config_.unk_token && !config_.pad_token)
      bos = state_.template_prefix_token;
    vocabulary_.bos_token_id = added_id(bos);
    vocabulary_.eos_token_id = added_id(config_.eos_token);
    vocabulary_.padding_token_id = added_id(config_.pad_token);
    vocabulary_.unknown_token_id = added_id(config_.unk_token);
    if (!vocabulary_.unknown_token_id && state_.model.unknown_id != BpeModel::no_token)
      vocabulary_.unknown_token_id = state_.model.unknown_id;
    vocabulary_.add_bos_token = config_.add_bos_token;
    if (!config_.add_bos_token && state_.template_prefix_token)
      vocabulary_.add_bos_token = bos && *state_.template_prefix_token == *bos;
    vocabulary_.add_eos_token = config_.add_eos_token;
  }

  const TokenizerState& state_;
  const TokenizerConfig& config_;
  const size_t count_;
  GgufVocabulary vocabulary_;
  std::vector<bool> mergeable_;  // By id: a normal token, which SentencePiece merges make.
};

}  // namespace

GgufVocabulary gguf_vocabulary_from_tokenizer_json(std::string_view tokenizer_json,
                                                   std::string_view tokenizer_config_json,
                                                   const std::string& source_name,
                                                   size_t embedding_rows) {
  TokenizerState state;
  state.source_name = source_name;
  parse_tokenizer_json(tokenizer_json, state);
  const std::string config_name = source_name + " (tokenizer_config.json)";
  TokenizerConfig config = read_tokenizer_config(tokenizer_config_json, config_name);
  GgufVocabulary vocabulary = GgufVocabularyWriter(state, config, embedding_rows).write();
  vocabulary.chat_template = config.chat_template;
  return vocabulary;
}

GgufVocabulary load_gguf_vocabulary(const std::string& directory, size_t embedding_rows) {
  const std::string path = directory + "/tokenizer.json";
  const std::string config_path = directory + "/tokenizer_config.json";
  std::string config = std::filesystem::exists(config_path) ? read_file(config_path) : "";
  return gguf_vocabulary_from_tokenizer_json(read_file(path), config, path, embedding_rows);
}

}  // namespace fornace::text
