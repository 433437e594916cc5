// The host CPU's last-level cache, for the cost model's CPU side: a model whose weights fit in it
// reads them from the cache on every invoke after the first.
#pragma once

#include <cstdint>

namespace clgpu {

// Bytes of the host's last-level cache over all its instances (one per CCD on AMD, one per
// socket on most Intel parts), from Linux's sysfs, read once per process; 0 when unknown (no
// sysfs, as on some Android kernels).
int64_t HostCacheBytes();

// The part of it a model's weights can stay in between invokes on `threads` threads: at most
// kCacheShareBytesPerThread a thread, since other cores (on a virtual machine, other tenants:
// the H200 host's 16 vCPUs list a 300 MB L3) use the rest. $CLGPU_CPU_CACHE_MB replaces it
// (0: none).
int64_t WeightCacheBytes(int threads);
constexpr int64_t kCacheShareBytesPerThread = 5 * 1024 * 1024 / 2;

}  // namespace clgpu
