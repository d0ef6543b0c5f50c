// The --trace report: memory per phase, bytes copied per decode step, top allocating ops.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "engine/generator.h"
#include "models/model.h"

namespace fornace {

// The mean length in bytes of the unbroken runs that strided copies moved (0 with none).
double bytes_per_run(const CopyBytes& copied);
// A human-readable report of where time and memory went in one generation, after the load that
// `load` reports.
std::string format_trace(const GenerationResult& result, const LoadReport& load);
// The KV cache of `model` for a context of `context` positions: its type, the bytes of K and V
// that one position takes over all layers, and the prealloc cache's total.
std::string format_kv_cache_trace(const Model& model, int64_t context);
// The same figures as JSON, for tools that aggregate runs.
nlohmann::json trace_to_json(const GenerationResult& result, const LoadReport& load);

}  // namespace fornace
