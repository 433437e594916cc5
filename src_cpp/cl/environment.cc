#include "cl/environment.h"

#include <algorithm>
#include <cstdio>
#include <utility>
#include <vector>

#include "cl/errors.h"
#include "cl/kernel_registry.h"
#include "common/error.h"

namespace clgpu {

uint64_t HashBytes(const void* data, size_t n, uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

std::shared_ptr<Program> ProgramCache::Get(const std::string& file, const std::string& defines,
                                           BinaryCache* disk) {
  return GetSource(file, KernelText("common") + "\n#line 1\n" + KernelTextExpanded(file), defines,
                   disk);
}

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
                                                 const std::string& options, BinaryCache* disk) {
  char key_hash[40];
  std::snprintf(key_hash, sizeof key_hash, "%016llx:%zu:",
                static_cast<unsigned long long>(HashBytes(source.data(), source.size())),
                source.size());
  const std::string key = key_hash + options;
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = programs_.find(key); it != programs_.end()) {
    ++hits_;
    return it->second;
  }
  const ClApi& cl = Cl();
  const std::string disk_key =
      disk ? BinaryCache::Key(device_, source, "-cl-std=CL1.2 " + options) : "";
  if (disk) {
    std::vector<unsigned char> binary = disk->Load(disk_key);
    if (!binary.empty()) {
      if (auto program = BuildFromBinary(binary, "-cl-std=CL1.2 " + options)) {
        programs_.emplace(key, program);
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
  const std::string opts = "-cl-std=CL1.2 " + options;
  err = cl.clBuildProgram(program->get(), 1, &dev, opts.c_str(), nullptr, nullptr);
  if (err != CL_SUCCESS) {
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
  programs_.emplace(key, program);
  if (disk) {
    size_t n = 0;
    if (cl.clGetProgramInfo(program->get(), CL_PROGRAM_BINARY_SIZES, sizeof n, &n, nullptr) ==
            CL_SUCCESS &&
        n > 0) {
      std::vector<unsigned char> binary(n);
      unsigned char* ptr = binary.data();
      if (cl.clGetProgramInfo(program->get(), CL_PROGRAM_BINARIES, sizeof ptr, &ptr, nullptr) ==
          CL_SUCCESS)
        disk->Store(disk_key, binary);
    }
  }
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

Kernel CreateKernel(const Program& program, const std::string& name) {
  cl_int err = CL_SUCCESS;
  Kernel k(Cl().clCreateKernel(program.get(), name.c_str(), &err));
  if (err != CL_SUCCESS) throw ClError("clCreateKernel", err, name);
  return k;
}

}  // namespace clgpu
