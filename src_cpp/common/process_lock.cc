#include "common/process_lock.h"

#include <dlfcn.h>

#include <mutex>
#include <string>

namespace clgpu {
namespace {

using LockFn = void (*)(int);
constexpr const char* kPluginFile = "libclgpu_delegate.so";
constexpr const char* kLockSymbol = "clgpu_driver_lock";

// The plugin's lock where this copy can reach it, else this copy's own.
LockFn FindLock() {
  Dl_info self{};
  if (!dladdr(reinterpret_cast<void*>(&FindLock), &self) || !self.dli_fname) return LocalDriverLock;
  const std::string me = self.dli_fname;
  const size_t slash = me.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : me.substr(0, slash + 1);
  if (me.substr(dir.size()) == kPluginFile) return LocalDriverLock;  // this copy is the plugin
  const std::string plugin = dir + kPluginFile;
  // Loaded for good: a later load_delegate() of the same file gets this same copy.
  void* lib = dlopen(plugin.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) return LocalDriverLock;
  auto fn = reinterpret_cast<LockFn>(dlsym(lib, kLockSymbol));
  return fn ? fn : LocalDriverLock;
}

}  // namespace

void LocalDriverLock(int acquire) {
  static std::recursive_mutex mutex;
  if (acquire)
    mutex.lock();
  else
    mutex.unlock();
}

void WithDriverLock(const std::function<void()>& f) {
  static const LockFn lock = FindLock();
  lock(1);
  try {
    f();
  } catch (...) {
    lock(0);
    throw;
  }
  lock(0);
}

}  // namespace clgpu
