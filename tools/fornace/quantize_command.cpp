// The `quantize` command: a checkpoint directory or GGUF file in, a GGUF file of a llama.cpp file
// type out, with the tokenizer and chat template in its metadata.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>

#include "common/cli.h"
#include "common/start_up.h"
#include "fornace/commands.h"
#include "models/gguf_export.h"
#include "text/gguf_metadata.h"

namespace fornace::tools {

int quantize_command(int argc, char** argv, const EngineSettings& settings) {
  CommandLine app(
      "fornace quantize", "usage: fornace quantize --type TYPE --model DIR_OR_GGUF --out FILE.gguf",
      "Writes the model as a GGUF file that Fornace and llama.cpp load. The tensor "
      "types follow llama-quantize's choices for the file type (q4_1, q5_0, q5_1, q4_k, q5_k and "
      "q6_k: that type throughout, as its --pure); the file appears only "
      "once it is complete.");
  std::string type_name;
  std::string model;
  std::string out;
  int64_t threads = 0;
  std::string types;
  for (const std::string& name : gguf_file_type_names()) types += (types.empty() ? "" : "|") + name;
  app.add_option("--type", type_name, "file type: " + types)->type_name("TYPE")->required();
  app.add_option("--model", model, "checkpoint directory or GGUF file")
      ->type_name("PATH")
      ->required();
  app.add_option("--out", out, "the GGUF file to write")->type_name("FILE")->required();
  add_threads_flag(app, threads);
  return app.parse_and_run(argc, argv, [&] {
    std::optional<GgufFileType> type = parse_gguf_file_type(type_name);
    if (!type) throw UsageError("--type must be one of " + types + ", got '" + type_name + "'");
    if (model.empty()) throw UsageError("--model is empty");
    if (out.empty()) throw UsageError("--out is empty");
    set_num_threads(static_cast<int>(threads));
    auto start = std::chrono::steady_clock::now();
    std::shared_ptr<const ModelFiles> files = open_model_files(model, settings);
    GgufExportSummary summary = export_gguf(*files, out, *type, [&](const ModelConfig& config) {
      return gguf_tokenizer_metadata(*files, config.vocab_size);
    });
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (const std::string& warning : summary.warnings) std::cerr << "warning: " << warning << "\n";
    std::string parts;
    for (const auto& [block_type, bytes] : summary.bytes_per_type) {
      char part[64];
      std::snprintf(part, sizeof(part), "%s%s %.1f MB", parts.empty() ? "" : ", ",
                    block_format(block_type).name, static_cast<double>(bytes) / 1e6);
      parts += part;
    }
    std::printf("wrote %s: %lld tensors, %.1f MB (%s) in %.1f s\n", out.c_str(),
                static_cast<long long>(summary.tensors), static_cast<double>(summary.bytes) / 1e6,
                parts.c_str(), seconds);
    return 0;
  });
}

}  // namespace fornace::tools
