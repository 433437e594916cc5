// SOFTMAX over the last axis of int8 / uint8 tensors as TFLite's optimized kernel computes it on
// x86 (optimized_ops::Softmax with its float table): per row the largest integer m, then
// sum = table[255 - m + x[0]] + table[255 - m + x[1]] + ... added in order, in float;
// inv = 1 / (sum * out_scale) correctly rounded; out = round(table[255 - m + x] * inv) + zero
// point (int8: half away from zero; uint8: truncation of + 0.5, the zero point unused), clamped.
// table[255 - v] = exp(-input_scale * beta * v) comes from the host (src_cpp/ops/softmax_int8.cc).
// QT: kernels/quant.cl.
//
// softmax_int8(x, out, table, rows, d, out_scale, zero_point) — NDRange: local (G, a power of
// 2 up to SMQ_LOCAL), global (rows * G): one work-group per row.
#include "quant.cl"

#pragma OPENCL FP_CONTRACT OFF

#define SMQ_LOCAL 64

// 1 / d rounded to nearest (d > 0 and normal), whatever the precision of the device's division:
// a Newton step makes y faithful, the residual 1 - d * y is then exact in one fma, and it tells
// on which side of each neighbouring midpoint 1 / d lies (a reciprocal is never a tie).
static inline float recip_rn(float d) {
  float y = 1.0f / d;
  y = fma(fma(-d, y, 1.0f), y, y);
  const float r = fma(-d, y, 1.0f);
  const float up = nextafter(y, INFINITY), dn = nextafter(y, 0.0f);
  if (r > d * (up - y) * 0.5f) return up;
  if (-r > d * (y - dn) * 0.5f) return dn;
  return y;
}

__kernel void softmax_int8(__global const QT* x, __global QT* out, __global const float* table,
                           int rows, int d, float out_scale, int zero_point) {
  __local int lmax[SMQ_LOCAL];
  __local float linv;
  const int row = get_group_id(0);
  const int lid = get_local_id(0), group = get_local_size(0);
  __global const QT* xr = x + (long)row * d;
  __global QT* outr = out + (long)row * d;
  int m = QMIN;
  for (int j = lid; j < d; j += group) m = max(m, (int)xr[j]);
  lmax[lid] = m;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = group / 2; s > 0; s /= 2) {
    if (lid < s) lmax[lid] = max(lmax[lid], lmax[lid + s]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  __global const float* t = table + 255 - lmax[0];
  if (lid == 0) {
    float sum = 0.0f;
    for (int j = 0; j < d; ++j) sum += t[(int)xr[j]];
    linv = recip_rn(sum * out_scale);
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  const float inv = linv;
  for (int j = lid; j < d; j += group) {
    const float p = t[(int)xr[j]] * inv;
#ifdef QUANT_UINT8
    const int q = (int)(p + 0.5f);
#else
    const int q = (int)round(p) + zero_point;
#endif
    outr[j] = (QT)clamp(q, QMIN, QMAX);
  }
}
