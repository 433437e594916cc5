#include "cl/int8_dot.h"

#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>

#include "cl/objects.h"
#include "common/env.h"

namespace clgpu {
namespace {

// One dot product of known operands, through the path under test; the result must be exact.
constexpr const char* kProbe = R"CL(
__kernel void probe(__global int* out, int a, int b, int acc) {
#if defined(QUANT_DOT_DP4A)
  int d;
  asm volatile("dp4a.s32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(acc));
#elif defined(QUANT_DOT_KHR)
  int d = acc + dot_4x8packed_ss_int((uint)a, (uint)b);
#else
#error "no path"
#endif
  out[get_global_id(0)] = d;
}
)CL";

// Packs four int8 lanes, lane 0 in the low byte.
int32_t Pack(int a, int b, int c, int d) {
  return int32_t(uint32_t(uint8_t(a)) | uint32_t(uint8_t(b)) << 8 | uint32_t(uint8_t(c)) << 16 |
                 uint32_t(uint8_t(d)) << 24);
}

bool Works(const DeviceInfo& d, const std::string& defines) {
  const ClApi& cl = Cl();
  cl_context_properties props[] = {CL_CONTEXT_PLATFORM,
                                   reinterpret_cast<cl_context_properties>(d.platform_id), 0};
  cl_int err = CL_SUCCESS;
  cl_device_id dev = d.id;
  Context ctx(cl.clCreateContext(props, 1, &dev, nullptr, nullptr, &err));
  if (err != CL_SUCCESS) return false;
  const char* src = kProbe;
  Program prog(cl.clCreateProgramWithSource(ctx.get(), 1, &src, nullptr, &err));
  if (err != CL_SUCCESS ||
      cl.clBuildProgram(prog.get(), 1, &dev, defines.c_str(), nullptr, nullptr) != CL_SUCCESS)
    return false;
  Kernel k(cl.clCreateKernel(prog.get(), "probe", &err));
  if (err != CL_SUCCESS) return false;
  Queue q(cl.clCreateCommandQueue(ctx.get(), dev, 0, &err));
  if (err != CL_SUCCESS) return false;
  Buffer out(cl.clCreateBuffer(ctx.get(), CL_MEM_WRITE_ONLY, sizeof(int32_t), nullptr, &err), 4);
  if (err != CL_SUCCESS) return false;
  const int32_t a = Pack(-128, 127, -3, 45), b = Pack(-128, -128, 77, -9), acc = -1000;
  const int32_t want = acc + 16384 - 16256 - 231 - 405;
  cl_mem m = out.get();
  size_t global = 1;
  int32_t got = 0;
  if (cl.clSetKernelArg(k.get(), 0, sizeof m, &m) != CL_SUCCESS ||
      cl.clSetKernelArg(k.get(), 1, sizeof a, &a) != CL_SUCCESS ||
      cl.clSetKernelArg(k.get(), 2, sizeof b, &b) != CL_SUCCESS ||
      cl.clSetKernelArg(k.get(), 3, sizeof acc, &acc) != CL_SUCCESS ||
      cl.clEnqueueNDRangeKernel(q.get(), k.get(), 1, nullptr, &global, nullptr, 0, nullptr,
                                nullptr) != CL_SUCCESS ||
      cl.clEnqueueReadBuffer(q.get(), m, CL_TRUE, 0, sizeof got, &got, 0, nullptr, nullptr) !=
          CL_SUCCESS)
    return false;
  return got == want;
}

bool Advertises(const DeviceInfo& d, const std::string& ext) {
  size_t n = 0;
  if (Cl().clGetDeviceInfo(d.id, CL_DEVICE_EXTENSIONS, 0, nullptr, &n) != CL_SUCCESS) return false;
  std::string s(n, '\0');
  Cl().clGetDeviceInfo(d.id, CL_DEVICE_EXTENSIONS, n, s.data(), nullptr);
  return s.find(ext) != std::string::npos;
}

}  // namespace

std::string Int8DotDefines(const std::string& path) {
  if (path == "dp4a") return "-DQUANT_DOT_DP4A -DQUANT_PTX";
  if (path == "khr") return "-DQUANT_DOT_KHR -cl-std=CL3.0";
  return "";
}

std::string PtxDefines(const DeviceInfo& d) {
  return Int8DotPath(d) == "dp4a" ? "-DQUANT_PTX" : "";
}

const std::string& Int8DotPath(const DeviceInfo& d) {
  static std::mutex mutex;
  static std::map<cl_device_id, std::string> paths;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = paths.find(d.id);
  if (it != paths.end()) return it->second;
  std::string path = "portable";
  // CLGPU_INT8_DOT=portable|khr|dp4a asks for a path (tests, benchmarks); it is still probed.
  const std::string want = GetEnv("CLGPU_INT8_DOT").value_or("");
  auto allowed = [&](const char* p) { return want.empty() || want == p; };
  // Only NVIDIA's compiler takes PTX; other devices say whether they have the extension.
  if (allowed("dp4a") && d.profile.nvidia_ptx && Works(d, Int8DotDefines("dp4a"))) {
    path = "dp4a";
  } else if (allowed("khr") && Advertises(d, "cl_khr_integer_dot_product") &&
             Works(d, Int8DotDefines("khr"))) {
    path = "khr";
  }
  return paths.emplace(d.id, path).first->second;
}

}  // namespace clgpu
