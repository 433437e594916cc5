#include "cl/binary_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "cl/environment.h"
#include "common/log.h"

namespace clgpu {
namespace {

constexpr char kMagic[8] = {'C', 'L', 'G', 'P', 'U', 'B', 'I', 'N'};
constexpr uint32_t kFormat = 1;

struct Header {
  char magic[8];
  uint32_t format;
  uint32_t key_bytes;
  uint64_t payload_bytes;
  uint64_t payload_hash;
};

void MakeDirs(const std::string& path) {
  std::string cur;
  std::stringstream ss(path);
  std::string part;
  if (!path.empty() && path[0] == '/') cur = "/";
  while (std::getline(ss, part, '/')) {
    if (part.empty()) continue;
    cur += part + "/";
    if (mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) return;
  }
}

}  // namespace

BinaryCache::BinaryCache(std::string dir, std::string model_token, bool corrupt_for_testing)
    : dir_(std::move(dir)), corrupt_(corrupt_for_testing) {
  if (!model_token.empty()) dir_ += "/" + model_token;
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

std::string BinaryCache::PathFor(const std::string& key) const {
  char name[40];
  std::snprintf(name, sizeof name, "%016llx.bin",
                static_cast<unsigned long long>(HashBytes(key.data(), key.size())));
  return dir_ + "/" + name;
}

std::vector<unsigned char> BinaryCache::Load(const std::string& key) {
  std::ifstream f(PathFor(key), std::ios::binary);
  if (!f) {
    ++misses;
    return {};
  }
  Header h{};
  std::string stored_key;
  std::vector<unsigned char> payload;
  bool ok = static_cast<bool>(f.read(reinterpret_cast<char*>(&h), sizeof h)) &&
            std::memcmp(h.magic, kMagic, sizeof kMagic) == 0 && h.format == kFormat &&
            h.key_bytes == key.size() && h.payload_bytes > 0 && h.payload_bytes < (1ull << 32);
  if (ok) {
    stored_key.resize(h.key_bytes);
    payload.resize(h.payload_bytes);
    ok = f.read(stored_key.data(), h.key_bytes) && stored_key == key &&
         f.read(reinterpret_cast<char*>(payload.data()), h.payload_bytes) &&
         f.peek() == std::char_traits<char>::eof() &&
         HashBytes(payload.data(), payload.size()) == h.payload_hash;
  }
  if (!ok) {
    ++rejected;
    Log(LogLevel::kInfo, "ignoring invalid cached binary " + PathFor(key));
    return {};
  }
  ++hits;
  if (corrupt_) {
    // Test hook: hand the driver garbage that passed our own checks.
    for (size_t i = 0; i < payload.size(); i += 7) payload[i] ^= 0x5a;
  }
  return payload;
}

void BinaryCache::Store(const std::string& key, const std::vector<unsigned char>& binary) {
  if (binary.empty()) return;
  MakeDirs(dir_);
  const std::string path = PathFor(key);
  std::random_device rd;
  const std::string tmp = path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(rd());
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.format = kFormat;
  h.key_bytes = static_cast<uint32_t>(key.size());
  h.payload_bytes = binary.size();
  h.payload_hash = HashBytes(binary.data(), binary.size());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(&h), sizeof h);
    f.write(key.data(), key.size());
    f.write(reinterpret_cast<const char*>(binary.data()), binary.size());
    if (!f) {
      std::remove(tmp.c_str());
      Log(LogLevel::kWarning, "could not write the program cache file " + tmp);
      return;
    }
  }
  // rename() is atomic: readers see the old entry or the new one, never a part.
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return;
  }
  ++stored;
}

}  // namespace clgpu
