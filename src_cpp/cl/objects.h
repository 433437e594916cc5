// Thin move-only RAII owners of OpenCL objects. One Release() each; the raw
// handle is reached through get(). Destructors never throw.
#pragma once

#include <cstddef>
#include <memory>
#include <utility>

#include "cl/loader.h"

namespace clgpu {

// Owns one reference to an OpenCL object; ReleaseFn picks the clRelease* entry.
template <typename Handle, cl_int (*ReleaseFn)(Handle)>
class ClObject {
 public:
  ClObject() = default;
  explicit ClObject(Handle h) : handle_(h) {}
  ~ClObject() { Release(); }
  ClObject(const ClObject&) = delete;
  ClObject& operator=(const ClObject&) = delete;
  ClObject(ClObject&& o) noexcept : handle_(std::exchange(o.handle_, nullptr)) {}
  ClObject& operator=(ClObject&& o) noexcept {
    if (this != &o) {
      Release();
      handle_ = std::exchange(o.handle_, nullptr);
    }
    return *this;
  }
  Handle get() const { return handle_; }
  explicit operator bool() const { return handle_ != nullptr; }
  void Release() {
    if (handle_) ReleaseFn(std::exchange(handle_, nullptr));
  }

 private:
  Handle handle_ = nullptr;
};

namespace detail {
// Trampolines through the dlopen'ed table (ReleaseFn must be a plain function).
inline cl_int ReleaseContext(cl_context h) { return Cl().clReleaseContext(h); }
inline cl_int ReleaseQueue(cl_command_queue h) { return Cl().clReleaseCommandQueue(h); }
inline cl_int ReleaseMem(cl_mem h) { return Cl().clReleaseMemObject(h); }
inline cl_int ReleaseProgram(cl_program h) { return Cl().clReleaseProgram(h); }
inline cl_int ReleaseKernel(cl_kernel h) { return Cl().clReleaseKernel(h); }
inline cl_int ReleaseEvent(cl_event h) { return Cl().clReleaseEvent(h); }
}  // namespace detail

using Context = ClObject<cl_context, detail::ReleaseContext>;
using Queue = ClObject<cl_command_queue, detail::ReleaseQueue>;
using Program = ClObject<cl_program, detail::ReleaseProgram>;
using Kernel = ClObject<cl_kernel, detail::ReleaseKernel>;
using Event = ClObject<cl_event, detail::ReleaseEvent>;

// START and END (device clock, ns) of a command on a profiling queue; {0, 0} where the driver
// gives none (the command failed, or the queue does not profile).
inline std::pair<cl_ulong, cl_ulong> EventTimes(cl_event e) {
  cl_ulong start = 0, end = 0;
  if (Cl().clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_START, sizeof start, &start, nullptr) !=
          CL_SUCCESS ||
      Cl().clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_END, sizeof end, &end, nullptr) !=
          CL_SUCCESS)
    return {0, 0};
  return {start, end};
}

// A device buffer that remembers its size in bytes. A buffer over shared virtual
// memory also holds the SVM allocation (freed after its last buffer) and where in
// it the buffer starts.
class Buffer {
 public:
  Buffer() = default;
  Buffer(cl_mem mem, size_t bytes) : mem_(mem), bytes_(bytes) {}
  Buffer(cl_mem mem, size_t bytes, std::shared_ptr<void> svm, size_t svm_offset)
      : svm_(std::move(svm)), mem_(mem), bytes_(bytes), svm_offset_(svm_offset) {}
  cl_mem get() const { return mem_.get(); }
  size_t bytes() const { return bytes_; }
  explicit operator bool() const { return static_cast<bool>(mem_); }
  const std::shared_ptr<void>& svm() const { return svm_; }
  size_t svm_offset() const { return svm_offset_; }
  void Release() {
    mem_.Release();  // before the memory under it
    svm_.reset();
    bytes_ = svm_offset_ = 0;
  }

 private:
  std::shared_ptr<void> svm_;  // declared first: destroyed after mem_
  ClObject<cl_mem, detail::ReleaseMem> mem_;
  size_t bytes_ = 0, svm_offset_ = 0;
};

}  // namespace clgpu
