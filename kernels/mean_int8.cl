// MEAN of int8 / uint8 tensors over any axes, bit for bit with TFLite's integer kernels
// (src_cpp/ops/mean_int8.cc picks the runtime's arithmetic): the int32 sum of the reduced
// integers, then out = clamp(quant_multiply(sum + add, multiplier, shift) + offset). Integer sums
// do not depend on their order, so the kernels split them freely. QT: kernels/quant.cl.
//
// Both kernels take p: int[4] = add, multiplier, shift, offset; output element o (flat index)
// rounds its shift's ties up if up[o % channels] (the CPU's vector loop), else away from zero.
//
// mean_int8_tiled(x, out, acc, outer, reduce, inner, slices, p, up, channels) — the input seen
//   as [outer, reduce, inner] (the reduced axes one run between kept ones: H, W of NHWC), the
//   output as [outer, inner]. Groups of lx x ly work-items (powers of 2, lx * ly <= MQ_TILE): lx
//   consecutive inner columns, so a warp's reads are consecutive bytes, times ly rows of the
//   reduced extent each, combined by a tree in local memory. Groups along dimension 0 cover
//   (outer, slice, block of lx columns): with slices > 1 each of `slices` equal runs of the
//   reduced extent has its own groups, so that a few channels over a large image fill a GPU in
//   one launch. Every group counts itself in acc[o * blocks + block] (quant.cl's
//   last_to_count; with slices == 1 each group is its own last); with slices > 1 the groups
//   first add their sums into acc[outer * blocks + o * inner + c], and the last to count reads
//   them. Both are left zero for the next launch (the host zero-fills acc in Prepare).
//   NDRange: local (lx, ly), global (outer * slices * blocks * lx, ly), blocks = ceil(inner / lx).
//
// mean_int8(x, out, nk, nr, count, meta, p, up, channels) — any other axes.
//   meta: int[2 * (nk + nr)] = kept dims, their input strides, reduced dims, their strides.
//   NDRange: local (G, a power of 2 up to MQ_LOCAL), global (outputs * G): a group per output.
#include "quant.cl"

#define MQ_LOCAL 64
#define MQ_TILE 256

static inline QT mean_out(int sum, int o, __global const int* p, __global const uchar* up,
                          int channels) {
  const int v = quant_multiply(sum + p[0], p[1], p[2], up[o % channels] != 0) + p[3];
  return (QT)clamp(v, QMIN, QMAX);
}

__kernel void mean_int8_tiled(__global const QT* x, __global QT* out, __global int* acc,
                              int outer, int reduce, int inner, int slices,
                              __global const int* p, __global const uchar* up, int channels OVERFLOW_PARAM) {
  __local int part[MQ_TILE];
  __local int flag;
  const int lx = get_local_size(0), ly = get_local_size(1);
  const int lxi = get_local_id(0), lyi = get_local_id(1);
  const int blocks = (inner + lx - 1) / lx;
  const int g = get_group_id(0);
  const int block = g % blocks, slice = g / blocks % slices, o = g / (blocks * slices);
  const int c = block * lx + lxi;
  const int run = (reduce + slices - 1) / slices;
  const int r1 = min(reduce, (slice + 1) * run);
  int sum = 0;
  if (c < inner) {
    __global const QT* xc = x + (long)o * reduce * inner + c;
#pragma unroll 4
    for (int r = slice * run + lyi; r < r1; r += ly) sum += (int)xc[(long)r * inner];
  }
  part[lyi * lx + lxi] = sum;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = ly / 2; s > 0; s /= 2) {
    if (lyi < s) part[lyi * lx + lxi] += part[(lyi + s) * lx + lxi];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  // No early return: PoCL 3.1 then ran the code after the last barrier in every work-item.
  const bool writes = lyi == 0 && c < inner;
  const int idx = o * inner + c;
  __global int* sums = acc + outer * blocks;
  if (slices > 1 && writes) global_add(sums + idx, part[lxi]);
  // Every work-item reaches the barriers inside (PoCL 3.1 mishandled them under a condition).
  const bool last = last_to_count(acc + o * blocks + block, slices, &flag);
  if (last && writes)
    out[idx] = mean_out(slices > 1 ? global_take(sums + idx) : part[lxi], idx, p, up, channels);
}

__kernel void mean_int8(__global const QT* x, __global QT* out, int nk, int nr, int count,
                        __global const int* meta, __global const int* p,
                        __global const uchar* up, int channels OVERFLOW_PARAM) {
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
  if (lid == 0) out[o] = mean_out(part[0], o, p, up, channels);
}
