#include "cl/environment.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <utility>
#include <vector>

#include "cl/errors.h"
#include "cl/kernel_registry.h"
#include "cl/nv_cubin.h"
#include "common/error.h"
#include "common/log.h"

namespace clgpu {

uint64_t HashBytes(const void* data, size_t n, uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

std::string ProgramCache::Source(const std::string& file) {
  return KernelText("common") + "\n#line 1\n" + KernelTextExpanded(file);
}

std::string ProgramCache::MemoryKey(const std::string& source, const std::string& options) {
  char key_hash[40];
  std::snprintf(key_hash, sizeof key_hash, "%016llx:%zu:",
                static_cast<unsigned long long>(HashBytes(source.data(), source.size())),
                source.size());
  return key_hash + options;
}

std::shared_ptr<Program> ProgramCache::Get(const std::string& file, const std::string& defines,
                                           BinaryCache* disk, std::mutex* turn) {
  return GetSource(file, Source(file), defines, disk, turn);
}

namespace {
// Lets go of a caller's turn for a scope (ProgramCache::Get's `turn`).
class TurnReleased {
 public:
  explicit TurnReleased(std::mutex* turn) : turn_(turn) {
    if (turn_) turn_->unlock();
  }
  ~TurnReleased() {
    if (turn_) turn_->lock();
  }
  TurnReleased(const TurnReleased&) = delete;
  TurnReleased& operator=(const TurnReleased&) = delete;

 private:
  std::mutex* turn_;
};
}  // namespace

std::shared_ptr<Program> ProgramCache::BuildFromBinary(const std::vector<unsigned char>& binary,
                                                       const std::string& opts) {
  const ClApi& cl = Cl();
  cl_device_id dev = device_.id;
  const unsigned char* data = binary.data();
  size_t len = binary.size();
  cl_int status = CL_SUCCESS, err = CL_SUCCESS;
  auto program = std::make_shared<Program>(
      cl.clCreateProgramWithBinary(ctx_, 1, &dev, &len, &data, &status, &err));
  if (err != CL_SUCCESS || status != CL_SUCCESS) return nullptr;
  if (cl.clBuildProgram(program->get(), 1, &dev, opts.c_str(), nullptr, nullptr) != CL_SUCCESS)
    return nullptr;
  return program;
}

std::shared_ptr<Program> ProgramCache::GetSource(const std::string& label,
                                                 const std::string& source,
                                                 const std::string& options, BinaryCache* disk,
                                                 std::mutex* turn) {
  const std::string key = MemoryKey(source, options);
  std::shared_ptr<Slot> slot;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    std::shared_ptr<Slot>& s = programs_[key];
    if (s) {
      ++hits_;
      slot = s;
      if (!slot->done) {
        lock.unlock();
        TurnReleased released(turn);  // taken back after this cache's lock is let go
        std::unique_lock<std::mutex> wait(mutex_);
        built_.wait(wait, [&] { return slot->done; });
      }
      if (slot->error) std::rethrow_exception(slot->error);
      return slot->program;
    }
    s = slot = std::make_shared<Slot>();
  }
  TurnReleased released(turn);
  // This thread builds; others asking for the same key wait on `slot`.
  std::shared_ptr<Program> program;
  std::exception_ptr error;
  try {
    program = Build(label, source, options, disk);
  } catch (...) {
    error = std::current_exception();
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    slot->program = program;
    slot->error = error;
    slot->done = true;
    if (error) programs_.erase(key);  // a later request builds again
  }
  built_.notify_all();
  if (error) std::rethrow_exception(error);
  return program;
}

namespace {
int64_t MicrosSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() -
                                                               t0)
      .count();
}
std::string Ms(int64_t us) {
  return std::to_string(us / 1000) + "." + std::to_string(us / 100 % 10);
}
}  // namespace

