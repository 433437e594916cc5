// The host CPU as the cost model's CPU side sees it: its last-level cache (a model whose weights
// fit in it reads them from the cache on every invoke after the first), its int8 tiles and its
// float vectors.
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

// Whether the host has x86 AMX tiles for int8 (AMX-INT8, and the OS saves their state), on which
// XNNPACK runs its int8 convolutions: a convolution then costs by output pixel and filter tap far
// more than by multiply-add (bench/results/cpu-int8-conv-*.md). $CLGPU_CPU_INT8_TILES (0 or 1)
// replaces it.
bool HostInt8Tiles();

// The floats XNNPACK's convolution kernels compute a row of output channels in on this host: 16
// with AVX-512 (and the OS saving its registers), 8 elsewhere (AVX2, NEON). A convolution of fewer
// output channels, or of a count that is no multiple of them, pays for the padded row
// (bench/results/cpu-int8-conv-*.md, float ms). $CLGPU_CPU_FLOAT_LANES (1-64) replaces it.
int HostFloatLanes();

}  // namespace clgpu
