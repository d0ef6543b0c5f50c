// The packed-weights cache: entries named by model path and signature, checked against the
// model's files, mapped in 2 MiB pages, written through a temporary and a rename.
#include "nn/packed_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "core/error.h"
#include "core/hash.h"
#include "io/file_mapping.h"
#include "io/files.h"

namespace fornace {
namespace {

namespace fs = std::filesystem;

// 2: interleaved quads keep their fifth bits as a plane (InterleavedQuad); an earlier entry reads as a miss.
constexpr char kFormat[] = "fornace packed weights 2\n";
constexpr size_t kHeaderLimit = size_t{1} << 20;
constexpr size_t kPayloadAlignment = 4096;
constexpr size_t kFormAlignment = 64;  // As PackedWeights places forms.

size_t round_up(size_t value, size_t multiple) { return (value + multiple - 1) / multiple * multiple; }

// "file <size> <mtime ns> <device> <inode> <path>\n" for the file as it is now; empty when it
// cannot be stat'ed.
std::string file_line(const std::string& path) {
  struct stat status {};
  if (::stat(path.c_str(), &status) != 0) return {};
  return concat("file ", status.st_size, " ",
                int64_t{status.st_mtim.tv_sec} * 1000000000 + status.st_mtim.tv_nsec, " ",
                status.st_dev, " ", status.st_ino, " ", path, "\n");
}

// The first kHeaderLimit bytes of the file at `descriptor` (fewer when it is shorter).
std::string read_head(int descriptor) {
  std::string head(kHeaderLimit, '\0');
  size_t done = 0;
  while (done < head.size()) {
    ssize_t count = ::pread(descriptor, head.data() + done, head.size() - done,
                            static_cast<off_t>(done));
    if (count < 0 && errno == EINTR) continue;
    if (count <= 0) break;
    done += static_cast<size_t>(count);
  }
  head.resize(done);
  return head;
}

// Whether every "file" line of an entry's header still names its file as it is now.
bool files_unchanged(const std::string& head) {
  std::istringstream lines(head.substr(0, head.find("\nforms ")));
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("file ", 0) != 0) continue;
    size_t path_at = 0;
    for (int field = 0; field < 5 && path_at != std::string::npos; ++field) {
      path_at = line.find(' ', path_at + 1);
    }
    if (path_at == std::string::npos || file_line(line.substr(path_at + 1)) != line + "\n") {
      return false;
    }
  }
  return true;
}

// Entries of the directory other than `keep` whose model files are gone or changed.
void remove_stale_entries(const std::string& directory, const std::string& keep) {
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(directory, error)) {
    const std::string name = entry.path().filename().string();
    if (entry.path() == keep || name.rfind("packed-", 0) != 0 || entry.path().extension() != ".bin") {
      continue;
    }
    int descriptor = ::open(entry.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (descriptor < 0) continue;
    const std::string head = read_head(descriptor);
    ::close(descriptor);
    if (head.rfind(kFormat, 0) == 0 && !files_unchanged(head)) fs::remove(entry.path(), error);
  }
}

}  // namespace

PackedCache::PackedCache(const std::string& directory, const PackedCacheKey& key,
                         const FileMappingOptions& mapping)
    : directory_(directory), mapping_(mapping) {
  identity_ = std::string(kFormat) + "signature " + key.signature + "\n";
  std::string name_key = key.signature;
  for (const std::string& file : key.files) {
    std::error_code error;
    const std::string canonical = fs::canonical(file, error).string();
    const std::string line = error ? std::string() : file_line(canonical);
    if (line.empty()) fail(file, ": cannot find the model file to key its packed weights");
    identity_ += line;
    name_key += "\n" + canonical;
  }
  const uint64_t hash = fnv1a_hash(name_key);  // Of the signature and the paths.
  char name[40];
  std::snprintf(name, sizeof name, "packed-%016llx.bin", static_cast<unsigned long long>(hash));
  path_ = (fs::path(directory) / name).string();
}

std::optional<StoredPackedForms> PackedCache::read(
    const std::function<void()>& before_mapping) const {
  int descriptor = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (descriptor < 0) return std::nullopt;
  struct Closer {
    int descriptor;
    ~Closer() { ::close(descriptor); }
  } closer{descriptor};
  const std::string head = read_head(descriptor);
  if (head.rfind(identity_, 0) != 0) return std::nullopt;
  // "forms <count>\n<size> <size> ...\npayload <offset>\n"
  std::istringstream rest(head.substr(identity_.size()));
  std::string word;
  size_t count = 0;
  if (!(rest >> word >> count) || word != "forms" || count == 0 || count > kHeaderLimit) {
    return std::nullopt;
  }
  StoredPackedForms stored;
  stored.sizes.resize(count);
  size_t total = 0;
  for (size_t& size : stored.sizes) {
    if (!(rest >> size) || size == 0 || size > (size_t{1} << 40)) return std::nullopt;
    total += round_up(size, kFormAlignment);
  }
  size_t offset = 0;
  if (!(rest >> word >> offset) || word != "payload" || offset % kPayloadAlignment != 0) {
    return std::nullopt;
  }
  struct stat status {};
  if (::fstat(descriptor, &status) != 0 || static_cast<size_t>(status.st_size) != offset + total) {
    return std::nullopt;
  }
  if (before_mapping) before_mapping();
  auto mapping = std::make_shared<const FileMapping>(
      descriptor, static_cast<size_t>(status.st_size), path_.c_str(), mapping_);
  stored.bytes = Storage::borrow(mapping, mapping->data() + offset, total);
  stored.mapping = mapping;
  return stored;
}

void PackedCache::write(const std::vector<std::shared_ptr<const Storage>>& forms) const {
  std::error_code error;
  fs::create_directories(directory_, error);
  if (error) fail(directory_, ": cannot make the directory: ", error.message());
  size_t payload = 0;
  for (const auto& form : forms) payload += round_up(form->bytes(), kFormAlignment);
  // Not where the entry would take more than half the space left.
  struct statvfs space {};
  if (::statvfs(directory_.c_str(), &space) == 0 &&
      static_cast<size_t>(space.f_bavail) * space.f_frsize < 2 * payload) {
    fail(directory_, ": not written, ", payload >> 20, " MiB would take more than half the ",
         (static_cast<size_t>(space.f_bavail) * space.f_frsize) >> 20, " MiB left");
  }
  std::string header = identity_ + concat("forms ", forms.size(), "\n");
  for (const auto& form : forms) header += concat(form->bytes(), " ");
  header += "\npayload ";
  // The payload's offset is written in a fixed width so that the header's length is known.
  constexpr int kOffsetDigits = 16;
  const size_t offset = round_up(header.size() + kOffsetDigits + 1, kPayloadAlignment);
  char offset_text[32];
  std::snprintf(offset_text, sizeof offset_text, "%0*zu\n", kOffsetDigits, offset);
  header += offset_text;
  write_file_atomically(path_, [&](std::ostream& out) {
    const std::string zeros(kPayloadAlignment, '\0');
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    out.write(zeros.data(), static_cast<std::streamsize>(offset - header.size()));
    for (const auto& form : forms) {
      out.write(static_cast<const char*>(form->data()), static_cast<std::streamsize>(form->bytes()));
      const size_t padding = round_up(form->bytes(), kFormAlignment) - form->bytes();
      out.write(zeros.data(), static_cast<std::streamsize>(padding));
    }
  });
  remove_stale_entries(directory_, path_);
}

}  // namespace fornace
