// Compiled program binaries on disk (serialization_dir), so a second start skips
// the OpenCL compiler. Entries are keyed by everything that changes a binary
// (source hash, build options with the -D defines, device name, driver and
// OpenCL versions, project version) and validated on load; a corrupt, truncated
// or mismatching entry is ignored, rebuilt from source and replaced. Writes are
// atomic (temp file + rename), so processes may share a directory. Entries are regular files
// only (no link, FIFO or device is opened as one), their sizes are checked against the file
// before anything is allocated, and their hash covers the key with the payload. These checks
// catch corruption and mix-ups, not a forger with write access to the directory: whoever can
// write there can hand the driver any binary.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "cl/device.h"

namespace clgpu {

class BinaryCache {
 public:
  // dir/model_token/ (or dir/ when model_token is empty); created on first store.
  BinaryCache(std::string dir, std::string model_token);

  // The full key of a program (what a cached entry must match exactly).
  static std::string Key(const DeviceInfo& dev, const std::string& source,
                         const std::string& options);

  // The stored binary for `key`, or empty if there is none or it fails validation.
  std::vector<unsigned char> Load(const std::string& key);
  void Store(const std::string& key, const std::vector<unsigned char>& binary);

  std::string PathFor(const std::string& key) const;
  const std::string& directory() const { return dir_; }
  static std::string FileName(const std::string& key);

  // Counters for tests and bench: hits, misses (no file), rejected (corrupt or
  // mismatching), stored, and binaries the driver refused.
  std::atomic<int64_t> hits{0}, misses{0}, rejected{0}, stored{0}, driver_rejected{0};

 private:
  // The directory entries live in, as a descriptor (-1 if unusable); `create` makes it.
  int OpenDirectory(bool create) const;
  std::string base_, token_, dir_;
};

}  // namespace clgpu
