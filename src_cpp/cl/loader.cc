#include "cl/loader.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "common/env.h"
#include "common/error.h"
#include "common/log.h"

namespace clgpu {
namespace {

std::vector<std::string> CandidatePaths() {
  std::vector<std::string> paths;
  if (const std::string env = GetEnv("CLGPU_OPENCL_LIBRARY").value_or(""); !env.empty()) {
    // An explicit choice is final: silently falling back would hide a typo.
    paths.push_back(env);
    return paths;
  }
  paths = {"libOpenCL.so.1", "libOpenCL.so"};
#if defined(__ANDROID__) || defined(CLGPU_SEARCH_ANDROID_PATHS)
  // Vendors ship OpenCL outside the linker namespace's default paths; Adreno and
  // Mali drivers also go by their own names.
  for (const char* dir : {"/vendor/lib64/", "/system/vendor/lib64/", "/system/lib64/",
                          "/vendor/lib64/egl/", "/system/vendor/lib64/egl/"}) {
    for (const char* name : {"libOpenCL.so", "libOpenCL_adreno.so", "libGLES_mali.so", "libmali.so",
                             "libOpenCL-pixel.so"}) {
      paths.push_back(std::string(dir) + name);
    }
  }
#endif
  return paths;
}

std::mutex g_mutex;
std::unique_ptr<ClApi> g_api;

std::unique_ptr<ClApi> Load() {
  std::string tried;
  for (const std::string& path : CandidatePaths()) {
    // A path (not a bare name the loader searches for) must be a regular file, or a link to
    // one: dlopen() of a FIFO waits for a writer forever.
    struct stat st {};
    if (path.find('/') != std::string::npos) {
      const bool found = stat(path.c_str(), &st) == 0;
      if (!found || !S_ISREG(st.st_mode)) {
        tried +=
            "\n  " + path + ": " +
            (found ? "not a regular file" : std::string("cannot stat: ") + std::strerror(errno));
        continue;
      }
    }
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* why = dlerror();
      tried += "\n  " + path + ": " + (why ? why : "not found");
      continue;
    }
    auto api = std::make_unique<ClApi>();
    api->library_path = path;
    std::string missing;
#define CLGPU_LOAD_FN(name)                                                \
  api->name = reinterpret_cast<decltype(api->name)>(dlsym(handle, #name)); \
  if (!api->name) missing += std::string(missing.empty() ? "" : ", ") + #name;
    CLGPU_CL_FUNCTIONS(CLGPU_LOAD_FN)
#undef CLGPU_LOAD_FN
    if (missing.empty()) {
      api->clSVMAlloc = reinterpret_cast<SvmAllocFn>(dlsym(handle, "clSVMAlloc"));
      api->clSVMFree = reinterpret_cast<SvmFreeFn>(dlsym(handle, "clSVMFree"));
      if (!api->clSVMAlloc || !api->clSVMFree) api->clSVMAlloc = nullptr, api->clSVMFree = nullptr;
      return api;  // the handle stays open for the process lifetime
    }
    tried += "\n  " + path + ": lacks " + missing + " (OpenCL 1.2 is required)";
    dlclose(handle);
  }
  throw NoDeviceError(
      "No usable OpenCL library was found. Tried:" + tried +
      "\nInstall a GPU driver with OpenCL support (NVIDIA, AMD ROCm, Intel compute-runtime), "
      "or for a CPU device: apt-get install ocl-icd-libopencl1 pocl-opencl-icd. "
      "Set CLGPU_OPENCL_LIBRARY to use a specific libOpenCL.");
}

}  // namespace

const ClApi& Cl() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_api) g_api = Load();
  return *g_api;
}

void ResetClForTesting() {
  std::lock_guard<std::mutex> lock(g_mutex);
  // Deliberately leaked: objects created through the old table may still call it.
  (void)g_api.release();
}

}  // namespace clgpu
