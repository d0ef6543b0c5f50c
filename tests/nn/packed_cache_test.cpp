// The packed-weights cache: entries read back byte for byte, missed when the model's files or
// the signature change or the entry is cut short, stale entries removed, errors named.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "core/error.h"
#include "core/settings.h"
#include "nn/packed_cache.h"
#include "io/test_files.h"

namespace fornace {
namespace {

namespace fs = std::filesystem;
using test_support::TemporaryDirectory;

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

// Forms of 100, 5000 and 64 bytes, byte i of form f being f * 7 + i (mod 256).
std::vector<std::shared_ptr<const Storage>> some_forms() {
  std::vector<std::shared_ptr<const Storage>> forms;
  int form = 0;
  for (size_t bytes : {size_t{100}, size_t{5000}, size_t{64}}) {
    std::shared_ptr<Storage> storage = Storage::allocate(bytes);
    for (size_t index = 0; index < bytes; ++index) {
      static_cast<char*>(storage->data())[index] = static_cast<char>(form * 7 + index);
    }
    forms.push_back(storage);
    ++form;
  }
  return forms;
}

void expect_forms(const StoredPackedForms& stored,
                  const std::vector<std::shared_ptr<const Storage>>& forms) {
  ASSERT_EQ(stored.sizes.size(), forms.size());
  size_t offset = 0;
  for (size_t index = 0; index < forms.size(); ++index) {
    ASSERT_EQ(stored.sizes[index], forms[index]->bytes());
    const char* at = static_cast<const char*>(stored.bytes->data()) + offset;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(at) % 64, 0u) << "form " << index;
    EXPECT_EQ(std::memcmp(at, forms[index]->data(), forms[index]->bytes()), 0) << "form " << index;
    offset += (forms[index]->bytes() + 63) / 64 * 64;
  }
  EXPECT_EQ(stored.bytes->bytes(), offset);
}

TEST(PackedCache, AnEntryReadsBackItsFormsWhileTheModelFilesAreAsTheyWere) {
  TemporaryDirectory model;
  TemporaryDirectory cache;
  write_text(model.file("a.safetensors"), "weights of shard a");
  write_text(model.file("b.safetensors"), "weights of shard b");
  PackedCacheKey key{{model.file("a.safetensors"), model.file("b.safetensors")}, "kernels x"};
  PackedCache entry(cache.path() + "/made/here", key);
  EXPECT_FALSE(entry.read().has_value()) << "nothing stored yet";
  auto forms = some_forms();
  entry.write(forms);
  std::optional<StoredPackedForms> stored = PackedCache(cache.path() + "/made/here", key).read();
  ASSERT_TRUE(stored.has_value());
  expect_forms(*stored, forms);

  // Another signature is another entry.
  PackedCacheKey other_signature = key;
  other_signature.signature = "kernels y";
  EXPECT_NE(PackedCache(cache.path() + "/made/here", other_signature).path(), entry.path());
  EXPECT_FALSE(PackedCache(cache.path() + "/made/here", other_signature).read().has_value());

  // A shard's modification time changes (same size, same bytes): the entry is missed.
  struct timespec times[2] = {{0, UTIME_OMIT}, {12345, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, model.file("b.safetensors").c_str(), times, 0), 0);
  PackedCache touched(cache.path() + "/made/here", key);
  EXPECT_EQ(touched.path(), entry.path()) << "one entry per model path";
  EXPECT_FALSE(touched.read().has_value());
  // Written again, it is read again.
  touched.write(forms);
  ASSERT_TRUE(touched.read().has_value());
  // A shard rewritten with other bytes of another size: missed.
  write_text(model.file("a.safetensors"), "other weights of shard a");
  EXPECT_FALSE(PackedCache(cache.path() + "/made/here", key).read().has_value());
}

TEST(PackedCache, AnEntryCutShortOrWithAnotherHeaderIsMissed) {
  TemporaryDirectory model;
  TemporaryDirectory cache;
  write_text(model.file("model.gguf"), "a gguf file");
  PackedCache entry(cache.path(), {{model.file("model.gguf")}, "kernels"});
  entry.write(some_forms());
  ASSERT_TRUE(entry.read().has_value());
  const std::string whole = test_support::read_bytes(entry.path());
  write_text(entry.path(), whole.substr(0, whole.size() - 1));
  EXPECT_FALSE(entry.read().has_value()) << "one byte short";
  write_text(entry.path(), whole + "x");
  EXPECT_FALSE(entry.read().has_value()) << "one byte long";
  std::string other_count = whole;
  other_count.replace(other_count.find("forms 3"), 7, "forms 2");
  write_text(entry.path(), other_count);
  EXPECT_FALSE(entry.read().has_value()) << "a count that disagrees with the payload";
  write_text(entry.path(), "fornace packed weights 1\n");
  EXPECT_FALSE(entry.read().has_value()) << "a header alone";
  write_text(entry.path(), whole);
  EXPECT_TRUE(entry.read().has_value());
}

TEST(PackedCache, WritingRemovesTheEntriesOfModelsThatAreGoneOrChanged) {
  TemporaryDirectory models;
  TemporaryDirectory cache;
  for (const char* name : {"kept", "gone", "changed"}) write_text(models.file(name), name);
  auto entry_of = [&](const char* name) {
    return PackedCache(cache.path(), {{models.file(name)}, "kernels"});
  };
  for (const char* name : {"kept", "gone", "changed"}) entry_of(name).write(some_forms());
  const std::string gone = entry_of("gone").path();
  const std::string changed = entry_of("changed").path();
  write_text(cache.file("notes.txt"), "not an entry");
  fs::remove(models.file("gone"));
  write_text(models.file("changed"), "changed since");
  write_text(models.file("new"), "new");
  entry_of("new").write(some_forms());
  EXPECT_FALSE(fs::exists(gone));
  EXPECT_FALSE(fs::exists(changed));
  EXPECT_TRUE(entry_of("kept").read().has_value());
  EXPECT_TRUE(entry_of("new").read().has_value());
  EXPECT_TRUE(fs::exists(cache.file("notes.txt")));
}

TEST(PackedCache, ErrorsNameTheFileOrTheDirectory) {
  TemporaryDirectory model;
  write_text(model.file("model.gguf"), "a gguf file");
  try {
    PackedCache(model.path(), {{model.file("missing.gguf")}, "kernels"});
    FAIL() << "expected an Error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("missing.gguf"), std::string::npos) << error.what();
  }
  // The cache's directory would be under a regular file.
  PackedCache entry(model.file("model.gguf") + "/cache", {{model.file("model.gguf")}, "kernels"});
  try {
    entry.write(some_forms());
    FAIL() << "expected an Error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("model.gguf/cache"), std::string::npos)
        << error.what();
  }
}

TEST(PackedCache, TheDirectoryComesFromTheEnvironment) {
  const char* saved[3] = {std::getenv("FORNACE_PACKED_CACHE"), std::getenv("XDG_CACHE_HOME"),
                          std::getenv("HOME")};
  std::string kept[3];
  for (int index = 0; index < 3; ++index) kept[index] = saved[index] ? saved[index] : "";
  ::setenv("HOME", "/home/someone", 1);
  ::unsetenv("XDG_CACHE_HOME");
  ::unsetenv("FORNACE_PACKED_CACHE");
  EXPECT_EQ(EngineSettings::from_environment().packed_cache_directory,
            "/home/someone/.cache/fornace");
  ::setenv("XDG_CACHE_HOME", "/var/cache/x", 1);
  EXPECT_EQ(EngineSettings::from_environment().packed_cache_directory, "/var/cache/x/fornace");
  ::setenv("FORNACE_PACKED_CACHE", "/somewhere", 1);
  EXPECT_EQ(EngineSettings::from_environment().packed_cache_directory, "/somewhere");
  for (const char* off : {"0", "off"}) {
    ::setenv("FORNACE_PACKED_CACHE", off, 1);
    EXPECT_FALSE(EngineSettings::from_environment().packed_cache_directory.has_value()) << off;
  }
  const char* names[3] = {"FORNACE_PACKED_CACHE", "XDG_CACHE_HOME", "HOME"};
  for (int index = 0; index < 3; ++index) {
    if (saved[index]) {
      ::setenv(names[index], kept[index].c_str(), 1);
    } else {
      ::unsetenv(names[index]);
    }
  }
}

}  // namespace
}  // namespace fornace
