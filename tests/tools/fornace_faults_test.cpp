// Faults around the fornace binary: damaged or unreadable model files, directories where files
// belong, a closed stdout, non-UTF-8 prompts, and interrupted writes. Each gives one clear
// `error:` line (or a quiet exit), never a crash, a hang or a complete-looking partial file.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/run_fornace.h"
#include "common/source_paths.h"
#include "common/test_models.h"
#include "io/safetensors.h"

namespace fornace {
namespace {

namespace fs = std::filesystem;

// A scratch directory under the build directory, readable by every user, removed afterwards.
class ScratchDirectory {
 public:
  explicit ScratchDirectory(const std::string& name)
      : path_(fornace::test_paths::build("faults-") + name + "-" + std::to_string(::getpid())) {
    fs::remove_all(path_);
    fs::create_directories(path_);
    fs::permissions(path_, fs::perms(0755));
  }
  ~ScratchDirectory() {
    std::error_code error;
    fs::remove_all(path_, error);
  }
  std::string path(const std::string& name = "") const {
    return name.empty() ? path_ : path_ + "/" + name;
  }

 private:
  std::string path_;
};

// A copy of the tiny f32 model in `directory`: the files in `copied` are real copies (to damage
// them), the others are symbolic links to the shared model.
void make_model_copy(const std::string& directory, const std::vector<std::string>& copied) {
  std::string source = tiny_model_directory(DType::f32);
  fs::create_directories(directory);
  fs::permissions(directory, fs::perms(0755));
  for (const fs::directory_entry& entry : fs::directory_iterator(source)) {
    std::string name = entry.path().filename().string();
    fs::path target = fs::path(directory) / name;
    if (std::find(copied.begin(), copied.end(), name) != copied.end()) {
      fs::copy_file(entry.path(), target);
    } else {
      fs::create_symlink(entry.path(), target);
    }
  }
}

void replace_with_directory(const std::string& path) {
  fs::remove(path);
  fs::create_directory(path);
}

// Overwrites `bytes.size()` bytes at `offset` of the file at `path`.
void overwrite_bytes(const std::string& path, size_t offset, const std::string& bytes) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekp(static_cast<std::streamoff>(offset));
  file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

const char kOneStep[] = " --prompt-ids 1,2 --max-new-tokens 1 --quiet";

// ---- A model file that changes or is truncated between runs -----------------------------------

class ChangedModelFile : public ::testing::Test {
 protected:
  ScratchDirectory scratch{"changed"};
  std::string model = scratch.path("model");
  std::string weights = model + "/model.safetensors";
  void SetUp() override {
    make_model_copy(model, {"model.safetensors"});
    ASSERT_EQ(run_fornace("--model " + model + kOneStep).exit_code, 0);
  }
};

TEST_F(ChangedModelFile, TruncatedDataIsRefusedAtLoad) {
  fs::resize_file(weights, fs::file_size(weights) - 100);
  expect_error(run_fornace("--model " + model + kOneStep), 1, weights);
  expect_error(run_fornace("--model " + model + kOneStep), 1, "truncated");
}

TEST_F(ChangedModelFile, TruncatedInsideTheHeaderIsRefusedAtLoad) {
  fs::resize_file(weights, 100);
  expect_error(run_fornace("--model " + model + kOneStep), 1, "runs past the end of the file");
  fs::resize_file(weights, 5);
  expect_error(run_fornace("--model " + model + kOneStep), 1, "too short");
  fs::resize_file(weights, 0);
  expect_error(run_fornace("--model " + model + kOneStep), 1, "0 bytes");
}

TEST_F(ChangedModelFile, OverwrittenHeaderIsRefusedAtLoad) {
  overwrite_bytes(weights, 8, "#garbage#");
  expect_error(run_fornace("--model " + model + kOneStep), 1, "not valid JSON");
}

TEST_F(ChangedModelFile, HeaderLengthPastTheEndIsRefusedAtLoad) {
  overwrite_bytes(weights, 0, std::string("\xff\xff\xff\xff\xff\x00\x00\x00", 8));
  expect_error(run_fornace("--model " + model + kOneStep), 1, "header length");
}

TEST_F(ChangedModelFile, RewrittenWithAnotherShapeIsRefusedAtLoad) {
  // A valid safetensors file again, but the final norm lost half its width.
  std::vector<std::pair<std::string, Tensor>> tensors;
  {
    std::shared_ptr<SafetensorsFile> file = SafetensorsFile::open(weights);
    for (const TensorEntry& entry : file->entries()) {
      Tensor tensor = file->tensor(entry.name);
      if (entry.name == "model.norm.weight") tensor = tensor.narrow(0, 0, entry.shape[0] / 2);
      tensors.emplace_back(entry.name, tensor);
    }
  }
  write_safetensors(weights, tensors);
  expect_error(run_fornace("--model " + model + kOneStep), 1, "model.norm.weight");
}

// ---- A directory where a file was expected ----------------------------------------------------

class DirectoryInsteadOfFile : public ::testing::TestWithParam<const char*> {};

TEST_P(DirectoryInsteadOfFile, IsARuntimeErrorNamingThePath) {
  ScratchDirectory scratch{"directory"};
  std::string model = scratch.path("model");
  make_model_copy(model, {});
  std::string path = model + "/" + GetParam();
  replace_with_directory(path);
  expect_error(run_fornace("--model " + model + " --prompt hello --max-new-tokens 1 --quiet"), 1,
               path + ": is a directory");
}

INSTANTIATE_TEST_SUITE_P(ModelFiles, DirectoryInsteadOfFile,
                         ::testing::Values("model.safetensors", "config.json",
                                           "generation_config.json", "tokenizer.json"));

TEST(FornaceFaults, PromptFileThatIsADirectoryIsARuntimeError) {
  ScratchDirectory scratch{"prompt-directory"};
  std::string model = tiny_model_directory(DType::f32);
  expect_error(run_fornace("--model " + model + " --prompt-file " + scratch.path()), 1,
               scratch.path() + ": is a directory");
}

// A file is read as a GGUF model; one that is not says so.
TEST(FornaceFaults, ModelPathThatIsAFileButNotGgufIsARuntimeError) {
  std::string config = tiny_model_directory(DType::f32) + "/config.json";
  expect_error(run_fornace("--model " + config + " --prompt-ids 1"), 1, "config.json: not a GGUF file");
}

// ---- A file without read permission ------------------------------------------------------------

// How to run fornace as a user that file permissions apply to: nothing when this process is not
// root, `runuser -u nobody --` when it is root and runuser exists and `nobody` can reach the build
// (a checkout under a private directory, e.g. one made by mktemp, is out of its reach); nullopt
// when neither works.
std::optional<std::string> unprivileged_prefix() {
  if (::geteuid() != 0) return "";
  for (const char* runuser : {"/usr/sbin/runuser", "/sbin/runuser", "/usr/bin/runuser"}) {
    if (::access(runuser, X_OK) != 0) continue;
    std::string prefix = std::string(runuser) + " -u nobody -- ";
    std::string probe =
        prefix + fornace::test_paths::build() + "/bin/fornace --help >/dev/null 2>&1";
    if (std::system(probe.c_str()) == 0) return prefix;
  }
  return std::nullopt;
}

class UnreadableFile : public ::testing::TestWithParam<const char*> {};

TEST_P(UnreadableFile, IsARuntimeErrorNamingThePath) {
  std::optional<std::string> prefix = unprivileged_prefix();
  if (!prefix) GTEST_SKIP() << "running as root, and no runuser that reaches the build as nobody";
  ScratchDirectory scratch{"unreadable"};
  std::string model = scratch.path("model");
  std::string name = GetParam();
  make_model_copy(model, {name});
  std::string arguments = "--model " + model + " --prompt hello --max-new-tokens 1 --quiet";
  // The model is readable by the user that runs it, until one file is not.
  ASSERT_EQ(run_fornace(arguments, *prefix).exit_code, 0);
  fs::permissions(model + "/" + name, fs::perms::none);
  expect_error(run_fornace(arguments, *prefix), 1, model + "/" + name + ": permission denied");
}

INSTANTIATE_TEST_SUITE_P(ModelFiles, UnreadableFile,
                         ::testing::Values("model.safetensors", "config.json", "tokenizer.json"));

TEST(FornaceFaults, UnreadablePromptFileIsARuntimeError) {
  std::optional<std::string> prefix = unprivileged_prefix();
  if (!prefix) GTEST_SKIP() << "running as root, and no runuser that reaches the build as nobody";
  ScratchDirectory scratch{"unreadable-prompt"};
  std::string prompt = scratch.path("prompt.txt");
  std::ofstream(prompt) << "hello";
  fs::permissions(prompt, fs::perms::none);
  expect_error(run_fornace("--model " + tiny_model_directory(DType::f32) + " --prompt-file " +
                               prompt + " --max-new-tokens 1",
                           *prefix),
               1, prompt + ": permission denied");
}

// ---- SIGPIPE: stdout closed early --------------------------------------------------------------

// `fornace ... | head -c 10`: fornace ignores SIGPIPE, stops generating at the first write that
// fails with EPIPE, and exits with status 0 and nothing on stderr, so that a pipeline under
// `set -o pipefail` does not fail and nothing is printed for an ordinary early close.
TEST(FornaceFaults, ClosedStdoutEndsQuietlyWithStatusZero) {
  std::string status_path =
      fornace::test_paths::build("faults-sigpipe-status-") + std::to_string(::getpid());
  Outcome outcome = run_shell_capturing(
      "{ " + fornace_binary() + " --model " + tiny_model_directory(DType::f32) +
      " --prompt hello --max-new-tokens 2000 --ignore-eos --temperature 1 --seed 3 2>{err} "
      "</dev/null; echo $? >" +
      status_path + "; } | head -c 10 >{out}");
  std::string status = slurp(status_path);
  std::remove(status_path.c_str());
  EXPECT_EQ(status, "0\n");
  EXPECT_EQ(outcome.err, "");
  EXPECT_EQ(outcome.out.size(), 10u);
}

// ---- A prompt file that is not UTF-8 -----------------------------------------------------------

TEST(FornaceFaults, NonUtf8PromptFileNamesTheFileAndByteOffset) {
  ScratchDirectory scratch{"utf8"};
  std::string prompt = scratch.path("latin1.txt");
  std::ofstream(prompt, std::ios::binary) << "caf\xe9 au lait";
  std::string model = tiny_model_directory(DType::f32);
  Outcome outcome = run_fornace("--model " + model + " --prompt-file " + prompt);
  expect_error(outcome, 1, prompt);
  EXPECT_NE(outcome.err.find("byte offset 3"), std::string::npos) << outcome.err;
  // With --chat the offset still counts in the file, not in the templated prompt.
  outcome = run_fornace("--model " + model + " --chat --prompt-file " + prompt);
  expect_error(outcome, 1, "byte offset 3");
}

TEST(FornaceFaults, NonUtf8PromptArgumentNamesTheByteOffset) {
  expect_error(run_fornace("--model " + tiny_model_directory(DType::f32) +
                           " --prompt \"$(printf 'ab\\377')\""),
               1, "byte offset 2");
}

// ---- Nothing lost: interrupted and failed writes -----------------------------------------------

// Starts `fornace synth --preset qwen2.5-0.5b --out <out>`, waits until it is writing the weights,
// and kills it with SIGKILL.
void kill_synth_while_writing_weights(const std::string& out) {
  std::string binary = fornace_binary();
  std::string tokenizer_directory = fornace::test_paths::source("models");
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::freopen("/dev/null", "w", stdout);
    ::execl(binary.c_str(), binary.c_str(), "synth", "--preset", "qwen2.5-0.5b", "--out",
            out.c_str(), "--tokenizer-dir", tokenizer_directory.c_str(), nullptr);
    ::_exit(127);
  }
  fs::path staging = out + ".tmp." + std::to_string(child);
  bool writing = false;
  while (!writing) {
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, WNOHANG), 0) << "synth ended before it was interrupted";
    std::error_code error;
    for (fs::directory_iterator entry(staging, error), end; !error && entry != end;
         entry.increment(error)) {
      std::string name = entry->path().filename().string();
      writing = writing || (name.rfind("model.safetensors.tmp.", 0) == 0 &&
                            entry->file_size(error) > (1u << 20));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
}

// True when some file under `directory` (recursively) has the name `name`.
bool holds_file_named(const std::string& directory, const std::string& name) {
  std::error_code error;
  for (fs::recursive_directory_iterator entry(directory, error), end; !error && entry != end;
       entry.increment(error)) {
    if (entry->path().filename() == name) return true;
  }
  return false;
}

TEST(FornaceFaults, KilledSynthLeavesNoModelDirectory) {
  ScratchDirectory scratch{"synth-kill"};
  std::string out = scratch.path("model");
  kill_synth_while_writing_weights(out);
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(holds_file_named(scratch.path(), "model.safetensors"));
  // Only the staging directory, named as a temporary, is left behind.
  for (const fs::directory_entry& entry : fs::directory_iterator(scratch.path())) {
    EXPECT_NE(entry.path().filename().string().find(".tmp."), std::string::npos) << entry.path();
  }
}

TEST(FornaceFaults, KilledSynthKeepsThePreviousModel) {
  ScratchDirectory scratch{"synth-replace"};
  std::string out = scratch.path("model");
  ASSERT_EQ(run_fornace("synth --preset tiny --out " + out + " --tokenizer-dir " +
                        fornace::test_paths::source() + "/models")
                .exit_code,
            0);
  std::string config_before = slurp(out + "/config.json");
  kill_synth_while_writing_weights(out);
  EXPECT_EQ(slurp(out + "/config.json"), config_before);
  EXPECT_EQ(run_fornace("--model " + out + kOneStep).exit_code, 0);
}

TEST(FornaceFaults, DumpLogitsIntoAMissingDirectoryFailsCleanly) {
  expect_error(run_fornace("--model " + tiny_model_directory(DType::f32) + kOneStep +
                           " --dump-logits /nonexistent/logits.npy"),
               1, "/nonexistent/logits.npy");
}

TEST(FornaceFaults, DumpLogitsOntoADirectoryFailsCleanlyAndLeavesNoTemporary) {
  ScratchDirectory scratch{"dump-directory"};
  std::string target = scratch.path("logits.npy");
  fs::create_directory(target);
  expect_error(run_fornace("--model " + tiny_model_directory(DType::f32) + kOneStep +
                           " --dump-logits " + target),
               1, target + ": is a directory");
  EXPECT_EQ(std::distance(fs::directory_iterator(scratch.path()), fs::directory_iterator()), 1);
}

TEST(FornaceFaults, DumpLogitsIntoAnUnwritableDirectoryFailsCleanly) {
  std::optional<std::string> prefix = unprivileged_prefix();
  if (!prefix) GTEST_SKIP() << "running as root, and no runuser that reaches the build as nobody";
  ScratchDirectory scratch{"dump-unwritable"};
  fs::permissions(scratch.path(), fs::perms(0555));
  std::string target = scratch.path("logits.npy");
  expect_error(run_fornace("--model " + tiny_model_directory(DType::f32) + kOneStep +
                               " --dump-logits " + target,
                           *prefix),
               1, "Permission denied");
  EXPECT_TRUE(fs::is_empty(scratch.path()));
}

}  // namespace
}  // namespace fornace
