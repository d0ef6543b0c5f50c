// The micro benchmarks' main: the FORNACE_* settings applied once, then Google Benchmark's run.
#include <benchmark/benchmark.h>

#include <cstdio>

#include "core/error.h"
#include "core/settings.h"
#include "cpu/cpu_features.h"

int main(int argc, char** argv) {
  try {
    fornace::cpu::apply_process_settings(fornace::EngineSettings::from_environment());
  } catch (const fornace::Error& error) {
    std::fprintf(stderr, "error: %s\n", error.what());
    return 1;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
