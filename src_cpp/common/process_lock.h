// One lock per process around the OpenCL driver's first use and every read of the environment.
// A Python process can hold two copies of this code (the extension and the plugin library, each
// with its own statics):
// - the ICD loader's lazy start is not safe from two threads at once: clgpu_delegate.warm_up()
//   listing the devices on its thread while load_delegate() created the plugin's delegate
//   crashed (ocl-icd, 9 of 10 runs) or listed no platform;
// - a driver may setenv() while it starts (PoCL sets HWLOC_PLUGINS_PATH), and glibc's getenv()
//   on another thread then reads a freed environment (an ASan crash in the same pairing).
#pragma once

#include <functional>

namespace clgpu {

// Runs `f` under the process's lock: the plugin library's, which every copy of this code finds
// beside itself and loads (a copy that is the plugin, or finds none, uses its own). The lock is
// recursive: the driver's start reads the environment too.
void WithDriverLock(const std::function<void()>& f);

// The lock of this copy (acquire != 0: lock, else unlock); the plugin exports it.
void LocalDriverLock(int acquire);

}  // namespace clgpu
