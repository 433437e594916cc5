// QUANTIZE (float -> int8 / uint8, and requantization between quantized types) and DEQUANTIZE
// (int8 / uint8 -> float), bit for bit with TFLite's kernels. Where a runtime runs a vector loop
// over the first vec_below elements (LiteRT's NEON loops, 8 at a time) those elements take the
// loop's arithmetic, the rest the scalar code's (src_cpp/ops/quantize.cc says which is which).
// NDRange: global (n), one element each. QT: kernels/quant.cl.
#include "quant.cl"

// The float expressions below are TFLite's roundings, one by one: no fused multiply-adds.
#pragma OPENCL FP_CONTRACT OFF

// quantize_float(x, out, n, scale, inv_scale, zero_point, qmin, qmax, vec_below[, table[, c]])
//   out[i] = quantize_one(x[i], ...). With -DQUANT_TABLE an int8 element-wise chain folded into it
//   (src_cpp/fusion/epilogue.cc: an input Rescaling's scalar MUL and ADD) maps that integer
//   through `table` (quant.cl's QUANT_TABLED), with -DQUANT_TABLE_CHANNELS channel i % c's.
#ifdef QUANT_TABLE_CHANNELS
#define QZ_CHANNELS_PARAM , int table_c
#define QZ_CHANNEL(i) ((i) % table_c)
#else
#define QZ_CHANNELS_PARAM
#define QZ_CHANNEL(i) 0
#endif
__kernel void quantize_float(__global const T* x, __global QT* out, int n, float scale,
                             float inv_scale, int zero_point, int qmin, int qmax,
                             int vec_below QUANT_TABLE_PARAM QZ_CHANNELS_PARAM OVERFLOW_PARAM) {
  const int i = get_global_id(0);
  if (i >= n) return;
  out[i] = QUANT_TABLED(
      quantize_one(LOADF(x, i), i, scale, inv_scale, zero_point, qmin, qmax, vec_below),
      QZ_CHANNEL(i));
}

// requantize(x, out, n, in_zero_point, multiplier, shift, out_zero_point, qmin, qmax, up_below)
//   out[i] = clamp(quant_multiply(x[i] - in_zero_point) + out_zero_point, qmin, qmax). The input
//   type is IN_QT (char, or uchar with -DIN_UINT8).
#ifdef IN_UINT8
#define IN_QT uchar
#else
#define IN_QT char
#endif
__kernel void requantize(__global const IN_QT* x, __global QT* out, int n, int in_zero_point,
                         int multiplier, int shift, int out_zero_point, int qmin, int qmax,
                         int up_below OVERFLOW_PARAM) {
  const int i = get_global_id(0);
  if (i >= n) return;
  const int v = quant_multiply((int)x[i] - in_zero_point, multiplier, shift, i < up_below);
  out[i] = (QT)clamp(v + out_zero_point, qmin, qmax);
}

// dequantize(x, out, n, scale, zero_point, zero_scaled, vec_below, act_min, act_max[, slopes, c]
//            [, q_scale, q_inv_scale, q_zero_point, qmin, qmax])
//   out[i] = (x[i] - zero_point) * scale, one rounding; below vec_below x * scale - zero_scaled
//   (zero_scaled = zero_point * scale rounded to float: the NEON loop's two roundings). Then the
//   float ops folded into it (ops/quantize.cc): a clamp and an epilogue (ACTIVATE), or a PRELU
//   of CHANNEL_SLOPES, the slope of element i's channel i % c; and with QUANT_STORE a QUANTIZE
//   of the result (quantize_one, the same n and vec_below), out then of the quantized type.
#ifdef CHANNEL_SLOPES
#define DQ_SLOPES_PARAM , __global const T *restrict slopes, int c
#define DQ_SLOPED(v, i) prelu_at((v), LOADF(slopes, (i) % c))
#else
#define DQ_SLOPES_PARAM
#define DQ_SLOPED(v, i) (v)
#endif
#ifdef QUANT_STORE
#define DQ_OUT QT
#define DQ_QUANT_PARAM , float q_scale, float q_inv_scale, int q_zero_point, int qmin, int qmax
#define DQ_STORE(v, out, i) \
  out[i] = quantize_one((v), (i), q_scale, q_inv_scale, q_zero_point, qmin, qmax, vec_below)
#else
#define DQ_OUT T
#define DQ_QUANT_PARAM
#define DQ_STORE(v, out, i) STOREF(v, out, i)
#endif
__kernel void dequantize(__global const QT* x, __global DQ_OUT* out, int n, float scale,
                         int zero_point, float zero_scaled, int vec_below, float act_min,
                         float act_max DQ_SLOPES_PARAM DQ_QUANT_PARAM OVERFLOW_PARAM) {
  const int i = get_global_id(0);
  if (i >= n) return;
  const int q = (int)x[i];
  const float v = i < vec_below ? (float)q * scale - zero_scaled : (float)(q - zero_point) * scale;
  DQ_STORE(DQ_SLOPED(ACTIVATE(v, act_min, act_max), i), out, i);
}
