// Number formatting shared by the CSVs, the tables and the plot.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fornace::bench {

// `value` with exactly `decimals` digits after the point ("%.*f").
std::string format_fixed(double value, int decimals);
// Thousands separators in the integer part of a formatted number: "1666.5" -> "1,666.5".
std::string group_thousands(const std::string& number);
// "1,234,567".
std::string with_thousands(int64_t value);
// "24.1–24.2", or "24.1" when both ends print the same.
std::string format_range(double low, double high, int decimals, bool thousands = false);
// The last component of a path: "bench/prompts/a.txt" -> "a.txt".
std::string path_file_name(const std::string& path);
// A label per path: its last component, or as many trailing components as it takes to tell it
// from the others ({"a/m", "b/m", "c/n/"} -> {"a/m", "b/m", "n"}); trailing slashes are dropped.
std::vector<std::string> distinct_path_labels(const std::vector<std::string>& paths);

}  // namespace fornace::bench
