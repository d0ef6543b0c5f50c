// Fuzzes config.json parsing (parse_model_config), and checks that a config it accepts is valid
// and survives a round trip through model_config_to_json.
#include <string_view>

#include "fuzz_support.h"
#include "io/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fornace;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  fuzz::expect_only_fornace_errors([&] {
    ModelConfig config = parse_model_config(text, "config.json");
    fuzz::check(config.hidden_size > 0 && config.intermediate_size > 0 &&
                    config.num_hidden_layers > 0 && config.num_attention_heads > 0 &&
                    config.num_key_value_heads > 0 && config.vocab_size > 0 &&
                    config.max_position_embeddings > 0,
                "sizes are positive");
    fuzz::check(config.hidden_size % config.num_attention_heads == 0 &&
                    config.num_attention_heads % config.num_key_value_heads == 0 &&
                    config.head_dim() % 2 == 0,
                "heads divide the sizes and head_dim is even");
    fuzz::check(config.rope_theta > 0 && config.rms_norm_eps > 0, "positive rope_theta and eps");

    ModelConfig again = parse_model_config(model_config_to_json(config), "round trip");
    fuzz::check(
        again.model_type == config.model_type && again.hidden_size == config.hidden_size &&
            again.intermediate_size == config.intermediate_size &&
            again.num_hidden_layers == config.num_hidden_layers &&
            again.num_attention_heads == config.num_attention_heads &&
            again.num_key_value_heads == config.num_key_value_heads &&
            again.vocab_size == config.vocab_size &&
            again.max_position_embeddings == config.max_position_embeddings &&
            again.rope_theta == config.rope_theta && again.rms_norm_eps == config.rms_norm_eps &&
            again.tie_word_embeddings == config.tie_word_embeddings &&
            again.torch_dtype == config.torch_dtype && again.eos_token_ids == config.eos_token_ids,
        "the config survives a round trip through config.json");
  });
  return 0;
}
