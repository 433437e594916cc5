// SOFTMAX over the last axis of int8 / uint8 tensors as TFLite's optimized kernel computes it on
// x86 (optimized_ops::Softmax with its float table): per row the largest integer m, then
// sum = table[255 - m + x[0]] + table[255 - m + x[1]] + ... added in order, in float;
// inv = 1 / (sum * out_scale) correctly rounded; out = round(table[255 - m + x] * inv) + zero
// point (int8: half away from zero; uint8: truncation of + 0.5, the zero point unused), clamped.
// table[255 - v] = exp(-input_scale * beta * v) comes from the host (src_cpp/ops/softmax_int8.cc).
// QT: kernels/quant.cl.
//
// softmax_int8(x, out, table, rows, d, out_scale, zero_point) — NDRange: local (G, a power of
// 2 up to SMQ_LOCAL), global (rows * G): one work-group per row. The sum must go in order, but
// its loads need not: the group gathers table[255 - m + x[j]] for SMQ_CHUNK elements at a time
// into local memory, then work-item 0 adds them up from there (a dependent global load per
// element made a 1000-wide row take 19 us on an H200).
#include "quant.cl"

#pragma OPENCL FP_CONTRACT OFF

#define SMQ_LOCAL 256
#define SMQ_CHUNK 1024

__kernel void softmax_int8(__global const QT* x, __global QT* out, __global const float* table,
                           int rows, int d, float out_scale, int zero_point OVERFLOW_PARAM) {
  __local int lmax[SMQ_LOCAL];
  __local float chunk[SMQ_CHUNK];
  __local float linv;
  const int row = get_group_id(0);
  const int lid = get_local_id(0), group = get_local_size(0);
  __global const QT* xr = x + (long)row * d;
  __global QT* outr = out + (long)row * d;
  int m = QMIN;
  for (int j = lid; j < d; j += group) m = max(m, (int)xr[j]);
  __global const float* t = table + 255 - group_max_int(lmax, m, lid, group);
  float sum = 0.0f;  // work-item 0's
  for (int j0 = 0; j0 < d; j0 += SMQ_CHUNK) {
    const int n = min(d - j0, SMQ_CHUNK);
    if (j0 > 0) barrier(CLK_LOCAL_MEM_FENCE);  // work-item 0 is done with the last chunk
    for (int k = lid; k < n; k += group) chunk[k] = t[(int)xr[j0 + k]];
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid == 0) {
      // In element order, one rounding per addition; the unrolled local loads run ahead.
      int k = 0;
      for (; k + 8 <= n; k += 8) {
        const float4 a = vload4(0, chunk + k), b = vload4(0, chunk + k + 4);
        sum += a.s0;
        sum += a.s1;
        sum += a.s2;
        sum += a.s3;
        sum += b.s0;
        sum += b.s1;
        sum += b.s2;
        sum += b.s3;
      }
      for (; k < n; ++k) sum += chunk[k];
      if (j0 + n == d) linv = recip_rn(sum * out_scale);
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  const float inv = linv;
  // A row that fits one chunk still has its table values there.
  const bool whole = d <= SMQ_CHUNK;
  for (int j = lid; j < d; j += group) {
    const float p = (whole ? chunk[j] : t[(int)xr[j]]) * inv;
#ifdef QUANT_UINT8
    const int q = (int)(p + 0.5f);
#else
    const int q = (int)round(p) + zero_point;
#endif
    outr[j] = (QT)clamp(q, QMIN, QMAX);
  }
}
