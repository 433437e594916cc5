// The runtime's small concepts: an Environment (device + context, shared by all
// delegates on that device) owning a ProgramCache; queues belong to their users.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cl/binary_cache.h"
#include "cl/device.h"
#include "cl/objects.h"

namespace clgpu {

// Built programs keyed by everything that changes the binary: source text (hash
// + length), build options (which carry the -D defines) and the device.
//
// Thread-safe, and builds run outside its lock: different programs build concurrently
// (clBuildProgram of different programs on one context from several threads is allowed
// by the OpenCL spec), and a thread asking for a program another thread is building
// waits for that build instead of starting its own. A failed build is not remembered:
// its waiters get its error, a later request builds again.
class ProgramCache {
 public:
  ProgramCache(cl_context ctx, const DeviceInfo& device) : ctx_(ctx), device_(device) {}

  // kernels/<file>.cl with kernels/common.cl prepended, built with `defines`
  // (e.g. "-DTILE_M=32 -DSTORAGE_HALF"). Throws BuildError with the log.
  // With `disk`, a binary stored there is used when valid, and a fresh build
  // is stored. `turn`, when given, is a mutex the calling thread holds: it is let go
  // while this call builds or waits for another thread's build, and held again before
  // the call returns or throws (runtime/build_threads.h: threads that take turns).
  std::shared_ptr<Program> Get(const std::string& file, const std::string& defines,
                               BinaryCache* disk = nullptr, std::mutex* turn = nullptr);
  // Any source text (tests, probes). `label` names it in errors.
  std::shared_ptr<Program> GetSource(const std::string& label, const std::string& source,
                                     const std::string& options, BinaryCache* disk = nullptr,
                                     std::mutex* turn = nullptr);

  // Source builds, requests served by a program already built (or being built), programs
  // loaded from a stored binary, and the wall time summed over all builds and loads (us).
  int64_t builds() const { return builds_; }
  int64_t hits() const { return hits_; }
  int64_t binary_loads() const { return binary_loads_; }
  int64_t build_us() const { return build_us_; }
  // Binaries stored in serialization_dir as NVIDIA machine code (cubin) instead of PTX.
  int64_t cubins_stored() const { return cubins_stored_; }

 private:
  struct Slot {
    std::shared_ptr<Program> program;  // set when built
    std::exception_ptr error;          // set when the build failed
    bool done = false;
  };
  cl_context ctx_;
  const DeviceInfo& device_;
  std::mutex mutex_;
  std::condition_variable built_;
  std::map<std::string, std::shared_ptr<Slot>> programs_;
  std::atomic<int64_t> builds_{0}, hits_{0}, binary_loads_{0}, build_us_{0}, cubins_stored_{0};
  static std::string Source(const std::string& file);
  static std::string MemoryKey(const std::string& source, const std::string& options);
  std::shared_ptr<Program> Build(const std::string& label, const std::string& source,
                                 const std::string& options, BinaryCache* disk);
  std::shared_ptr<Program> BuildFromBinary(const std::vector<unsigned char>& binary,
                                           const std::string& opts);
};

class Environment {
 public:
  // One environment per device per process, shared while anyone holds it: the last
  // delegate to go releases the context and its programs.
  static std::shared_ptr<Environment> ForDevice(const DeviceInfo& device);
  // The same, held for the rest of the process (warm_up()): creating a context costs
  // NVIDIA's driver a large part of a load (bench/results/init-*), which every later
  // delegate would pay again.
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

// clCreateKernel with the error naming the kernel. A kernel built with fp16 storage gets null
// for its overflow flag (kernels/common.cl's OVERFLOW_PARAM, its last two arguments): its
// saturating stores then note nothing until SetOverflowFlag gives it a buffer.
Kernel CreateKernel(const Program& program, const std::string& name);
// Where a kernel built with fp16 storage notes a store past the half range: word `slot` of
// `flag` (null: nowhere). Nothing for a kernel built otherwise.
void SetOverflowFlag(const Kernel& k, cl_mem flag, int slot);

// 64-bit FNV-1a, used in cache keys.
uint64_t HashBytes(const void* data, size_t n, uint64_t seed = 1469598103934665603ull);

}  // namespace clgpu
