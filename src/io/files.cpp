// Whole-file reads, atomic writes through a temporary and a rename, and the .npy writer.
#include "io/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <streambuf>

#include "core/error.h"

namespace fornace {

namespace {

std::string errno_text(int error) { return std::strerror(error); }

// An output stream buffer that writes to a file descriptor and remembers the first error.
class DescriptorBuffer : public std::streambuf {
 public:
  explicit DescriptorBuffer(int descriptor) : descriptor_(descriptor), buffer_(1 << 20) {
    setp(buffer_.data(), buffer_.data() + buffer_.size());
  }
  int error() const { return error_; }

 protected:
  int_type overflow(int_type character) override {
    if (!drain()) return traits_type::eof();
    if (!traits_type::eq_int_type(character, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(character);
      pbump(1);
    }
    return traits_type::not_eof(character);
  }

  std::streamsize xsputn(const char* data, std::streamsize count) override {
    // Large writes go straight to the descriptor after the buffered bytes.
    if (count >= static_cast<std::streamsize>(buffer_.size())) {
      if (!drain() || !write_all(data, static_cast<size_t>(count))) return 0;
      return count;
    }
    return std::streambuf::xsputn(data, count);
  }

  int sync() override { return drain() ? 0 : -1; }

 private:
  bool drain() {
    size_t pending = static_cast<size_t>(pptr() - pbase());
    bool written = write_all(pbase(), pending);
    setp(buffer_.data(), buffer_.data() + buffer_.size());
    return written;
  }

  bool write_all(const char* data, size_t count) {
    if (error_) return false;
    while (count > 0) {
      ssize_t written = ::write(descriptor_, data, count);
      if (written < 0) {
        if (errno == EINTR) continue;
        error_ = errno;
        return false;
      }
      data += written;
      count -= static_cast<size_t>(written);
      offset_ += static_cast<size_t>(written);
    }
    start_writeback();
    return true;
  }

  // Asks the kernel to start writing out each full window as it fills, so that large files reach
  // the disk while later bytes are still being produced and the final fsync has little left.
  void start_writeback() {
#ifdef SYNC_FILE_RANGE_WRITE
    constexpr size_t kWindow = size_t{32} << 20;
    while (offset_ - flushed_ >= kWindow) {
      ::sync_file_range(descriptor_, static_cast<off_t>(flushed_), kWindow, SYNC_FILE_RANGE_WRITE);
      flushed_ += kWindow;
    }
#endif
  }

  int descriptor_;
  std::vector<char> buffer_;
  int error_ = 0;
  size_t offset_ = 0;   // Bytes written so far.
  size_t flushed_ = 0;  // Bytes whose writeback has been started.
};

std::string parent_directory(const std::string& path) {
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

// Makes a completed rename durable; failures here do not undo the write, so they are ignored.
void sync_directory(const std::string& directory) {
  int descriptor = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (descriptor < 0) return;
  ::fsync(descriptor);
  ::close(descriptor);
}

}  // namespace

ReadOnlyFile::ReadOnlyFile(const std::string& path) : path_(path) {
  descriptor_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (descriptor_ < 0) {
    int error = errno;
    if (error == ENOENT) fail(path, ": no such file");
    if (error == EACCES) fail(path, ": permission denied (the file is not readable)");
    fail(path, ": cannot open: ", errno_text(error));
  }
  struct stat status {};
  if (::fstat(descriptor_, &status) != 0) {
    int error = errno;
    ::close(descriptor_);
    fail(path, ": cannot stat: ", errno_text(error));
  }
  if (S_ISDIR(status.st_mode)) {
    ::close(descriptor_);
    fail(path, ": is a directory, expected a file");
  }
  if (!S_ISREG(status.st_mode)) {
    ::close(descriptor_);
    fail(path, ": is not a regular file");
  }
  size_ = static_cast<size_t>(status.st_size);
}

ReadOnlyFile::~ReadOnlyFile() {
  if (descriptor_ >= 0) ::close(descriptor_);
}

size_t ReadOnlyFile::current_size() const {
  struct stat status {};
  if (::fstat(descriptor_, &status) != 0) fail(path_, ": cannot stat: ", errno_text(errno));
  return static_cast<size_t>(status.st_size);
}

std::string read_file(const std::string& path) {
  ReadOnlyFile file(path);
  std::string bytes(file.size(), '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t count = ::read(file.descriptor(), bytes.data() + done, bytes.size() - done);
    if (count < 0) {
      if (errno == EINTR) continue;
      int error = errno;
      if (error == EISDIR) fail(path, ": is a directory, expected a file");
      fail(path, ": read failed: ", errno_text(error));
    }
    if (count == 0)
      fail(path, ": file shrank while being read (", done, " of ", bytes.size(), " bytes)");
    done += static_cast<size_t>(count);
  }
  return bytes;
}

std::string temporary_path_for(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  return concat(path, ".tmp.", ::getpid(), ".", counter.fetch_add(1));
}

void write_file_atomically(const std::string& path,
                           const std::function<void(std::ostream&)>& write) {
  std::string temporary = temporary_path_for(path);
  int descriptor = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (descriptor < 0) {
    fail(path, ": cannot create the temporary file ", temporary, ": ", errno_text(errno));
  }
  // Removes the temporary unless the rename succeeded.
  bool renamed = false;
  auto cleanup = [&] {
    if (descriptor >= 0) ::close(descriptor);
    descriptor = -1;
    if (!renamed) ::unlink(temporary.c_str());
  };
  try {
    DescriptorBuffer buffer(descriptor);
    std::ostream stream(&buffer);
    write(stream);
    stream.flush();
    if (buffer.error()) fail(path, ": write failed: ", errno_text(buffer.error()));
    if (!stream) fail(path, ": write failed");
    if (::fsync(descriptor) != 0) fail(path, ": fsync failed: ", errno_text(errno));
    int result = ::close(descriptor);
    descriptor = -1;
    if (result != 0) fail(path, ": close failed: ", errno_text(errno));
    if (::rename(temporary.c_str(), path.c_str()) != 0) {
      int error = errno;
      if (error == EISDIR) fail(path, ": is a directory, cannot replace it with a file");
      fail(path, ": cannot rename the temporary file into place: ", errno_text(error));
    }
    renamed = true;
  } catch (...) {
    cleanup();
    throw;
  }
  cleanup();
  sync_directory(parent_directory(path));
}

void write_npy(const std::string& path, const std::vector<float>& values, const Dims& shape) {
  static_assert(std::endian::native == std::endian::little,
                "the .npy writer assumes little-endian");
  if (static_cast<int64_t>(values.size()) != shape.product()) {
    fail(path, ": .npy writer got ", values.size(), " values for shape ", shape.to_string());
  }
  // Format 1.0: magic, version, a little-endian uint16 header length, then a Python dict literal
  // padded with spaces and ending in a newline so that the data starts on a 64-byte boundary.
  std::string shape_text = "(";
  for (int index = 0; index < shape.size(); ++index) {
    shape_text += std::to_string(shape[index]);
    shape_text += (shape.size() == 1) ? "," : (index + 1 < shape.size() ? ", " : "");
  }
  shape_text += ")";
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape_text + ", }";
  constexpr size_t kPrefixBytes = 10;  // Magic (6), version (2), header length (2).
  size_t total = kPrefixBytes + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  if (header.size() > 0xffff) fail(path, ": .npy header too long for format 1.0");
  write_file_atomically(path, [&](std::ostream& stream) {
    const char magic[] = "\x93NUMPY\x01\x00";
    stream.write(magic, 8);
    uint16_t header_length = static_cast<uint16_t>(header.size());
    char length_bytes[2] = {static_cast<char>(header_length & 0xff),
                            static_cast<char>(header_length >> 8)};
    stream.write(length_bytes, 2);
    stream.write(header.data(), static_cast<std::streamsize>(header.size()));
    stream.write(reinterpret_cast<const char*>(values.data()),
                 static_cast<std::streamsize>(values.size() * sizeof(float)));
  });
}

}  // namespace fornace
