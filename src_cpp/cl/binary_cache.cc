#include "cl/binary_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>

#include "cl/environment.h"
#include "common/log.h"

namespace clgpu {
namespace {

constexpr char kMagic[8] = {'C', 'L', 'G', 'P', 'U', 'B', 'I', 'N'};
// 2: the hash covers the key and the payload, so a payload filed under another key (the fp16
// build of a kernel copied to its fp32 name) fails the check.
constexpr uint32_t kFormat = 2;
constexpr uint64_t kMaxPayloadBytes = 1ull << 30;

struct Header {
  char magic[8];
  uint32_t format;
  uint32_t key_bytes;
  uint64_t payload_bytes;
  uint64_t entry_hash;  // HashBytes over the key, then the payload
};

uint64_t EntryHash(const std::string& key, const unsigned char* payload, size_t n) {
  return HashBytes(payload, n, HashBytes(key.data(), key.size()));
}

// Reads exactly n bytes (read() may return fewer).
bool ReadAll(int fd, void* dst, size_t n) {
  auto* p = static_cast<char*>(dst);
  while (n) {
    const ssize_t got = read(fd, p, n);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got, n -= size_t(got);
  }
  return true;
}

bool WriteAll(int fd, const void* src, size_t n) {
  const auto* p = static_cast<const char*>(src);
  while (n) {
    const ssize_t put = write(fd, p, n);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return false;
    p += put, n -= size_t(put);
  }
  return true;
}

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

BinaryCache::BinaryCache(std::string dir, std::string model_token)
    : base_(std::move(dir)), token_(std::move(model_token)) {
  dir_ = token_.empty() ? base_ : base_ + "/" + token_;
}

std::string BinaryCache::Key(const DeviceInfo& dev, const std::string& source,
                             const std::string& options) {
  char hash[40];
  std::snprintf(hash, sizeof hash, "%016llx:%zu",
                static_cast<unsigned long long>(HashBytes(source.data(), source.size())),
                source.size());
  return std::string("clgpu_delegate ") + CLGPU_VERSION + "\n" + dev.platform + "\n" + dev.name +
         "\n" + dev.version + "\n" + dev.driver_version + "\n" + options + "\n" + hash;
}

std::string BinaryCache::FileName(const std::string& key) {
  char name[40];
  std::snprintf(name, sizeof name, "%016llx.bin",
                static_cast<unsigned long long>(HashBytes(key.data(), key.size())));
  return name;
}

std::string BinaryCache::PathFor(const std::string& key) const {
  return dir_ + "/" + FileName(key);
}

// serialization_dir is the user's (a link there is theirs to make); the model_token directory
// inside it is ours: a link planted in its place is neither read nor written through.
int BinaryCache::OpenDirectory(bool create) const {
  // One level: the options checked that its parent exists (options.cc).
  if (create && mkdir(base_.c_str(), 0755) != 0 && errno != EEXIST) return -1;
  Fd base(open(base_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (base.get() < 0) return -1;
  if (token_.empty()) return dup(base.get());
  if (create && mkdirat(base.get(), token_.c_str(), 0755) != 0 && errno != EEXIST) return -1;
  const int fd =
      openat(base.get(), token_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 && errno != ENOENT)
    Log(LogLevel::kWarning, "the program cache directory " + dir_ +
                                " is not a plain directory (a link?); not using it");
  return fd;
}

std::vector<unsigned char> BinaryCache::Load(const std::string& key) {
  const std::string name = FileName(key);
  Fd dir(OpenDirectory(false));
  // O_NOFOLLOW: a link is not an entry; O_NONBLOCK: opening a FIFO returns at once (and
  // fstat then refuses it) instead of waiting for a writer.
  Fd f(dir.get() < 0
           ? -1
           : openat(dir.get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (f.get() < 0 && (dir.get() < 0 || errno == ENOENT)) {
    ++misses;
    return {};
  }
  Header h{};
  struct stat st {};
  std::vector<unsigned char> payload;
  std::string stored_key;
  // Every size is checked against the file before anything is allocated.
  bool ok = f.get() >= 0 && fstat(f.get(), &st) == 0 && S_ISREG(st.st_mode) &&
            ReadAll(f.get(), &h, sizeof h) && std::memcmp(h.magic, kMagic, sizeof kMagic) == 0 &&
            h.format == kFormat && h.key_bytes == key.size() && h.payload_bytes > 0 &&
            h.payload_bytes <= kMaxPayloadBytes &&
            uint64_t(st.st_size) == sizeof h + uint64_t(h.key_bytes) + h.payload_bytes;
  if (ok) {
    stored_key.resize(h.key_bytes);
    payload.resize(h.payload_bytes);
    ok = ReadAll(f.get(), stored_key.data(), stored_key.size()) && stored_key == key &&
         ReadAll(f.get(), payload.data(), payload.size()) &&
         EntryHash(key, payload.data(), payload.size()) == h.entry_hash;
  }
  if (!ok) {
    ++rejected;
    Log(LogLevel::kInfo, "ignoring invalid cached binary " + PathFor(key));
    return {};
  }
  ++hits;
  return payload;
}

void BinaryCache::Store(const std::string& key, const std::vector<unsigned char>& binary) {
  if (binary.empty() || binary.size() > kMaxPayloadBytes) return;
  Fd dir(OpenDirectory(true));
  if (dir.get() < 0) {
    Log(LogLevel::kWarning, "could not open the program cache directory " + dir_);
    return;
  }
  const std::string name = FileName(key);
  std::random_device rd;
  const std::string tmp = name + ".tmp." + std::to_string(getpid()) + "." + std::to_string(rd());
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.format = kFormat;
  h.key_bytes = static_cast<uint32_t>(key.size());
  h.payload_bytes = binary.size();
  h.entry_hash = EntryHash(key, binary.data(), binary.size());
  bool ok = false;
  {
    // O_EXCL | O_NOFOLLOW: a name planted in advance (a link, a FIFO) is not written through.
    Fd f(
        openat(dir.get(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
    ok = f.get() >= 0 && WriteAll(f.get(), &h, sizeof h) &&
         WriteAll(f.get(), key.data(), key.size()) &&
         WriteAll(f.get(), binary.data(), binary.size());
  }
  // renameat() is atomic and replaces whatever has the name (a link itself, not its target):
  // readers see the old entry or the new one, never a part.
  if (!ok || renameat(dir.get(), tmp.c_str(), dir.get(), name.c_str()) != 0) {
    unlinkat(dir.get(), tmp.c_str(), 0);
    Log(LogLevel::kWarning, "could not write the program cache file " + PathFor(key));
    return;
  }
  ++stored;
}

}  // namespace clgpu
