// Unit tests of fornace-bench's pure parts: CSV, statistics, tables, roofline and the SVG plot.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "io/safetensors.h"
#include "ops/creation.h"

// The test executables link libfornace only, so the bench's pure sources are compiled in here.
#include "../../tools/fornace-bench/csv.cpp"
#include "../../tools/fornace-bench/format.cpp"
#include "../../tools/fornace-bench/machine.cpp"
#include "../../tools/fornace-bench/records.cpp"
#include "../../tools/fornace-bench/roofline.cpp"
#include "../../tools/fornace-bench/stats.cpp"
#include "../../tools/fornace-bench/summary.cpp"
#include "../../tools/fornace-bench/svg_plot.cpp"
#include "common/source_paths.h"

namespace fornace::bench {
namespace {

BenchContext sample_context() {
  BenchContext context;
  context.date = "2026-11-29";
  context.cpu = "Example CPU, \"quoted\" model";
  context.cpu_family = "25";
  context.cpu_model = "17";
  context.kernels = "isa avx512; gemm bf16: 12x32, with a comma";
  context.cores = 2;
  context.threads = 2;
  context.dtype = "bf16";
  context.commit = "abc1234";
  context.dirty = true;
  context.read_gbs = 50;
  context.peak_gflops = 400;
  return context;
}

RunRecord sample_run(const std::string& kv_cache, const std::string& prompt, int64_t run,
                     double tok_s, double mean_ms, double peak_mib) {
  RunRecord record;
  record.kv_cache = kv_cache;
  record.prompt = prompt;
  record.prompt_tokens = 2049;
  record.run = run;
  record.prefill_ms = 4098;
  record.decode_tok_s = tok_s;
  record.mean_ms_last64 = mean_ms;
  record.peak_mib = peak_mib;
  record.decode_steps = 127;
  record.weight_bytes = 988000000;
  record.kv_bytes_per_position = 12288;
  record.read_gbs = 50;
  record.prefill_gflop = 1600;
  record.model = "qwen2.5-0.5b";
  record.model_directory = "models/qwen2.5-0.5b";
  record.attention = "fused";
  record.kv_bytes_per_token = 12288.0 * (2049 + 64);  // A full cache: every layer, every position.
  record.mean_strided_bytes_last64 = 0;
  record.bytes_per_run_last64 = 0;
  return record;
}

// The cells of a Markdown table row, trimmed.
std::vector<std::string> row_cells(const std::string& line) {
  std::vector<std::string> cells;
  std::stringstream stream(line);
  std::string cell;
  std::getline(stream, cell, '|');  // Before the first bar.
  while (std::getline(stream, cell, '|')) {
    size_t begin = cell.find_first_not_of(' ');
    size_t end = cell.find_last_not_of(' ');
    cells.push_back(begin == std::string::npos ? "" : cell.substr(begin, end - begin + 1));
  }
  return cells;
}

// The line of `text` that contains `needle`.
std::string line_with(const std::string& text, const std::string& needle) {
  std::stringstream stream(text);
  std::string line;
  while (std::getline(stream, line)) {
    if (line.find(needle) != std::string::npos) return line;
  }
  return "";
}

// The cells of the first table row of `text` for that attention path and cache.
std::vector<std::string> row_of(const std::string& text, const std::string& attention,
                                const std::string& kv_cache) {
  std::stringstream stream(text);
  std::string line;
  while (std::getline(stream, line)) {
    std::vector<std::string> cells = row_cells(line);
    if (cells.size() > 2 && cells[0] == "`" + attention + "`" && cells[1] == "`" + kv_cache + "`") {
      return cells;
    }
  }
  return {};
}

TEST(BenchCsv, QuotesFieldsWithCommasQuotesAndLineBreaks) {
  EXPECT_EQ(csv_field("plain"), "plain");
  EXPECT_EQ(csv_field("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(csv_field("two\nlines"), "\"two\nlines\"");
  EXPECT_EQ(csv_line({"a", "b,c", ""}), "a,\"b,c\",\n");
}

TEST(BenchCsv, ParsesQuotedFieldsBackToTheirText) {
  std::string text =
      csv_line({"name", "value"}) + csv_line({"a,b", "say \"hi\""}) + csv_line({"two\nlines", ""});
  CsvTable table = CsvTable::parse(text, "test.csv");
  ASSERT_EQ(table.rows(), 2u);
  EXPECT_EQ(table.text(0, "name"), "a,b");
  EXPECT_EQ(table.text(0, "value"), "say \"hi\"");
  EXPECT_EQ(table.text(1, "name"), "two\nlines");
  EXPECT_EQ(table.text(1, "value"), "");
}

TEST(BenchCsv, AcceptsCrLfLineEndings) {
  CsvTable table = CsvTable::parse("a,b\r\n1,2\r\n", "crlf.csv");
  ASSERT_EQ(table.rows(), 1u);
  EXPECT_EQ(table.integer(0, "b"), 2);
}

TEST(BenchCsv, RejectsARowWithTheWrongNumberOfFieldsNamingItsLine) {
  try {
    CsvTable::parse("a,b\n1,2\n3\n", "short.csv");
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("short.csv: line 3"), std::string::npos)
        << error.what();
  }
}

TEST(BenchCsv, RejectsNonNumbersAndMissingColumnsNamingThem) {
  CsvTable table = CsvTable::parse("a,b\nx,2.5\n", "numbers.csv");
  EXPECT_DOUBLE_EQ(table.number(0, "b"), 2.5);
  EXPECT_THROW(table.number(0, "a"), Error);
  EXPECT_THROW(table.integer(0, "b"), Error);
  try {
    table.require_columns({"a", "missing"});
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("'missing'"), std::string::npos);
  }
  EXPECT_THROW(CsvTable::parse("a,\"open\n", "open.csv"), Error);
  EXPECT_THROW(CsvTable::parse("", "empty.csv"), Error);
}

TEST(BenchStats, MedianMeanAndRangeOfOddAndEvenCounts) {
  Stats odd = compute_stats({3, 1, 2});
  EXPECT_EQ(odd.count, 3u);
  EXPECT_DOUBLE_EQ(odd.median, 2);
  EXPECT_DOUBLE_EQ(odd.mean, 2);
  EXPECT_DOUBLE_EQ(odd.min, 1);
  EXPECT_DOUBLE_EQ(odd.max, 3);
  Stats even = compute_stats({4, 1, 10, 2});
  EXPECT_DOUBLE_EQ(even.median, 3);
  EXPECT_DOUBLE_EQ(even.mean, 4.25);
  Stats empty = compute_stats({});
  EXPECT_EQ(empty.count, 0u);
  EXPECT_DOUBLE_EQ(empty.mean, 0);
}

TEST(BenchFormat, GroupsThousandsAndCollapsesEqualRanges) {
  EXPECT_EQ(with_thousands(0), "0");
  EXPECT_EQ(with_thousands(999), "999");
  EXPECT_EQ(with_thousands(1666), "1,666");
  EXPECT_EQ(with_thousands(-1234567), "-1,234,567");
  EXPECT_EQ(group_thousands("4626.5"), "4,626.5");
  EXPECT_EQ(format_range(24.11, 24.24, 1), "24.1\u201324.2");
  EXPECT_EQ(format_range(9.51, 9.54, 1), "9.5");
  EXPECT_EQ(format_range(1666, 1683, 0, true), "1,666\u20131,683");
  EXPECT_EQ(path_file_name("bench/prompts/alice-512.txt"), "alice-512.txt");
  EXPECT_EQ(path_file_name("alice.txt"), "alice.txt");
}

TEST(BenchFormat, PathLabelsAreTheLastComponentsThatTellThePathsApart) {
  EXPECT_EQ(distinct_path_labels({"models/synth-qwen2.5-0.5b", "models/gemma3-270m/"}),
            (std::vector<std::string>{"synth-qwen2.5-0.5b", "gemma3-270m"}));
  EXPECT_EQ(distinct_path_labels({"a/x/model", "b/x/model", "c/other"}),
            (std::vector<std::string>{"a/x/model", "b/x/model", "other"}));
  EXPECT_EQ(distinct_path_labels({"model", "b/model"}),
            (std::vector<std::string>{"model", "b/model"}));
  EXPECT_EQ(distinct_path_labels({"/abs/m", "rel/m"}),
            (std::vector<std::string>{"abs/m", "rel/m"}));
}

TEST(BenchRecords, RunsCsvRoundTripsEveryFieldAndTheContext) {
  BenchContext context = sample_context();
  std::vector<RunRecord> runs = {
      sample_run("cat", "bench/prompts/a,b.txt", 1, 41.875, 24.125, 3373.5),
      sample_run("prealloc", "p.ids", 2, 105.25, 9.5, 1666)};
  runs[0].model = "gemma3-270m";
  runs[0].model_directory = "models/a,b/gemma3-270m";
  runs[0].attention = "candle";
  runs[0].kv_bytes_per_token = 1234.5;
  runs[0].mean_strided_bytes_last64 = 8388608.5;
  runs[0].bytes_per_run_last64 = 128;
  runs[0].peak_gflops = 876.5;
  runs[0].prefill_linear_gflop = 1500.25;
  runs[0].prefill_linear_ms = 3500.5;
  runs[0].decode_linear_ms = 2750.125;
  std::ostringstream out;
  write_runs_csv(out, context, runs);
  BenchData data;
  read_runs_csv(out.str(), "runs.csv", data);
  EXPECT_EQ(data.context.date, context.date);
  EXPECT_EQ(data.context.cpu, context.cpu);
  EXPECT_EQ(data.context.cpu_family, "25");
  EXPECT_EQ(data.context.cpu_model, "17");
  EXPECT_EQ(cpu_description(data.context), context.cpu + " (family 25, model 17)");
  EXPECT_EQ(data.context.kernels, context.kernels);
  EXPECT_EQ(data.context.cores, 2);
  EXPECT_EQ(data.context.threads, 2);
  EXPECT_EQ(data.context.dtype, "bf16");
  EXPECT_EQ(data.context.commit, "abc1234");
  EXPECT_TRUE(data.context.dirty);
  EXPECT_DOUBLE_EQ(data.context.read_gbs, 50);
  EXPECT_DOUBLE_EQ(data.context.peak_gflops, 400);
  ASSERT_EQ(data.runs.size(), 2u);
  const RunRecord& first = data.runs[0];
  EXPECT_EQ(first.kv_cache, "cat");
  EXPECT_EQ(first.prompt, "bench/prompts/a,b.txt");
  EXPECT_EQ(first.prompt_tokens, 2049);
  EXPECT_EQ(first.run, 1);
  EXPECT_DOUBLE_EQ(first.prefill_ms, 4098);
  EXPECT_DOUBLE_EQ(first.decode_tok_s, 41.875);
  EXPECT_DOUBLE_EQ(first.mean_ms_last64, 24.125);
  EXPECT_DOUBLE_EQ(first.peak_mib, 3373.5);
  EXPECT_EQ(first.decode_steps, 127);
  EXPECT_EQ(first.weight_bytes, 988000000);
  EXPECT_EQ(first.kv_bytes_per_position, 12288);
  EXPECT_DOUBLE_EQ(first.read_gbs, 50);
  EXPECT_DOUBLE_EQ(first.prefill_gflop, 1600);
  EXPECT_EQ(first.model, "gemma3-270m");
  EXPECT_EQ(first.model_directory, "models/a,b/gemma3-270m");
  EXPECT_EQ(first.attention, "candle");
  EXPECT_DOUBLE_EQ(first.kv_bytes_per_token, 1234.5);
  EXPECT_EQ(first.mean_strided_bytes_last64, 8388608.5);
  EXPECT_EQ(first.bytes_per_run_last64, 128);
  EXPECT_DOUBLE_EQ(first.peak_gflops, 876.5);
  EXPECT_DOUBLE_EQ(first.prefill_linear_gflop, 1500.25);
  EXPECT_EQ(first.prefill_linear_ms, 3500.5);
  EXPECT_EQ(first.decode_linear_ms, 2750.125);
  EXPECT_FALSE(data.runs[1].decode_linear_ms.has_value());
  EXPECT_DOUBLE_EQ(data.runs[1].peak_gflops, 0);
  EXPECT_EQ(data.runs[1].attention, "fused");
  EXPECT_EQ(data.runs[1].kv_cache, "prealloc");
  EXPECT_EQ(data.runs[1].run, 2);
}

TEST(BenchRecords, RunsCsvWithoutTheLaterRooflineColumnsReadsThemAsUnknown) {
  // The shape of the CSVs recorded before per-run bandwidth and prefill GFLOP were kept.
  std::string text =
      "kv_cache,prompt,prompt_tokens,run,prefill_ms,decode_tok_s,mean_ms_last64,peak_mib,"
      "decode_steps,weight_bytes,kv_bytes_per_position,date,cpu,cores,threads,dtype,commit,"
      "dirty,read_gbs\n"
      "cat,p.txt,513,1,1000.000,30.000,33.0000,1000.0,127,988000000,24576,2026-11-29,CPU,2,2,"
      "bf16,144cd57,no,34.20\n";
  BenchData data;
  read_runs_csv(text, "old.csv", data);
  ASSERT_EQ(data.runs.size(), 1u);
  EXPECT_DOUBLE_EQ(data.context.read_gbs, 34.2);
  EXPECT_DOUBLE_EQ(data.context.peak_gflops, 0);
  EXPECT_DOUBLE_EQ(data.runs[0].read_gbs, 0);
  EXPECT_DOUBLE_EQ(data.runs[0].prefill_gflop, 0);
  EXPECT_DOUBLE_EQ(data.runs[0].peak_gflops, 0);
  // One model, not named, measured with the fused path; no strided or KV read figures.
  EXPECT_EQ(data.runs[0].model, "");
  EXPECT_EQ(data.runs[0].attention, "fused");
  EXPECT_DOUBLE_EQ(data.runs[0].kv_bytes_per_token, 0);
  EXPECT_FALSE(data.runs[0].mean_strided_bytes_last64.has_value());
  EXPECT_EQ(cpu_description(data.context), "CPU (family and model not recorded)");
  std::string tables = format_tables(data);
  EXPECT_NE(tables.find("### p.txt: 513 prompt tokens, 128 new tokens"), std::string::npos)
      << tables;
  std::vector<std::string> cells = row_cells(line_with(tables, "`cat`"));
  ASSERT_EQ(cells.size(), 17u) << tables;
  EXPECT_EQ(cells[0], "`fused`");
  EXPECT_EQ(cells[5], "n/a");  // Strided MiB/step.
  EXPECT_EQ(cells[6], "n/a");  // B/run.
  // 988 MB of weights + 24,576 bytes x (513 + 64) mean positions.
  EXPECT_EQ(cells[8], "1,002");
  EXPECT_EQ(cells[10], "34.2");  // The bench's one measurement stands in for every run.
  EXPECT_EQ(cells[12], "n/a");   // No linear op times.
  EXPECT_EQ(cells[14], "n/a");
  EXPECT_EQ(cells[15], "n/a");
  EXPECT_EQ(cells[16], "n/a");
  EXPECT_FALSE(data.runs[0].decode_linear_ms.has_value());
  EXPECT_FALSE(data.runs[0].prefill_linear_ms.has_value());
  EXPECT_DOUBLE_EQ(data.runs[0].prefill_linear_gflop, 0);
}

TEST(BenchRecords, StepsCsvRoundTripsEveryField) {
  StepRecord step;
  step.kv_cache = "cat";
  step.prompt = "p.txt";
  step.run = 3;
  step.step = 5;
  step.position = 518;
  step.ms = 24.0625;
  step.copied_contiguous_bytes = 100;
  step.copied_strided_bytes = 25165824;
  step.allocated_bytes = 4096;
  step.strided_runs = 196608;
  step.kv_read_bytes = 12582912;
  step.model = "tiny-gemma3";
  step.attention = "candle";
  std::ostringstream out;
  write_steps_csv(out, sample_context(), {step});
  BenchData data;
  read_steps_csv(out.str(), "steps.csv", data);
  ASSERT_EQ(data.steps.size(), 1u);
  const StepRecord& read = data.steps[0];
  EXPECT_EQ(read.kv_cache, "cat");
  EXPECT_EQ(read.prompt, "p.txt");
  EXPECT_EQ(read.run, 3);
  EXPECT_EQ(read.step, 5);
  EXPECT_EQ(read.position, 518);
  EXPECT_DOUBLE_EQ(read.ms, 24.0625);
  EXPECT_EQ(read.copied_contiguous_bytes, 100);
  EXPECT_EQ(read.copied_strided_bytes, 25165824);
  EXPECT_EQ(read.allocated_bytes, 4096);
  EXPECT_EQ(read.strided_runs, 196608);
  EXPECT_EQ(read.kv_read_bytes, 12582912);
  EXPECT_EQ(read.model, "tiny-gemma3");
  EXPECT_EQ(read.attention, "candle");
}

TEST(BenchRecords, StepsCsvWithoutTheLaterColumnsReadsTheFusedPathAndNoRuns) {
  // The shape of the older steps CSVs (kept in findings/) before the model, path and run counts.
  std::string text =
      "kv_cache,prompt,run,step,position,ms,copied_contiguous_bytes,copied_strided_bytes,"
      "allocated_bytes,date,cpu,cores,threads,dtype,commit,dirty,read_gbs,peak_gflops\n"
      "cat,p.txt,1,0,513,31.6033,6325760,0,6316032,2026-11-29,CPU,2,2,bf16,08c57a4,no,61.18,"
      "470.4\n";
  BenchData data;
  read_steps_csv(text, "old-steps.csv", data);
  ASSERT_EQ(data.steps.size(), 1u);
  EXPECT_EQ(data.steps[0].model, "");
  EXPECT_EQ(data.steps[0].attention, "fused");
  EXPECT_EQ(data.steps[0].strided_runs, 0);
  EXPECT_EQ(data.steps[0].kv_read_bytes, 0);
  EXPECT_EQ(data.steps[0].copied_contiguous_bytes, 6325760);
}

TEST(BenchRecords, ReadingRejectsAFileWithoutTheBenchColumns) {
  BenchData data;
  EXPECT_THROW(read_runs_csv("kv_cache,prompt\ncat,p\n", "other.csv", data), Error);
}

TEST(BenchRecords, CompanionPathsReplaceTheCsvExtension) {
  OutputPaths paths = output_paths_for("runs/2026-11-29-abc1234.csv");
  EXPECT_EQ(paths.runs_csv, "runs/2026-11-29-abc1234.csv");
  EXPECT_EQ(paths.steps_csv, "runs/2026-11-29-abc1234-steps.csv");
  EXPECT_EQ(paths.markdown, "runs/2026-11-29-abc1234.md");
  EXPECT_EQ(paths.svg, "runs/2026-11-29-abc1234.svg");
  EXPECT_EQ(output_paths_for("out/base").steps_csv, "out/base-steps.csv");
}

TEST(BenchRoofline, BytesPerTokenAddTheKvCacheAtTheMeanPositionRead) {
  RunRecord run;
  run.weight_bytes = 1000;
  run.kv_bytes_per_position = 10;
  run.prompt_tokens = 100;
  run.decode_steps = 3;  // Steps read 101, 102 and 103 positions: 102 on average.
  EXPECT_DOUBLE_EQ(bytes_read_per_token(run), 1000 + 10 * 102);
  // A run that recorded what attention reads (a sliding window reads less) uses that.
  run.kv_bytes_per_token = 700;
  EXPECT_DOUBLE_EQ(bytes_read_per_token(run), 1000 + 700);
}

// Gemma 3's shape in small: three layers, the first two local with a window of 8 positions.
KvCacheShape sliding_window_shape() {
  KvCacheShape shape{1, 2, 32, 64, DType::f32};
  shape.window = 8;
  shape.sliding_layers = {true, true, false};
  return shape;
}

TEST(BenchRoofline, KvBytesOfASlidingWindowModelCountOnlyTheWindowOfLocalLayers) {
  const KvCacheShape shape = sliding_window_shape();
  const double per_position = 2 * 2 * 32 * 4;  // K and V, 2 heads of 32 f32 values.
  // After 10 prompt tokens, steps read 11 to 15 positions (13 on average) on the global layer
  // and 8 on each local one.
  EXPECT_DOUBLE_EQ(kv_bytes_read_per_token(shape, 3, 10, 5), (8 + 8 + 13) * per_position);
  // Inside the window every layer reads every position: 3, 4 and 5 after a 2-token prompt.
  EXPECT_DOUBLE_EQ(kv_bytes_read_per_token(shape, 3, 2, 3), 3 * 4 * per_position);
  KvCacheShape global = shape;
  global.window = 0;
  EXPECT_DOUBLE_EQ(kv_bytes_read_per_token(global, 3, 10, 5), 3 * 13 * per_position);
  EXPECT_DOUBLE_EQ(kv_bytes_read_per_token(shape, 3, 10, 0), 0);
}

TEST(BenchRoofline, PrefillAttentionOnALocalLayerCountsTheKeysInItsWindow) {
  ModelConfig config;
  config.hidden_size = 8;
  config.intermediate_size = 16;
  config.num_hidden_layers = 1;
  config.num_attention_heads = 2;
  config.num_key_value_heads = 1;
  config.vocab_size = 32;
  KvCacheShape global{1, 1, 4, 64, DType::f32};
  KvCacheShape local = global;
  local.window = 4;
  local.sliding_layers = {true};
  // 10 queries see 1 + 2 + ... + 10 = 55 keys in all, or 1 + 2 + 3 + 4 + 6 x 4 = 34 in a window
  // of 4; each key costs 2 FLOPs for its score and 2 for its share of V per query channel (8).
  const double keys_saved = 55 - 34;
  EXPECT_NEAR(prefill_gflop(config, global, 10) - prefill_gflop(config, local, 10),
              2 * 2 * 8 * keys_saved / 1e9, 1e-15);
  // Projections 2 x (2 x 8 x 8 + 2 x 8 x 4 + 3 x 8 x 16) per token, attention 4 x 8 per key,
  // the lm_head 2 x 8 x 32 once.
  EXPECT_NEAR(prefill_gflop(config, global, 10),
              (2.0 * (128 + 64 + 384) * 10 + 4 * 8 * 55 + 2 * 8 * 32) / 1e9, 1e-15);
}

// Qwen2.5-0.5B at the longest bench prompt (alice-32k: 32,513 tokens, then 128 new): decode
// reads the weights plus K and V of every position so far, and prefill's attention outweighs
// its projections.
TEST(BenchRoofline, AtA32kPromptDecodeReadsEveryPositionAndAttentionDominatesPrefill) {
  ModelConfig config;
  config.hidden_size = 896;
  config.intermediate_size = 4864;
  config.num_hidden_layers = 24;
  config.num_attention_heads = 14;
  config.num_key_value_heads = 2;
  config.vocab_size = 151936;
  KvCacheShape shape{1, 2, 64, 32513 + 128, DType::bf16};
  const double per_position = 24 * 2 * 2 * 64 * 2;  // 24 layers, K and V, 2 heads of 64 bf16.
  // The 127 decode steps read 32,514 to 32,640 positions: 32,577 on average, 400 MB.
  EXPECT_DOUBLE_EQ(kv_bytes_read_per_token(shape, 24, 32513, 127), 32577 * per_position);
  EXPECT_NEAR(kv_bytes_read_per_token(shape, 24, 32513, 127) / 1e6, 400.3, 0.1);
  // Query i sees i keys: n (n + 1) / 2 of them per layer, 4 FLOPs per key and query channel.
  const double n = 32513;
  const double attention = 4.0 * 896 * 24 * n * (n + 1) / 2 / 1e9;
  EXPECT_NEAR(prefill_gflop(config, shape, 32513) - prefill_linear_gflop(config, 32513), attention,
              1e-6 * attention);
  EXPECT_GT(attention, 1.9 * prefill_linear_gflop(config, 32513));
}

TEST(BenchSummary, OneTablePerModelAndPromptWithARowPerAttentionPathAndCache) {
  BenchData data;
  data.context = sample_context();
  std::vector<RunRecord> runs;
  for (const char* model : {"tiny", "tiny-llama"}) {
    for (const char* attention : {"fused", "candle"}) {
      for (const char* kv_cache : {"cat", "prealloc"}) {
        RunRecord run = sample_run(kv_cache, "p.ids", 1, 50, 20, 100);
        run.model = model;
        run.attention = attention;
        data.runs.push_back(run);
      }
    }
  }
  data.runs.back().mean_strided_bytes_last64 = 3 * 1024 * 1024;
  data.runs.back().bytes_per_run_last64 = 128;
  std::vector<PromptSummary> tables = summarize_runs(data);
  ASSERT_EQ(tables.size(), 2u);
  EXPECT_EQ(tables[0].model, "tiny");
  EXPECT_EQ(tables[1].model, "tiny-llama");
  for (const PromptSummary& table : tables) {
    ASSERT_EQ(table.caches.size(), 4u);
    EXPECT_EQ(table.caches[0].attention + " " + table.caches[0].kv_cache, "fused cat");
    EXPECT_EQ(table.caches[3].attention + " " + table.caches[3].kv_cache, "candle prealloc");
  }
  std::string text = format_tables(data);
  EXPECT_EQ(text.rfind("Machine: " + cpu_description(data.context) +
                           ", 2 cores\nKernels: " + data.context.kernels + "\n",
                       0),
            0u)
      << text;
  EXPECT_NE(text.find("### tiny \u00b7 p.ids: 2,049 prompt tokens"), std::string::npos) << text;
  EXPECT_NE(text.find("### tiny-llama \u00b7 p.ids: 2,049 prompt tokens"), std::string::npos);
  std::string last_table = text.substr(text.find("### tiny-llama"));
  std::vector<std::string> candle_prealloc = row_of(last_table, "candle", "prealloc");
  ASSERT_EQ(candle_prealloc.size(), 17u) << text;
  EXPECT_EQ(candle_prealloc[5], "3.00");
  EXPECT_EQ(candle_prealloc[6], "128");
  EXPECT_EQ(row_of(last_table, "fused", "cat").at(5), "0.00");
  std::string report = format_markdown_report(data, "Title", "");
  EXPECT_NE(report.find("| Models | `tiny` (models/qwen2.5-0.5b), `tiny-llama` "),
            std::string::npos)
      << report;
}

TEST(BenchSummary, GroupsByPromptThenCacheInTheOrderTheyFirstAppear) {
  BenchData data;
  data.context = sample_context();
  data.runs = {sample_run("cat", "long.txt", 1, 40, 25, 3000),
               sample_run("cat", "short.txt", 1, 80, 12, 1000),
               sample_run("prealloc", "long.txt", 2, 101, 9.9, 1700),
               sample_run("prealloc", "long.txt", 1, 99, 10.1, 1650)};
  std::vector<PromptSummary> prompts = summarize_runs(data);
  ASSERT_EQ(prompts.size(), 2u);
  EXPECT_EQ(prompts[0].prompt, "long.txt");
  EXPECT_EQ(prompts[0].new_tokens, 128);
  ASSERT_EQ(prompts[0].caches.size(), 2u);
  EXPECT_EQ(prompts[0].caches[0].kv_cache, "cat");
  const CacheSummary& prealloc = prompts[0].caches[1];
  EXPECT_EQ(prealloc.kv_cache, "prealloc");
  EXPECT_EQ(prealloc.decode_tok_s, (std::vector<double>{99, 101}));  // In run order.
  EXPECT_DOUBLE_EQ(prealloc.mean_tok_s, 100);
  EXPECT_DOUBLE_EQ(prealloc.min_mean_ms_last64, 9.9);
  EXPECT_DOUBLE_EQ(prealloc.max_mean_ms_last64, 10.1);
  EXPECT_DOUBLE_EQ(prealloc.min_peak_mib, 1650);
  EXPECT_DOUBLE_EQ(prealloc.max_peak_mib, 1700);
  EXPECT_DOUBLE_EQ(prealloc.mean_prefill_tok_s, 500);  // 2049 tokens in 4098 ms.
  double bytes = 988000000.0 + 12288.0 * (2049 + 64);
  EXPECT_DOUBLE_EQ(prealloc.bytes_per_token, bytes);
  EXPECT_NEAR(prealloc.achieved_gbs, bytes * 100 / 1e9, 1e-9);
  EXPECT_NEAR(prealloc.percent_of_bandwidth, 100 * bytes * 100 / 1e9 / 50, 1e-9);
  EXPECT_EQ(prompts[1].prompt, "short.txt");
}

TEST(BenchSummary, MeanColumnSaysHowManyStepsItCovers) {
  BenchData data;
  data.context = sample_context();
  data.runs = {sample_run("cat", "short.txt", 1, 41.8, 24.14, 3373)};
  data.runs[0].decode_steps = 20;
  std::string tables = format_tables(data);
  EXPECT_EQ(row_cells(line_with(tables, "KV cache"))[4], "Mean ms, last 20 steps") << tables;
}

TEST(BenchSummary, TableHasTheFindingsColumnsThenTheRoofline) {
  BenchData data;
  data.context = sample_context();
  data.runs = {sample_run("cat", "bench/prompts/alice-2048.txt", 1, 41.8, 24.14, 3373),
               sample_run("cat", "bench/prompts/alice-2048.txt", 2, 41.9, 24.2, 3373),
               sample_run("cat", "bench/prompts/alice-2048.txt", 3, 42.0, 24.16, 3373),
               sample_run("prealloc", "bench/prompts/alice-2048.txt", 1, 105.3, 9.5, 1666),
               sample_run("prealloc", "bench/prompts/alice-2048.txt", 2, 104.9, 9.6, 1683)};
  std::string tables = format_tables(data);
  EXPECT_NE(tables.find("### qwen2.5-0.5b \u00b7 alice-2048.txt: 2,049 prompt tokens, 128 new "
                        "tokens"),
            std::string::npos)
      << tables;
  EXPECT_EQ(row_cells(line_with(tables, "KV cache")),
            (std::vector<std::string>{"Attention", "KV cache", "Decode tok/s (runs)", "Mean",
                                      "Mean ms, last 64 steps", "Strided MiB/step", "B/run",
                                      "Peak memory", "MB read/token", "GB/s", "Read GB/s",
                                      "% of read", "Linear % of read", "Prefill tok/s",
                                      "Prefill GFLOP/s", "% of peak", "Linear % of peak"}));
  // 988 MB of weights + 12,288 bytes x 2,113 mean positions = 1,013.96 MB per token; at
  // 41.9 tok/s that is 42.5 GB/s, 85 % of 50 GB/s. Prefill: 2,049 tokens in 4,098 ms, 1,600
  // GFLOP in 4.098 s = 390 GFLOP/s, 98 % of 400.
  EXPECT_EQ(row_cells(line_with(tables, "`cat`")),
            (std::vector<std::string>{"`fused`", "`cat`", "41.8, 41.9, 42.0", "41.9",
                                      "24.1\u201324.2", "0.00", "0", "3,373 MiB", "1,014", "42.5",
                                      "50.0", "85 %", "n/a", "500", "390", "98 %", "n/a"}));
  EXPECT_EQ(row_cells(line_with(tables, "`prealloc`"))[4], "9.5\u20139.6");
  EXPECT_EQ(row_cells(line_with(tables, "`prealloc`"))[7], "1,666\u20131,683 MiB");
  // With each run's own peak, the share is each run's over its peak, averaged: 390 of 500 is
  // 78 %, 390 of 300 is 130 %, mean 104 % (the bench's 400 would have said 98 %).
  data.runs[3].peak_gflops = 500;
  data.runs[4].peak_gflops = 300;
  EXPECT_EQ(row_cells(line_with(format_tables(data), "`prealloc`"))[15], "104 %");
}

TEST(BenchSummary, LinearColumnsTakeTheLinearOpsTimeAlone) {
  BenchData data;
  data.context = sample_context();
  data.runs = {sample_run("prealloc", "p.txt", 1, 40, 25, 3000),
               sample_run("prealloc", "p.txt", 2, 40, 25, 3000)};
  // 988 MB of weights x 127 steps in 2,509.3 ms of linear ops: 50.0 GB/s, 100 % of 50 GB/s;
  // in 3,136.6 ms, 40.0 GB/s, 80 %: the mean is 90 %.
  data.runs[0].decode_linear_ms = 988e6 * 127 / 50e9 * 1000;
  data.runs[1].decode_linear_ms = 988e6 * 127 / 40e9 * 1000;
  // 1,500 GFLOP in 5 s against the bench's 400 GFLOP/s peak: 75 %; in 4 s against the second
  // run's own peak of 600: 62.5 %; the mean is 68.75 %.
  for (RunRecord& run : data.runs) run.prefill_linear_gflop = 1500;
  data.runs[0].prefill_linear_ms = 5000;
  data.runs[1].prefill_linear_ms = 4000;
  data.runs[1].peak_gflops = 600;
  std::vector<std::string> cells = row_cells(line_with(format_tables(data), "`prealloc`"));
  EXPECT_EQ(cells[12], "90 %");
  EXPECT_EQ(cells[16], "69 %");
}

TEST(BenchSummary, MarkdownReportStatesTheContextAndLinksThePlot) {
  BenchData data;
  data.context = sample_context();
  data.runs = {sample_run("cat", "p.txt", 1, 40, 25, 3000)};
  std::string report = format_markdown_report(data, "Title", "plot.svg");
  EXPECT_EQ(report.rfind("# Title\n", 0), 0u);
  EXPECT_NE(report.find("| Machine | " + cpu_description(data.context) + ", "), std::string::npos)
      << report;
  EXPECT_NE(report.find("(family 25, model 17)"), std::string::npos);
  EXPECT_NE(report.find("| Threads | 2 |"), std::string::npos);
  EXPECT_NE(report.find("| Commit | `abc1234` (working tree dirty) |"), std::string::npos);
  EXPECT_NE(report.find("| Read bandwidth | 50.0 GB/s"), std::string::npos);
  EXPECT_NE(report.find("![ms per decode step against position](plot.svg)"), std::string::npos);
}

TEST(BenchSummary, TheGemmPeakNamesTheInstructionOfTheLevelTheKernelsRanAt) {
  BenchData data;
  data.context = sample_context();
  data.runs = {sample_run("cat", "p.txt", 1, 40, 25, 3000)};
  const std::string avx512_row =
      "| GEMM peak | 400 GFLOP/s, register-only vdpbf16ps on every thread";
  EXPECT_NE(format_markdown_report(data, "Title", "").find(avx512_row), std::string::npos);
  data.context.kernels = "isa avx2; gemm bf16: 6x16 f32";
  EXPECT_NE(format_markdown_report(data, "Title", "")
                .find("| GEMM peak | 400 GFLOP/s, register-only 256-bit FMA on every thread"),
            std::string::npos);
  data.context.kernels = "isa avx512; gemm bf16: 32x32 bf16 pairs on AMX tiles, panels of 2048 k";
  EXPECT_NE(format_markdown_report(data, "Title", "")
                .find("| GEMM peak | 400 GFLOP/s, register-only AMX tdpbf16ps on every thread"),
            std::string::npos);
  data.context.kernels = "";  // Files from before the kernels were recorded measured vdpbf16ps.
  EXPECT_NE(format_markdown_report(data, "Title", "").find(avx512_row), std::string::npos);
}

TEST(BenchPlot, AxisTicksStepByOneTwoOrFiveTimesAPowerOfTenAndRoundTheEndsOutwards) {
  AxisTicks positions = axis_ticks(0, 2176, 8);
  EXPECT_DOUBLE_EQ(positions.begin, 0);
  EXPECT_DOUBLE_EQ(positions.step, 500);
  EXPECT_DOUBLE_EQ(positions.end, 2500);
  AxisTicks one_prompt = axis_ticks(513, 640, 8);
  EXPECT_DOUBLE_EQ(one_prompt.step, 20);
  EXPECT_DOUBLE_EQ(one_prompt.begin, 500);
  EXPECT_DOUBLE_EQ(one_prompt.end, 640);
  AxisTicks ms = axis_ticks(0, 24.2, 6);
  EXPECT_DOUBLE_EQ(ms.step, 5);
  EXPECT_DOUBLE_EQ(ms.end, 25);
  AxisTicks small = axis_ticks(0, 0.37, 6);
  EXPECT_DOUBLE_EQ(small.step, 0.1);
  EXPECT_NEAR(small.end, 0.4, 1e-12);
  EXPECT_DOUBLE_EQ(axis_ticks(0, 20, 4).end, 20);
  AxisTicks flat = axis_ticks(7, 7, 5);
  EXPECT_LT(flat.begin, flat.end);
}

std::vector<StepRecord> sample_steps() {
  std::vector<StepRecord> steps;
  for (const char* kv_cache : {"cat", "prealloc"}) {
    for (int64_t run = 1; run <= 3; ++run) {
      for (int64_t step = 0; step < 4; ++step) {
        StepRecord record;
        record.kv_cache = kv_cache;
        record.prompt = "bench/prompts/a<b>&c.txt";
        record.run = run;
        record.step = step;
        record.position = 513 + step;
        record.ms = (std::string(kv_cache) == "cat" ? 11.0 : 7.0) + static_cast<double>(run);
        steps.push_back(record);
      }
    }
  }
  return steps;
}

TEST(BenchPlot, SeriesTakeTheMedianOfTheRunsAtEachPosition) {
  std::vector<PlotSeries> series = plot_series(sample_steps());
  ASSERT_EQ(series.size(), 2u);
  EXPECT_EQ(series[0].kv_cache, "cat");
  EXPECT_EQ(series[1].kv_cache, "prealloc");
  ASSERT_EQ(series[0].points.size(), 4u);
  EXPECT_DOUBLE_EQ(series[0].points[0].first, 513);
  EXPECT_DOUBLE_EQ(series[0].points[0].second, 13);  // Runs took 12, 13 and 14 ms.
  EXPECT_DOUBLE_EQ(series[1].points[3].first, 516);
  EXPECT_DOUBLE_EQ(series[1].points[3].second, 9);
}

TEST(BenchPlot, SvgIsWellFormedXmlWithOneLinePerCacheAndPromptAndALegend) {
  std::string svg = render_step_plot(sample_steps(), "title with <markup> & more");
  EXPECT_NE(svg.find("cat \u00b7 a&lt;b&gt;&amp;c.txt"), std::string::npos);
  EXPECT_NE(svg.find("ms per decode step"), std::string::npos);
  EXPECT_NE(svg.find("position of the decoded token"), std::string::npos);
  char path[] = "/tmp/fornace-bench-plot-XXXXXX";
  int descriptor = mkstemp(path);
  ASSERT_GE(descriptor, 0);
  close(descriptor);
  std::ofstream(path) << svg;
  // Python's XML parser checks that it is well formed; count the lines and legend entries.
  std::string command =
      fornace::test_paths::python() +
      " -c \"import sys, xml.etree.ElementTree as tree; "
      "root = tree.parse(sys.argv[1]).getroot(); "
      "ns = '{http://www.w3.org/2000/svg}'; "
      "legend = [g for g in root.iter(ns + 'g') if g.get('class') == 'legend'][0]; "
      "print(root.tag, len(list(root.iter(ns + 'polyline'))), "
      "len(legend.findall(ns + 'text')))\" " +
      path;
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  char buffer[256] = {};
  std::string output;
  while (std::fgets(buffer, sizeof buffer, pipe)) output += buffer;
  int status = pclose(pipe);
  std::remove(path);
  EXPECT_EQ(status, 0);
  EXPECT_EQ(output, "{http://www.w3.org/2000/svg}svg 2 2\n");
}

TEST(BenchPlot, AnEmptyPlotSaysSoAndIsStillAnSvg) {
  std::string svg = render_step_plot({}, "empty");
  EXPECT_NE(svg.find("no decode steps"), std::string::npos);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
}

}  // namespace
}  // namespace fornace::bench
