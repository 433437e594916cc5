// Helpers shared by the op files: kernel arguments set in order, weight and state uploads,
// small checks. Included by ops/op.h after the Op contract (they take its OpContext).
#pragma once

#include <type_traits>

#include "cl/errors.h"

namespace clgpu {

// Sets kernel arguments in order: cl_mem, int, float (any trivially copyable).
template <typename... Args>
void SetArgs(const Kernel& k, const Args&... args);
// Sets kernel arguments in order from argument `first` on (optional trailing arguments).
template <typename... Args>
void SetArgsFrom(const Kernel& k, cl_uint first, const Args&... args);
// SetArgs, then `extra` as one more argument unless it is null (an optional trailing
// buffer: the residual of kernels built with -DHAS_RESIDUAL).
template <typename... Args>
void SetArgsAndOptional(const Kernel& k, cl_mem extra, const Args&... args);

// Uploads bytes as they are into a new read-only buffer (int8 weights, int32 biases).
Buffer UploadBytes(OpContext& ctx, const void* data, size_t bytes);
// A new read-write buffer of `bytes` zero bytes (state a kernel keeps between launches).
Buffer ZeroBuffer(OpContext& ctx, size_t bytes);
// Uploads host floats into a new read-only buffer in the context's float storage type.
Buffer UploadWeights(OpContext& ctx, const std::vector<float>& data);
// Uploads host floats as float32 regardless of storage (biases, small metadata).
Buffer UploadFloat32(OpContext& ctx, const std::vector<float>& data);
Buffer UploadInts(OpContext& ctx, const std::vector<int>& data);

// Checks every tensor is float32 with a shape; "" or the reason.
std::string CheckFloatTensors(const GraphView& g, const std::vector<int>& tensors);

size_t RoundUp(size_t x, size_t m);

// A work-group size for a kernel that reduces a row of `row` values with a tree: the largest
// power of 2 this kernel may run with on this device (CL_KERNEL_WORK_GROUP_SIZE), at most
// `limit`, and no wider than the row needs.
size_t RowGroup(OpContext& ctx, const Kernel& k, size_t limit, int64_t row);

// A __local buffer argument of `bytes` bytes (its size is the argument; no host data).
struct LocalBytes {
  size_t bytes;
};

namespace detail {
inline void SetArgsAt(const Kernel&, cl_uint) {}
template <typename A, typename... Rest>
void SetArgsAt(const Kernel& k, cl_uint i, const A& a, const Rest&... rest) {
  if constexpr (std::is_same_v<A, LocalBytes>)
    CheckCl(Cl().clSetKernelArg(k.get(), i, a.bytes, nullptr), "clSetKernelArg");
  else
    CheckCl(Cl().clSetKernelArg(k.get(), i, sizeof(A), &a), "clSetKernelArg");
  SetArgsAt(k, i + 1, rest...);
}
}  // namespace detail

template <typename... Args>
void SetArgs(const Kernel& k, const Args&... args) {
  detail::SetArgsAt(k, 0, args...);
}

template <typename... Args>
void SetArgsFrom(const Kernel& k, cl_uint first, const Args&... args) {
  detail::SetArgsAt(k, first, args...);
}

template <typename... Args>
void SetArgsAndOptional(const Kernel& k, cl_mem extra, const Args&... args) {
  detail::SetArgsAt(k, 0, args...);
  if (extra) detail::SetArgsAt(k, static_cast<cl_uint>(sizeof...(Args)), extra);
}

}  // namespace clgpu
