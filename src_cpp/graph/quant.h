// Element types of the values a partition holds, and the affine quantization of int8 / uint8
// tensors as TFLite declares it (TfLiteTensor::quantization), read in this one place; ops see
// both through GraphView. Also which rounding the host runtime's int8 CPU kernels use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tflite/abi.h"

namespace clgpu {

// kFloat is float32 in TFLite's memory and the partition's float storage on the device
// (float32, or half under precision fp16); the others are the same on both sides. kFloat32 is
// a float value a partition keeps float32 whatever its float storage (the float side of a
// QUANTIZE / DEQUANTIZE at its boundary, where half would change the integers); the graph
// reports float tensors as kFloat.
// kBool: a comparison's result (TFLite's one byte an element), read by SELECT / SELECT_V2.
// kComplex64: an RFFT2D's result, (real, imaginary) float pairs, kept in float32 in any storage.
enum class ValueType : uint8_t {
  kFloat,
  kInt8,
  kUInt8,
  kInt32,
  kFloat32,
  kBool,
  kComplex64,
  kUnsupported
};

ValueType ValueTypeOf(TfLiteType t);
const char* ValueTypeName(ValueType t);
// Bytes of one element in TFLite's memory.
size_t HostElementBytes(ValueType t);
inline bool IsQuantized(ValueType t) { return t == ValueType::kInt8 || t == ValueType::kUInt8; }
// The integer range of a quantized type.
int QuantMin(ValueType t);
int QuantMax(ValueType t);

// real = scale * (q - zero_point): one (scale, zero point), or one per index of `axis`.
struct QuantParams {
  std::vector<float> scale;
  std::vector<int32_t> zero_point;
  int axis = 0;
  bool valid() const { return !scale.empty(); }
  bool per_channel() const { return scale.size() > 1; }
};

// The affine parameters of a tensor (TfLiteTensor::quantization, type 1), else its legacy
// per-tensor params when their scale is set; empty (!valid()) when it has neither, or when
// they are malformed (counts that differ, a scale that is not finite and positive).
QuantParams ReadQuantParams(const TfLiteTensor& x);

// The host runtime's int8 CPU kernels apply their fixed-point multipliers with one of two
// roundings in the final shift (ops/quant.h): ruy's GEMM kernels and TFLite's NEON loops round
// ties up, TFLite's scalar code away from zero. Which loops a runtime has depends on how it was
// built: ARM builds and LiteRT's x86 wheels (NEON through NEON_2_SSE) run the NEON ones,
// tflite-runtime 2.14's x86 wheel the scalar ones.
struct CpuKernels {
  bool neon = false;
  // LiteRT's kernels, newer than tflite_runtime 2.14's (MEAN resolves negative axes before it
  // picks its 4-D path).
  bool litert = false;
  // The interpreter's thread count (TfLiteContext::recommended_num_threads, 1 when unset): the
  // optimized MEAN splits its channels between threads, each running its own vector loop.
  int threads = 1;
  std::string library;  // where the runtime's code was found ("" if unknown)
};

// Identifies the runtime from the library that holds its context functions (dladdr), or from
// `hint` when set (the `runtime` option: "tflite_runtime", "ai_edge_litert").
CpuKernels IdentifyCpuKernels(const TfLiteContext* ctx, const std::string& hint);

}  // namespace clgpu
