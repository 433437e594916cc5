// Element-wise binary ops (ADD, SUB, MUL, DIV, MAXIMUM, MINIMUM, SQUARED_DIFFERENCE, POW, PRELU):
// same-shape operands 4 elements per work-item, and NumPy-style broadcasting over up to 8
// dimensions. The op is an argument, the same for every work-item, so one program serves every
// binary node of a model.

#include "quant.cl"

// The op numbers the host passes (src_cpp/ops/binary.cc keeps the same list).
#define B_ADD 0
#define B_SUB 1
#define B_MUL 2
#define B_DIV 3
#define B_MAXIMUM 4
#define B_MINIMUM 5
#define B_SQUARED_DIFFERENCE 6
#define B_POW 7
#define B_PRELU 8

static inline float binary_op(float a, float b, int op) {
  switch (op) {
    case B_ADD: return a + b;
    case B_SUB: return a - b;
    case B_MUL: return a * b;
    case B_DIV: return a / b;
    // TFLite's reference kernels compare, so the NaN handling matches theirs, not fmax's.
    case B_MAXIMUM: return a > b ? a : b;
    case B_MINIMUM: return a < b ? a : b;
    case B_SQUARED_DIFFERENCE: return (a - b) * (a - b);
    case B_POW: return pow(a, b);
    default: return a >= 0.0f ? a : a * b;  // B_PRELU: b is alpha
  }
}

// binary_same(a, b, out, n, op, act_min, act_max[, slopes, c][, q_scale, q_inv_scale,
//             q_zero_point, qmin, qmax, vec_below]) — NDRange: global ceil(n / 4).
//   CHANNEL_SLOPES (fusion/prelu.cc): then a PRELU of __global const T* slopes [c], the slope of
//   element i's channel i % c (the output's last axis). QUANT_STORE (fusion/requantize.cc): then
//   a QUANTIZE of the result (quant.cl's quantize_one), out then of the quantized type.
#ifdef CHANNEL_SLOPES
#define SAME_SLOPES_PARAM , __global const T *restrict slopes, int c
#define SAME_SLOPED(v, i) prelu_at((v), LOADF(slopes, (i) % c))
#else
#define SAME_SLOPES_PARAM
#define SAME_SLOPED(v, i) (v)
#endif
#ifdef QUANT_STORE
#define SAME_OUT QT
#define SAME_QUANT_PARAM \
  , float q_scale, float q_inv_scale, int q_zero_point, int qmin, int qmax, int vec_below
#define SAME_STORE(v, out, i) \
  out[i] = quantize_one((v), (i), q_scale, q_inv_scale, q_zero_point, qmin, qmax, vec_below)
#define SAME_STORE4(v, out, i4)         \
  do {                                  \
    SAME_STORE((v).x, out, 4 * (i4));     \
    SAME_STORE((v).y, out, 4 * (i4) + 1); \
    SAME_STORE((v).z, out, 4 * (i4) + 2); \
    SAME_STORE((v).w, out, 4 * (i4) + 3); \
  } while (0)
#else
#define SAME_OUT T
#define SAME_QUANT_PARAM
#define SAME_STORE(v, out, i) STOREF(v, out, i)
#define SAME_STORE4(v, out, i4) STOREF4(v, out, i4)
#endif
__kernel void binary_same(__global const T* a, __global const T* b, __global SAME_OUT* out, int n,
                          int op, float act_min,
                          float act_max SAME_SLOPES_PARAM SAME_QUANT_PARAM OVERFLOW_PARAM) {
  const int i4 = get_global_id(0);
  if ((i4 + 1) * 4 <= n) {
    const float4 x = LOADF4(a, i4), y = LOADF4(b, i4);
    float4 v = op == B_ADD ? x + y
                           : (float4)(binary_op(x.x, y.x, op), binary_op(x.y, y.y, op),
                                      binary_op(x.z, y.z, op), binary_op(x.w, y.w, op));
    v = ACTIVATE(v, act_min, act_max);
#ifdef CHANNEL_SLOPES
    v = (float4)(SAME_SLOPED(v.x, 4 * i4), SAME_SLOPED(v.y, 4 * i4 + 1),
                 SAME_SLOPED(v.z, 4 * i4 + 2), SAME_SLOPED(v.w, 4 * i4 + 3));
#endif
    SAME_STORE4(v, out, i4);
  } else {
    for (int i = i4 * 4; i < n; ++i)
      SAME_STORE(
          SAME_SLOPED(ACTIVATE(binary_op(LOADF(a, i), LOADF(b, i), op), act_min, act_max), i),
          out, i);
  }
}

// binary_bcast3(a, b, out, n, d1, d2v, vec, sa0, sa1, sa2, sb0, sb1, sb2, op, act_min, act_max)
//   The output as [d0][d1][d2] (src_cpp/ops/binary.cc, Collapse), each operand's strides along
//   those axes (0 where it broadcasts; along d2 0 or 1). vec (4 or 1) elements of d2 per
//   work-item, d2 = d2v * vec. NDRange: global n = d0 * d1 * d2v.
__kernel void binary_bcast3(__global const T* a, __global const T* b, __global T* out, int n,
                            int d1, int d2v, int vec, int sa0, int sa1, int sa2, int sb0,
                            int sb1, int sb2, int op, float act_min,
                            float act_max OVERFLOW_PARAM) {
  const int i = get_global_id(0);
  if (i >= n) return;
  const int x = i % d2v, r = i / d2v;
  const int y = r % d1, z = r / d1;
  const long pa = (long)z * sa0 + (long)y * sa1, pb = (long)z * sb0 + (long)y * sb1;
  if (vec == 4) {
    const float4 va = sa2 ? LOADF4(a + pa + 4 * x, 0) : (float4)(LOADF(a, pa));
    const float4 vb = sb2 ? LOADF4(b + pb + 4 * x, 0) : (float4)(LOADF(b, pb));
    const float4 v = op == B_ADD   ? va + vb
                     : op == B_MUL ? va * vb
                                   : (float4)(binary_op(va.x, vb.x, op), binary_op(va.y, vb.y, op),
                                              binary_op(va.z, vb.z, op), binary_op(va.w, vb.w, op));
    STOREF4(ACTIVATE(v, act_min, act_max), out, i);
  } else {
    STOREF(ACTIVATE(binary_op(LOADF(a, pa + sa2 * x), LOADF(b, pb + sb2 * x), op), act_min,
                    act_max),
           out, i);
  }
}

// binary_broadcast(a, b, out, total, rank, meta, op, act_min, act_max)
//   meta: int[3*rank] = output dims, then a's strides, then b's strides (0 where
//   that input broadcasts along the axis). NDRange: global (total).
__kernel void binary_broadcast(__global const T* a, __global const T* b, __global T* out,
                               int total, int rank, __global const int* meta, int op,
                               float act_min, float act_max OVERFLOW_PARAM) {
  const int i = get_global_id(0);
  if (i >= total) return;
  int rem = i;
  long ia = 0, ib = 0;
  for (int d = rank - 1; d >= 0; --d) {
    const int dim = meta[d];
    const int x = rem % dim;
    rem /= dim;
    ia += (long)x * meta[rank + d];
    ib += (long)x * meta[2 * rank + d];
  }
  STOREF(ACTIVATE(binary_op(LOADF(a, ia), LOADF(b, ib), op), act_min, act_max), out, i);
}
