// Helpers for io and model tests: temporary directories, raw file bytes, and running commands.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/error.h"

namespace fornace::test_support {

// A fresh directory under the system temporary directory, removed with its contents at the end.
class TemporaryDirectory {
 public:
  TemporaryDirectory() {
    std::string pattern = (std::filesystem::temp_directory_path() / "fornace-test-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TemporaryDirectory() {
    std::error_code error;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::add, error);
    std::filesystem::remove_all(path_, error);
  }
  TemporaryDirectory(const TemporaryDirectory&) = delete;
  TemporaryDirectory& operator=(const TemporaryDirectory&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string read_bytes(const std::string& path) {
  std::ifstream stream(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << stream.rdbuf();
  return bytes.str();
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream stream(path, std::ios::binary | std::ios::trunc);
  stream.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// An 8-byte little-endian length followed by the header text and the data bytes.
inline std::string safetensors_bytes(const std::string& header, const std::string& data,
                                     uint64_t header_length_field) {
  std::string bytes;
  for (int index = 0; index < 8; ++index) {
    bytes += static_cast<char>((header_length_field >> (8 * index)) & 0xff);
  }
  return bytes + header + data;
}

inline std::string safetensors_bytes(const std::string& header, const std::string& data) {
  return safetensors_bytes(header, data, header.size());
}

// The names of the entries of a directory, sorted.
inline std::vector<std::string> list_directory(const std::string& path) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(path)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Whether a file with its read permission removed can still be opened (true when running as
// root, where permission bits do not stop reads).
inline bool permissions_do_not_stop_reads(const std::string& path) {
  return ::access(path.c_str(), R_OK) == 0;
}

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together.
};

inline CommandResult run_command_line(const std::string& command) {
  CommandResult result;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return result;
  char buffer[4096];
  size_t count = 0;
  while ((count = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0)
    result.output.append(buffer, count);
  int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// Single-quotes a string for the shell.
inline std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (char character : text) {
    if (character == '\'') {
      quoted += "'\\''";
    } else {
      quoted += character;
    }
  }
  return quoted + "'";
}

// The message of the fornace::Error that `body` throws; a test failure when it throws none.
template <typename Body>
std::string error_message(Body&& body) {
  try {
    body();
  } catch (const Error& error) {
    return error.what();
  }
  ADD_FAILURE() << "expected fornace::Error";
  return "";
}

// Expects `message` to be one line that contains every part.
inline void expect_message_names(const std::string& message,
                                 const std::vector<std::string>& parts) {
  EXPECT_EQ(message.find('\n'), std::string::npos) << "not one line: " << message;
  for (const std::string& part : parts) {
    EXPECT_NE(message.find(part), std::string::npos)
        << "message does not contain '" << part << "': " << message;
  }
}

}  // namespace fornace::test_support
