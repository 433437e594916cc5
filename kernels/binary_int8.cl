// ADD, SUB and MUL on int8 / uint8 tensors with NumPy-style broadcasting, bit for bit with
// TFLite's integer kernels. ADD / SUB: each operand (q - zero point) is shifted left by `left_shift` and rescaled by
// its own multiplier to a common scale, the two are added (subtracted), and the sum is rescaled to
// the output (quant.cl), + zero point, clamped. Needs common.cl and quant.cl; QT is the type.
//
// add_int8(a, b, out, total, rank, meta, p, up_below)
//   meta: int[3 * rank] = output dims, then a's strides, then b's strides (0 where that operand
//   broadcasts along the axis). p: int[14] = a_offset, b_offset, left_shift, a_multiplier,
//   a_shift, b_multiplier, b_shift, out_multiplier, out_shift, out_zero, act_min, act_max,
//   subtract (0 or 1), unused. Elements below up_below round ties up (the NEON loop), the rest
//   away from zero (quant.cl). NDRange: global (total).
//
// mul_int8(a, b, out, total, rank, meta, p, up_below): out = (a + a_offset) * (b + b_offset)
//   rescaled by p[3], p[4] (multiplier, shift), + out_zero, clamped; the same arguments.
//
// prelu_int8(a, b, out, total, rank, meta, p, up_below): x = a + a_offset; x rescaled by p[3],
//   p[4] where x >= 0, else x * (b + b_offset) by p[5], p[6]; + out_zero, clamped. b: alpha.
#include "quant.cl"

// With -DQUANT_TABLE an element-wise chain folded into the op: one more argument, its table
// (quant.cl's QUANT_TABLED; with -DQUANT_TABLE_CHANNELS element i's channel is its index along
// the last axis, meta[rank - 1] long), through which the output integer v is stored.
#define TABLE_PARAM QUANT_TABLE_PARAM
#define TABLED(v, i) QUANT_TABLED(v, (i) % meta[rank - 1])

// The offsets of output element i in a and b.
static inline int2 broadcast_index(int i, int rank, __global const int* meta) {
  int rem = i, ia = 0, ib = 0;
  for (int d = rank - 1; d >= 0; --d) {
    const int dim = meta[d];
    const int x = rem % dim;
    rem /= dim;
    ia += x * meta[rank + d];
    ib += x * meta[2 * rank + d];
  }
  return (int2)(ia, ib);
}

__kernel void add_int8(__global const QT* a, __global const QT* b, __global QT* out, int total,
                       int rank, __global const int* meta, __global const int* p,
                       int up_below TABLE_PARAM OVERFLOW_PARAM) {
  const int i = get_global_id(0);
  if (i >= total) return;
  const int2 at = broadcast_index(i, rank, meta);
  const int ia = at.x, ib = at.y;
  out[i] = TABLED(quant_add(a[ia], b[ib], p, i < up_below), i);
}

__kernel void mul_int8(__global const QT* a, __global const QT* b, __global QT* out, int total,
                       int rank, __global const int* meta, __global const int* p,
                       int up_below TABLE_PARAM OVERFLOW_PARAM) {
  const int i = get_global_id(0);
  if (i >= total) return;
  const int2 at = broadcast_index(i, rank, meta);
  const int prod = ((int)a[at.x] + p[0]) * ((int)b[at.y] + p[1]);
  const int v = quant_multiply(prod, p[3], p[4], i < up_below) + p[9];
  out[i] = TABLED(clamp(v, p[10], p[11]), i);
}

__kernel void prelu_int8(__global const QT* a, __global const QT* b, __global QT* out, int total,
                         int rank, __global const int* meta, __global const int* p,
                         int up_below TABLE_PARAM OVERFLOW_PARAM) {
  const int i = get_global_id(0);
  if (i >= total) return;
  const int2 at = broadcast_index(i, rank, meta);
  const int x = (int)a[at.x] + p[0];
  const bool up = i < up_below;
  const int v = x >= 0 ? quant_multiply(x, p[3], p[4], up)
                       : quant_multiply(x * ((int)b[at.y] + p[1]), p[5], p[6], up);
  out[i] = TABLED(clamp(v + p[9], p[10], p[11]), i);
}
