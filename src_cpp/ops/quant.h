// TFLite's integer arithmetic on the host, shared by the int8 ops: fixed-point multipliers from
// real scales, fused activations as bounds in the quantized domain, the per-channel output stage
// of an int32 accumulator, and the claim checks of quantized tensors. The device side of the
// same arithmetic is kernels/quant.cl.
//
// The rounding, measured against tflite_runtime 2.14 and ai_edge_litert 2.3 on x86: a multiplier
// is applied in two steps, a rounding doubling high multiply (ties up) and a rounding right
// shift; neither runtime uses TFLite's single-rounding variant. The shift's ties go up in ruy's
// GEMM kernels (CONV_2D, FULLY_CONNECTED) and in TFLite's NEON loops, and away from zero in
// TFLite's scalar code. An output stage says which channels round which way (up_below).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "ops/op.h"

namespace clgpu {

// real = multiplier * 2^(shift - 31), multiplier in [2^30, 2^31) (TFLite's QuantizeMultiplier:
// frexp, round half away from zero; 0 for a real of 0 or below 2^-32).
struct FixedPoint {
  int32_t multiplier = 0;
  int shift = 0;
};
FixedPoint QuantizeMultiplier(double real);

// x * multiplier * 2^(shift - 31) on the host, as kernels/quant.cl's quant_multiply computes it:
// a wrapping left shift, the rounding doubling high multiply, then the right shift whose ties go
// up (`up`) or away from zero (TFLite's scalar MultiplyByQuantizedMultiplier). For the tables of
// ops whose output is a function of one input integer.
int32_t MultiplyByQuantizedMultiplier(int32_t x, int32_t multiplier, int shift, bool up = false);

// The first elements of n that the runtime's NEON QUANTIZE / DEQUANTIZE loop takes (8 at a time,
// with its own roundings: kernels/quant.cl's quantize_one); none where its kernels are not NEON.
inline int NeonQuantizeBelow(bool neon, int n) { return neon ? n / 8 * 8 : 0; }

// The bounds of a fused activation (NONE, RELU, RELU_N1_TO_1, RELU6) on quantized output values,
// as TFLite's CalculateActivationRangeQuantized; false for any other activation.
bool QuantizedActivationRange(int activation, const QuantParams& out, ValueType type, int* lo,
                              int* hi);

// Channels [0, up_below) of an output stage round the shift's ties up, the rest away from zero.
// Ops whose CPU kernels are ruy's GEMM: every channel.
inline int RuyRounding(int channels) { return channels; }
// Ops whose CPU kernels run a vector loop over `width` channels and finish the remainder in
// scalar code, where the runtime has those loops (CpuKernels::neon); else the scalar code alone.
int VectorLoopRounding(const CpuKernels& k, int channels, int width);

// The requantization of int32 accumulators of scale input_scale * weight_scale[c] to the output:
// per channel (multiplier, shift) pairs (int2 on the device), then + zero point, clamp.
struct OutputStage {
  std::vector<int32_t> params;  // multiplier, shift per channel
  int up_below = 0;
  int zero_point = 0, act_min = -128, act_max = 127;
  // An element-wise chain folded in (AttachTable): the 256 integers it maps the output's
  // integers to (by their low byte); empty: none. Uploaded after the pairs (kernels/quant.cl).
  std::vector<uint8_t> table;
};
// weight_scales: one per channel, or one for all `channels`.
OutputStage MakeOutputStage(float input_scale, const std::vector<float>& weight_scales,
                            int channels, const QuantParams& out, int up_below, int act_min,
                            int act_max);
// The stage's (multiplier, shift) pairs of channels [c0, c0 + count) on the device, then its
// table (if any).
Buffer UploadOutputStage(OpContext& ctx, const OutputStage& s, int c0 = 0, int count = -1);

// --- claim checks: "" if fine, else the reason ---

// A quantized activation of `type` with one scale and zero point (in the type's range), and at
// most 2^31 - 1 elements (kernels index with 32-bit ints).
std::string CheckQuantActivation(const GraphView& g, int t, ValueType type);
// For ops that only move values (TRANSPOSE, SPLIT, TILE, the slices, GATHER, PACK, ...): ""
// if `tensors` are all float32, or all of one quantized type quantized per tensor, whose
// integers the op moves as they are (TFLite's kernels do too, whatever the output's parameters
// say; under OpContext::ForValues the float kernels move them exactly); else the reason.
std::string CheckMovedTensors(const GraphView& g, const std::vector<int>& tensors);
// Constant int8 weights with zero points 0, per tensor or with `channels` scales along `axis`.
std::string CheckQuantWeights(const GraphView& g, int t, int axis, int channels);
// A constant int32 bias of `channels` values.
std::string CheckQuantBias(const GraphView& g, int t, int channels);

// What the int8 ops with a filter check alike (CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED): int8
// input and output quantized per tensor, constant int8 weights (zero points 0) per tensor or
// per output channel along `weight_axis` (`channels` scales), an optional constant int32 bias of
// `channels` values, and sums that stay in int32 (also with the input zero point folded into the
// bias, as the int8 GEMM does).
std::string CheckInt8FilterOp(const GraphView& g, const NodeInfo& node, int weight_axis,
                              int channels);

// "scale/zero point" of a tensor's quantization, for Describe.
std::string DescribeQuant(const QuantParams& q);

// A constant's int8 / int32 values on the host.
std::vector<int8_t> ConstantInt8(const GraphView& g, int t);
std::vector<int32_t> ConstantInt32(const GraphView& g, int t);

}  // namespace clgpu
