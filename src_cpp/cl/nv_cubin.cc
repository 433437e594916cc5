#include "cl/nv_cubin.h"

#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "cl/loader.h"
#include "common/env.h"

namespace clgpu {
namespace {

// The few CUDA driver API declarations used (cuda.h is not needed to build; values from the
// CUDA driver API reference).
using CUresult = int;
using CUdevice = int;
using CUcontext = void*;
using CUlinkState = void*;
constexpr int kJitOptTarget = 9;                 // CU_JIT_TARGET
constexpr int kJitInputPtx = 1;                  // CU_JIT_INPUT_PTX
constexpr cl_device_info kClCcMajorNv = 0x4000;  // CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV
constexpr cl_device_info kClCcMinorNv = 0x4001;

struct Cuda {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuCtxPushCurrent)(CUcontext);
  CUresult (*cuCtxPopCurrent)(CUcontext*);
  CUresult (*cuLinkCreate)(unsigned, int*, void**, CUlinkState*);
  CUresult (*cuLinkAddData)(CUlinkState, int, void*, size_t, const char*, unsigned, int*, void**);
  CUresult (*cuLinkComplete)(CUlinkState, void**, size_t*);
  CUresult (*cuLinkDestroy)(CUlinkState);
  CUcontext context = nullptr;
  std::string error;  // why there is no linker (set once)
};

template <typename F>
bool Sym(void* lib, const char* name, F* fn) {
  *fn = reinterpret_cast<F>(dlsym(lib, name));
  return *fn != nullptr;
}

// Loaded, initialized and given a context once per process; `error` says why not.
const Cuda& Driver() {
  static std::once_flag once;
  static Cuda cuda{};
  std::call_once(once, [] {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      cuda.error = "no libcuda.so.1";
      return;
    }
    if (!Sym(lib, "cuInit", &cuda.cuInit) || !Sym(lib, "cuDeviceGet", &cuda.cuDeviceGet) ||
        !Sym(lib, "cuDevicePrimaryCtxRetain", &cuda.cuDevicePrimaryCtxRetain) ||
        !Sym(lib, "cuCtxPushCurrent_v2", &cuda.cuCtxPushCurrent) ||
        !Sym(lib, "cuCtxPopCurrent_v2", &cuda.cuCtxPopCurrent) ||
        !Sym(lib, "cuLinkCreate_v2", &cuda.cuLinkCreate) ||
        !Sym(lib, "cuLinkAddData_v2", &cuda.cuLinkAddData) ||
        !Sym(lib, "cuLinkComplete", &cuda.cuLinkComplete) ||
        !Sym(lib, "cuLinkDestroy", &cuda.cuLinkDestroy)) {
      cuda.error = "libcuda.so.1 lacks the link API";
      return;
    }
    CUdevice dev = 0;
    CUresult r = cuda.cuInit(0);
    if (r == 0) r = cuda.cuDeviceGet(&dev, 0);
    // Linking needs a current context, of any device: the target is given explicitly.
    if (r == 0) r = cuda.cuDevicePrimaryCtxRetain(&cuda.context, dev);
    if (r != 0) {
      cuda.context = nullptr;
      cuda.error = "CUDA error " + std::to_string(r) + " creating a context to link in";
    }
  });
  return cuda;
}

int ComputeCapability(const DeviceInfo& dev) {
  cl_uint major = 0, minor = 0;
  const ClApi& cl = Cl();
  if (cl.clGetDeviceInfo(dev.id, kClCcMajorNv, sizeof major, &major, nullptr) != CL_SUCCESS ||
      cl.clGetDeviceInfo(dev.id, kClCcMinorNv, sizeof minor, &minor, nullptr) != CL_SUCCESS)
    return 0;
  return static_cast<int>(major * 10 + minor);
}

}  // namespace

// Opt-in: the cubin loads at once but ran ResNet-50 about 10 % slower than the driver's own
// build of the same PTX on the H200 (docs/performance.md, "Start-up").
bool NvCubinRequested() { return GetEnv("CLGPU_NV_CUBIN").value_or("") == "1"; }

std::vector<unsigned char> PtxToCubin(const DeviceInfo& dev, const std::vector<unsigned char>& ptx,
                                      std::string* why_not) {
  auto fail = [&](const std::string& why) {
    if (why_not) *why_not = why;
    return std::vector<unsigned char>();
  };
  if (!dev.profile.nvidia_ptx) return fail("not an NVIDIA GPU");
  if (!NvCubinRequested()) return fail("CLGPU_NV_CUBIN is not 1");
  static const char kPtxStart[] = "//";  // NVVM's PTX opens with a comment block
  if (ptx.size() < 2 || std::memcmp(ptx.data(), kPtxStart, 2) != 0) return fail("not PTX");
  const int target = ComputeCapability(dev);
  if (target <= 0) return fail("no compute capability from OpenCL");
  const Cuda& cu = Driver();
  if (!cu.context) return fail(cu.error);
  if (cu.cuCtxPushCurrent(cu.context) != 0) return fail("cannot make the link context current");
  std::vector<unsigned char> cubin;
  std::string error;
  CUlinkState state = nullptr;
  int keys[] = {kJitOptTarget};
  void* values[] = {reinterpret_cast<void*>(static_cast<uintptr_t>(target))};
  // ptxas reads a NUL-terminated string.
  std::vector<unsigned char> text(ptx);
  if (text.back() != '\0') text.push_back('\0');
  CUresult r = cu.cuLinkCreate(1, keys, values, &state);
  if (r == 0)
    r = cu.cuLinkAddData(state, kJitInputPtx, text.data(), text.size(), "program.ptx", 0, nullptr,
                         nullptr);
  void* out = nullptr;
  size_t n = 0;
  if (r == 0) r = cu.cuLinkComplete(state, &out, &n);
  if (r == 0 && out && n) {
    const auto* p = static_cast<const unsigned char*>(out);
    cubin.assign(p, p + n);  // `out` belongs to `state`
  } else {
    error = "CUDA link error " + std::to_string(r);
  }
  if (state) cu.cuLinkDestroy(state);
  CUcontext popped = nullptr;
  cu.cuCtxPopCurrent(&popped);
  if (cubin.empty()) return fail(error);
  return cubin;
}

}  // namespace clgpu
