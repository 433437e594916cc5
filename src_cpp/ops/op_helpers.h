// Helpers shared by the op files: kernel arguments set in order, weight and state uploads,
// small checks. Included by ops/op.h after the Op contract (they take its OpContext).
#pragma once

#include <initializer_list>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

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
// The same with several optional trailing buffers: each non-null one, in order (a residual,
// then PRELU slopes).
template <typename... Args>
void SetArgsAndOptionals(const Kernel& k, std::initializer_list<cl_mem> extras,
                         const Args&... args);

// Copies a launch's constant buffers `parts` (whole) into one new buffer, each at a 16-byte
// aligned offset (*offsets, in order): the kernel, built with -DPACKED, then takes one buffer
// argument and integer offsets (kernels/common.cl's CONST_IN), which costs a launch less: NVIDIA's
// driver charges each buffer argument (bench/results/enqueue-probe-NVIDIA_H200.md). Only small
// layers' constants are copied (64 KiB at most: their launches' host cost is most of their time;
// larger ones keep theirs, no second copy); false, nothing made, past that or with
// $CLGPU_PACK_CONSTS=0 (tests compare both; read at each use).
bool PackConstants(OpContext& ctx, const std::vector<cl_mem>& parts, Buffer* out,
                   std::vector<int>* offsets);
// The offsets PackConstants gives parts of these byte sizes, and whether it packs them at all:
// for a kernel that reads the offsets from one of the parts (gemm_int8.cl's prm).
bool PackedLayout(const std::vector<size_t>& sizes, std::vector<int>* offsets);
// A buffer's size in bytes.
size_t BufferBytes(cl_mem m);

// A launch's integers read from memory, not set as arguments (NVIDIA's driver charges each
// argument of a launch on the host; kernels/common.cl's PRM_CONST / PRM_AT), and its constant
// buffers, each at a slot of those integers: one buffer, the integers first, where they are
// small (PackConstants: a slot holds its buffer's byte offset), else the integers' own buffer
// and the constants as arguments after it.
class ParamBlock {
 public:
  explicit ParamBlock(size_t ints) : prm_(ints, 0) {}
  void Int(size_t i, int v) { prm_.at(i) = v; }
  void Float(size_t i, float v);  // its bits
  void Slot(size_t i, cl_mem m) { slots_.push_back({i, m}); }
  // Uploads them; the define of the program that takes them: "-DPACKED" or "".
  std::string Upload(OpContext& ctx);
  // Sets them as the kernel's arguments from `first` on; returns the next index.
  cl_uint Set(const Kernel& k, cl_uint first) const;
  // The buffer made by Upload, which the launch keeps.
  Buffer TakeBuffer() { return std::move(kept_); }

 private:
  std::vector<int> prm_;
  std::vector<std::pair<size_t, cl_mem>> slots_;
  std::vector<cl_mem> args_;
  Buffer kept_;
};

// A constant buffer argument of a kernel that may take it packed: the buffer, or (packed) its
// offset in the packed one, an int argument.
struct ConstArg {
  cl_mem mem = nullptr;
  int offset = 0;
  bool packed = false;
};

// Uploads bytes as they are into a new read-only buffer (int8 weights, int32 biases).
Buffer UploadBytes(OpContext& ctx, const void* data, size_t bytes);
// A buffer's first `count` values as floats, read back: float storage (`elem` 2: half, 4:
// float32), for kernels that take constants other ops uploaded in another layout.
std::vector<float> ReadBackFloats(OpContext& ctx, cl_mem m, size_t count, size_t elem);
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

// The most work-items a group of this kernel may have on this device (CL_KERNEL_WORK_GROUP_SIZE:
// what the compiler fitted its registers or private memory to, often below the device's limit).
size_t KernelGroupLimit(const OpContext& ctx, const Kernel& k);
// The local memory a kernel that runs a whole block in one group plans with (the inverted-
// residual block kernels, the depthwise-separable chain), in floats: 7/8 of the device's, at most
// 44 KB (what the compiler leaves a group of them on NVIDIA's 48).
size_t BlockLocalFloats(const DeviceInfo& dev);

// Whether a group of `group` work-items of this block kernel (`what`) fits; says at debug level
// where it does not, and the caller runs the block as separate kernels.
bool BlockGroupFits(const OpContext& ctx, const Kernel& k, size_t group, const char* what);

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
  else if constexpr (std::is_same_v<A, ConstArg>)
    CheckCl(a.packed ? Cl().clSetKernelArg(k.get(), i, sizeof(int), &a.offset)
                     : Cl().clSetKernelArg(k.get(), i, sizeof(cl_mem), &a.mem),
            "clSetKernelArg");
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

template <typename... Args>
void SetArgsAndOptionals(const Kernel& k, std::initializer_list<cl_mem> extras,
                         const Args&... args) {
  detail::SetArgsAt(k, 0, args...);
  cl_uint i = static_cast<cl_uint>(sizeof...(Args));
  for (cl_mem e : extras)
    if (e) detail::SetArgsAt(k, i++, e);
}

}  // namespace clgpu