// One build, from a stored binary when `disk` holds a valid one, else from source (then
// stored). Runs without the cache's lock.
std::shared_ptr<Program> ProgramCache::Build(const std::string& label, const std::string& source,
                                             const std::string& options, BinaryCache* disk) {
  const ClApi& cl = Cl();
  const auto t0 = std::chrono::steady_clock::now();
  const std::string opts = "-cl-std=CL1.2 " + options;
  const std::string disk_key = disk ? BinaryCache::Key(device_, source, opts) : "";
  if (disk) {
    std::vector<unsigned char> binary = disk->Load(disk_key);
    if (!binary.empty()) {
      if (auto program = BuildFromBinary(binary, opts)) {
        ++binary_loads_;
        const int64_t us = MicrosSince(t0);
        build_us_ += us;
        Log(LogLevel::kDebug,
            "program " + label + " [" + options + "] loaded in " + Ms(us) + " ms");
        return program;
      }
      ++disk->driver_rejected;  // falls through to a source build that replaces it
    }
  }
  const char* text = source.c_str();
  size_t len = source.size();
  cl_int err = CL_SUCCESS;
  auto program =
      std::make_shared<Program>(cl.clCreateProgramWithSource(ctx_, 1, &text, &len, &err));
  CheckCl(err, "clCreateProgramWithSource");
  cl_device_id dev = device_.id;
  err = cl.clBuildProgram(program->get(), 1, &dev, opts.c_str(), nullptr, nullptr);
  const int64_t built_us = MicrosSince(t0);
  if (err != CL_SUCCESS) {
    build_us_ += built_us;
    size_t n = 0;
    cl.clGetProgramBuildInfo(program->get(), dev, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
    std::string log(n, '\0');
    if (n)
      cl.clGetProgramBuildInfo(program->get(), dev, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
    while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
    throw BuildError(label, opts,
                     log.empty() ? "(" + ClErrorName(err) + ", empty build log)" : log);
  }
  ++builds_;
  if (disk) {
    // Asking for the binary may compile more (PoCL compiles every kernel of the program here).
    size_t n = 0;
    if (cl.clGetProgramInfo(program->get(), CL_PROGRAM_BINARY_SIZES, sizeof n, &n, nullptr) ==
            CL_SUCCESS &&
        n > 0) {
      std::vector<unsigned char> binary(n);
      unsigned char* ptr = binary.data();
      if (cl.clGetProgramInfo(program->get(), CL_PROGRAM_BINARIES, sizeof ptr, &ptr, nullptr) ==
          CL_SUCCESS) {
        // NVIDIA's binary is PTX, compiled again on every load; its machine code loads at once.
        // Stored only once the driver has taken it.
        if (NvCubinRequested()) {
          std::string why_not;
          std::vector<unsigned char> cubin = PtxToCubin(device_, binary, &why_not);
          if (!cubin.empty() && BuildFromBinary(cubin, opts)) {
            binary = std::move(cubin);
            ++cubins_stored_;
          } else {
            Log(LogLevel::kDebug, "program " + label + " stored as it is: " +
                                      (why_not.empty() ? "the driver refused its cubin" : why_not));
          }
        }
        disk->Store(disk_key, binary);
      }
    }
  }
  const int64_t us = MicrosSince(t0);
  build_us_ += us;
  Log(LogLevel::kDebug, "program " + label + " [" + options + "] built in " + Ms(built_us) + " ms" +
                            (disk ? ", stored in " + Ms(us - built_us) + " ms" : ""));
  return program;
}

std::shared_ptr<Environment> Environment::ForDevice(const DeviceInfo& device) {
  static std::mutex mutex;
  // Keyed by the OpenCL library too: tests swap libraries, whose device ids may repeat.
  using Key = std::pair<const ClApi*, cl_device_id>;
  static std::map<Key, std::weak_ptr<Environment>> live;
  std::lock_guard<std::mutex> lock(mutex);
  std::weak_ptr<Environment>& slot = live[Key(&Cl(), device.id)];
  if (auto env = slot.lock()) return env;
  auto env = std::make_shared<Environment>(device);
  slot = env;
  return env;
}

std::shared_ptr<Environment> Environment::Pin(const DeviceInfo& device) {
  static std::mutex mutex;
  // Never destroyed, so no pinned context is released during static destruction, after
  // the driver may have torn itself down; the OS reclaims it at exit.
  static auto* pinned = new std::vector<std::shared_ptr<Environment>>();
  auto env = ForDevice(device);
  std::lock_guard<std::mutex> lock(mutex);
  if (std::find(pinned->begin(), pinned->end(), env) == pinned->end()) pinned->push_back(env);
  return env;
}

Environment::Environment(const DeviceInfo& device) : device_(device) {
  cl_context_properties props[] = {CL_CONTEXT_PLATFORM,
                                   reinterpret_cast<cl_context_properties>(device_.platform_id), 0};
  cl_int err = CL_SUCCESS;
  cl_device_id id = device_.id;
  context_ = Context(Cl().clCreateContext(props, 1, &id, nullptr, nullptr, &err));
  CheckCl(err, "clCreateContext");
  programs_ = std::make_unique<ProgramCache>(context_.get(), device_);
}

Queue Environment::CreateQueue(bool profiling) const {
  cl_int err = CL_SUCCESS;
  Queue q(Cl().clCreateCommandQueue(context_.get(), device_.id,
                                    profiling ? CL_QUEUE_PROFILING_ENABLE : 0, &err));
  CheckCl(err, "clCreateCommandQueue");
  return q;
}

Buffer Environment::CreateBuffer(size_t bytes, cl_mem_flags flags) const {
  cl_int err = CL_SUCCESS;
  // Zero-byte buffers are invalid in OpenCL; tensors of size 0 still get a handle.
  const size_t n = bytes ? bytes : 4;
  cl_mem mem = Cl().clCreateBuffer(context_.get(), flags, n, nullptr, &err);
  if (err != CL_SUCCESS) throw ClError("clCreateBuffer", err, std::to_string(n) + " bytes");
  CountBufferCreated();
  return Buffer(mem, bytes);
}

Buffer Environment::CreateSubBuffer(const Buffer& parent, size_t offset, size_t bytes) const {
  cl_int err = CL_SUCCESS;
  if (parent.svm()) {
    const size_t at = parent.svm_offset() + offset;
    cl_mem mem =
        Cl().clCreateBuffer(context_.get(), CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR,
                            bytes ? bytes : 4, static_cast<char*>(parent.svm().get()) + at, &err);
    if (err != CL_SUCCESS)
      throw ClError("clCreateBuffer(SVM view)", err,
                    "offset " + std::to_string(at) + ", " + std::to_string(bytes) + " bytes");
    CountBufferCreated();
    return Buffer(mem, bytes, parent.svm(), at);
  }
  cl_buffer_region region{offset, bytes ? bytes : 4};
  cl_mem mem = Cl().clCreateSubBuffer(parent.get(), CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION,
                                      &region, &err);
  if (err != CL_SUCCESS)
    throw ClError("clCreateSubBuffer", err,
                  "offset " + std::to_string(offset) + ", " + std::to_string(bytes) + " bytes");
  CountBufferCreated();
  return Buffer(mem, bytes);
}

Buffer Environment::CreateSvmArena(size_t bytes, cl_command_queue queue) const {
  const ClApi& cl = Cl();
  if (!device_.svm_coarse || !cl.clSVMAlloc) return {};
  const size_t n = bytes ? bytes : 4;
  void* p = cl.clSVMAlloc(context_.get(), CL_MEM_READ_WRITE, n, 0);
  if (!p) return {};
  cl_context ctx = context_.get();
  cl.clRetainContext(ctx);
  cl.clRetainCommandQueue(queue);
  // clSVMFree does not wait for commands still using the memory: finish first.
  std::shared_ptr<void> svm(p, [ctx, queue](void* q) {
    Cl().clFinish(queue);
    Cl().clSVMFree(ctx, q);
    Cl().clReleaseCommandQueue(queue);
    Cl().clReleaseContext(ctx);
  });
  cl_int err = CL_SUCCESS;
  cl_mem mem = cl.clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, n, p, &err);
  if (err != CL_SUCCESS) return {};  // `svm` frees the allocation
  CountBufferCreated();
  return Buffer(mem, bytes, std::move(svm), 0);
}

namespace {
// The index of a kernel's overflow flag argument (the slot follows it): its last two arguments
// where its program was built with -DSTORAGE_HALF; -1 otherwise.
int OverflowArg(cl_kernel k) {
  const ClApi& cl = Cl();
  cl_program p = nullptr;
  cl_uint args = 0;
  cl_device_id dev = nullptr;
  size_t n = 0;
  if (cl.clGetKernelInfo(k, CL_KERNEL_PROGRAM, sizeof p, &p, nullptr) != CL_SUCCESS ||
      cl.clGetKernelInfo(k, CL_KERNEL_NUM_ARGS, sizeof args, &args, nullptr) != CL_SUCCESS ||
      args < 2 ||
      cl.clGetProgramInfo(p, CL_PROGRAM_DEVICES, sizeof dev, &dev, nullptr) != CL_SUCCESS ||
      cl.clGetProgramBuildInfo(p, dev, CL_PROGRAM_BUILD_OPTIONS, 0, nullptr, &n) != CL_SUCCESS)
    return -1;
  std::string options(n, '\0');
  if (n && cl.clGetProgramBuildInfo(p, dev, CL_PROGRAM_BUILD_OPTIONS, n, options.data(), nullptr) !=
               CL_SUCCESS)
    return -1;
  return options.find("-DSTORAGE_HALF") == std::string::npos ? -1 : static_cast<int>(args) - 2;
}
}  // namespace

Kernel CreateKernel(const Program& program, const std::string& name) {
  cl_int err = CL_SUCCESS;
  Kernel k(Cl().clCreateKernel(program.get(), name.c_str(), &err));
  if (err != CL_SUCCESS) throw ClError("clCreateKernel", err, name);
  SetOverflowFlag(k, nullptr, 0);
  return k;
}

void SetOverflowFlag(const Kernel& k, cl_mem flag, int slot) {
  const int i = OverflowArg(k.get());
  if (i < 0) return;
  // A source built with fp16 storage but without kernels/common.cl (GetSource) has no such
  // arguments: its callers set all of them, so a refusal here is left alone.
  if (Cl().clSetKernelArg(k.get(), cl_uint(i), sizeof flag, &flag) == CL_SUCCESS)
    Cl().clSetKernelArg(k.get(), cl_uint(i + 1), sizeof slot, &slot);
}

}  // namespace clgpu
