// Writes and reads the bench's files, and the `report` command that rebuilds tables and plot.
#include "outputs.h"

#include <filesystem>
#include <iostream>

#include "commands.h"
#include "common/cli.h"
#include "core/error.h"
#include "format.h"
#include "io/files.h"
#include "summary.h"
#include "svg_plot.h"
#include "test_fault.h"

namespace fornace::bench {

void write_bench_csvs(const OutputPaths& paths, const BenchData& data) {
  bool fail_midway = TestFault::from_environment().kind == TestFault::Kind::fail_write;
  write_file_atomically(paths.runs_csv, [&](std::ostream& out) {
    if (fail_midway) {
      write_runs_csv(out, data.context, {});
      out.flush();
      fail("writing ", paths.runs_csv, " failed (test fault FORNACE_BENCH_TEST_FAULT=fail-write)");
    }
    write_runs_csv(out, data.context, data.runs);
  });
  write_file_atomically(paths.steps_csv,
                        [&](std::ostream& out) { write_steps_csv(out, data.context, data.steps); });
}

void write_bench_report_files(const OutputPaths& paths, const BenchData& data) {
  std::string title = report_title(data);
  if (!data.steps.empty()) {
    write_file_atomically(paths.svg,
                          [&](std::ostream& out) { out << render_step_plot(data.steps, title); });
  }
  std::string svg_name = data.steps.empty() ? "" : path_file_name(paths.svg);
  write_file_atomically(paths.markdown, [&](std::ostream& out) {
    out << format_markdown_report(data, title, svg_name);
  });
}

BenchData read_bench_data(const std::string& runs_csv_path) {
  BenchData data;
  OutputPaths paths = output_paths_for(runs_csv_path);
  read_runs_csv(read_file(runs_csv_path), runs_csv_path, data);
  if (std::filesystem::exists(paths.steps_csv)) {
    read_steps_csv(read_file(paths.steps_csv), paths.steps_csv, data);
  }
  return data;
}

std::string report_title(const BenchData& data) {
  const BenchContext& context = data.context;
  return "fornace-bench " + context.date + ", commit " + context.commit +
         (context.dirty ? " (dirty)" : "") + ", " + context.dtype + ", " +
         std::to_string(context.threads) + " threads, " + cpu_description(context);
}

namespace {

// The tables and the plot from the CSVs.
int report(const std::string& runs_csv_path) {
  BenchData data = read_bench_data(runs_csv_path);
  OutputPaths paths = output_paths_for(runs_csv_path);
  write_bench_report_files(paths, data);
  std::cout << format_tables(data) << std::flush;
  std::cerr << "wrote " << paths.markdown;
  if (data.steps.empty()) {
    std::cerr << " (no " << paths.steps_csv << ", so no plot)\n";
  } else {
    std::cerr << " and " << paths.svg << "\n";
  }
  return 0;
}

}  // namespace

int report_command(int argc, char** argv) {
  tools::CommandLine app("fornace-bench report", "usage: fornace-bench report RUNS.csv",
                         "Prints the tables and rewrites the .md and .svg from a runs CSV and its "
                         "-steps.csv alone.");
  std::string runs_csv_path;
  app.add_option("RUNS.csv", runs_csv_path, "the runs CSV of a bench")->type_name("")->required();
  return app.parse_and_run(argc, argv, [&] { return report(runs_csv_path); });
}

}  // namespace fornace::bench
