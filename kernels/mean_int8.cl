// MEAN of int8 / uint8 tensors over any axes, bit for bit with TFLite's integer kernels
// (src_cpp/ops/mean_int8.cc picks the runtime's arithmetic): the int32 sum of the reduced
// integers, then out = clamp(quant_multiply(sum + add, multiplier, shift) + offset). Integer sums
// do not depend on their order, so a work-group sums each output's elements in parallel.
// QT: kernels/quant.cl.
//
// mean_int8(x, out, nk, nr, count, meta, p, up, channels)
//   meta: int[2 * (nk + nr)] = kept dims, their input strides, reduced dims, their strides;
//   p: int[4] = add, multiplier, shift, offset; output element o rounds its shift's ties up if
//   up[o % channels] (the CPU's vector loop), else away from zero.
//   NDRange: local (G, a power of 2 up to MQ_LOCAL), global (outputs * G).
#include "quant.cl"

#define MQ_LOCAL 64

__kernel void mean_int8(__global const QT* x, __global QT* out, int nk, int nr, int count,
                        __global const int* meta, __global const int* p,
                        __global const uchar* up, int channels) {
  __local int part[MQ_LOCAL];
  const int o = get_group_id(0);
  const int lid = get_local_id(0), group = get_local_size(0);
  __global const int* kdims = meta;
  __global const int* kstrides = meta + nk;
  __global const int* rdims = meta + 2 * nk;
  __global const int* rstrides = meta + 2 * nk + nr;
  long base = 0;
  int rem = o;
  for (int d = nk - 1; d >= 0; --d) {
    base += (long)(rem % kdims[d]) * kstrides[d];
    rem /= kdims[d];
  }
  int sum = 0;
  for (int r = lid; r < count; r += group) {
    long off = base;
    int k = r;
    for (int d = nr - 1; d >= 0; --d) {
      off += (long)(k % rdims[d]) * rstrides[d];
      k /= rdims[d];
    }
    sum += (int)x[off];
  }
  part[lid] = sum;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = group / 2; s > 0; s /= 2) {
    if (lid < s) part[lid] += part[lid + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lid == 0) {
    const int v = quant_multiply(part[0] + p[0], p[1], p[2], up[o % channels] != 0) + p[3];
    out[o] = (QT)clamp(v, QMIN, QMAX);
  }
}
