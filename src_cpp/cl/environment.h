// The runtime's small concepts: an Environment (device + context, shared by all
// delegates on that device) owning a ProgramCache; queues belong to their users.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "cl/binary_cache.h"
#include "cl/device.h"
#include "cl/objects.h"

namespace clgpu {

// Built programs keyed by everything that changes the binary: source text (hash
// + length), build options (which carry the -D defines) and the device.
class ProgramCache {
 public:
  ProgramCache(cl_context ctx, const DeviceInfo& device) : ctx_(ctx), device_(device) {}

  // kernels/<file>.cl with kernels/common.cl prepended, built with `defines`
  // (e.g. "-DTILE_M=32 -DSTORAGE_HALF"). Throws BuildError with the log.
  // With `disk`, a binary stored there is used when valid, and a fresh build
  // is stored.
  std::shared_ptr<Program> Get(const std::string& file, const std::string& defines,
                               BinaryCache* disk = nullptr);
  // Any source text (tests, probes). `label` names it in errors.
  std::shared_ptr<Program> GetSource(const std::string& label, const std::string& source,
                                     const std::string& options, BinaryCache* disk = nullptr);

  int64_t builds() const { return builds_; }
  int64_t hits() const { return hits_; }

 private:
  cl_context ctx_;
  const DeviceInfo& device_;
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<Program>> programs_;
  int64_t builds_ = 0, hits_ = 0;
  std::shared_ptr<Program> BuildFromBinary(const std::vector<unsigned char>& binary,
                                           const std::string& opts);
};

class Environment {
 public:
  // One environment per device per process, shared while anyone holds it: the last
  // delegate to go releases the context and its programs.
  static std::shared_ptr<Environment> ForDevice(const DeviceInfo& device);
  // The same, held for the rest of the process (warm_up()): creating a context costs
  // NVIDIA's driver ~130 ms (H200), which every later delegate would pay again.
  static std::shared_ptr<Environment> Pin(const DeviceInfo& device);
  explicit Environment(const DeviceInfo& device);

  const DeviceInfo& device() const { return device_; }
  cl_context context() const { return context_.get(); }
  ProgramCache& programs() { return *programs_; }

  Queue CreateQueue(bool profiling) const;
  Buffer CreateBuffer(size_t bytes, cl_mem_flags flags = CL_MEM_READ_WRITE) const;
  // A view of [offset, offset + bytes) of `parent` (offset aligned to the device's
  // base address alignment): a sub-buffer, or over SVM a buffer at that address.
  Buffer CreateSubBuffer(const Buffer& parent, size_t offset, size_t bytes) const;
  // One coarse-grained SVM allocation as a buffer, or an empty Buffer where the
  // device or library has no SVM or the allocation fails. Its views are plain
  // buffers, never sub-buffers (NVIDIA's driver crashes releasing used ones). The
  // memory is freed after its last buffer, once `queue` has finished.
  Buffer CreateSvmArena(size_t bytes, cl_command_queue queue) const;

  // cl_mem objects created in this environment, of every kind (a steady-state invoke
  // creates none: tests/test_steady_state.py).
  int64_t buffers_created() const { return buffers_created_; }
  void CountBufferCreated() const { ++buffers_created_; }

 private:
  mutable std::atomic<int64_t> buffers_created_{0};
  DeviceInfo device_;
  Context context_;
  std::unique_ptr<ProgramCache> programs_;
};

// clCreateKernel with the error naming the kernel.
Kernel CreateKernel(const Program& program, const std::string& name);

// 64-bit FNV-1a, used in cache keys.
uint64_t HashBytes(const void* data, size_t n, uint64_t seed = 1469598103934665603ull);

}  // namespace clgpu
