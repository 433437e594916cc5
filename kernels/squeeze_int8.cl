// A squeeze on int8 tensors in one launch (src_cpp/ops/squeeze.h): the MEAN over H and W of one
// image (x seen as [reduce][channels]), then one or two dense ops on that vector (squeeze-and-
// excitation's reduce and expand), bit for bit with TFLite's MEAN and its int8 FULLY_CONNECTED /
// 1x1 CONV_2D. Needs quant.cl.
//
// squeeze_int8(x, out, sums, counter, reduce, channels, slices, mp, up, up_channels,
//              b1, bias1, stage1, n1, kp1, zp1, lo1, hi1, upb1,
//              b2, bias2, stage2, n2, kp2, zp2, lo2, hi2, upb2, layers)
//   The mean's groups as mean_int8.cl's mean_int8_tiled with one outer row: group g covers lx
//   consecutive channels (block g % blocks) of one of `slices` runs of the reduced extent, its ly
//   rows per column added by a tree. Every group adds its sums into sums[channels] and counts
//   itself in *counter (quant.cl's last_to_count); the last of all of them reads the sums (left
//   zero for the next launch), makes the mean's integers (mp: int[5] = add, multiplier, shift,
//   offset, count; channel c rounds its shift's ties up if up[c % up_channels]; a count > 0: an
//   AVERAGE_POOL_2D's, the sum over count rounded half away from zero) and runs the dense ops
//   on them in local memory. Dense op i (b: its weights packed four int8 to an int, [n][kp / 4];
//   bias: the model's bias minus the input's zero point times the row sum; stage: n (multiplier,
//   shift) pairs then 256 bytes, the table of its folded element-wise chain or the identity; zp,
//   lo, hi: the output's zero point and clamp; channels below upb round ties up) is the int8
//   GEMM's arithmetic (gemm_int8.cl) for one row, its results kept in local memory, the last
//   layer's then copied to out (with one layer, n2 = 0 and layer 2's buffers are layer 1's).
//   NDRange: local (lx, ly), powers of 2, lx * ly <= SQ_TILE; global (blocks * slices * lx, ly),
//   blocks = ceil(channels / lx). channels, kp1, n1 and (with two layers) kp2, n2 at most SQ_VEC.
//
// -DSQ_SOFTMAX: out is a SOFTMAX over the last layer's n integers (n <= SQ_TILE), as
//   softmax_int8.cl computes it for one row. Three more, last arguments: __global const float*
//   sm_table (its table of exp), float sm_scale, int sm_zero (the output's scale, zero point).
// -DPACKED: mp, up, b1 .. stage2 and sm_table are offsets in one buffer, the last argument
//   (common.cl's CONST_IN).
#include "quant.cl"

#ifdef SQ_SOFTMAX
#define SM_ARGS , CONST_IN(float, sm_table), float sm_scale, int sm_zero
#define SQ_SM_PASS , sm_table, sm_scale, sm_zero
#define SQ_SM_LOCALS , ev, &inv
#else
#define SM_ARGS
#define SQ_SM_PASS
#define SQ_SM_LOCALS
#endif

#include "squeeze_int8_tail.cl"

__kernel void squeeze_int8(__global const QT* x, __global QT* out, __global int* sums,
                           __global int* counter, int reduce, int channels, int slices,
                           CONST_IN(int, mp), CONST_IN(uchar, up), int up_channels,
                           CONST_IN(int, b1), CONST_IN(int, bias1), CONST_IN(int2, stage1), int n1,
                           int kp1, int zp1, int lo1, int hi1, int upb1, CONST_IN(int, b2),
                           CONST_IN(int, bias2), CONST_IN(int2, stage2), int n2, int kp2, int zp2,
                           int lo2, int hi2, int upb2, int layers SM_ARGS PACKED_ARG OVERFLOW_PARAM) {
  CONST_AT(int, mp);
  CONST_AT(uchar, up);
  CONST_AT(int, b1);
  CONST_AT(int, bias1);
  CONST_AT(int2, stage1);
  CONST_AT(int, b2);
  CONST_AT(int, bias2);
  CONST_AT(int2, stage2);
#ifdef SQ_SOFTMAX
  CONST_AT(float, sm_table);
#endif
  __local int part[SQ_TILE];
  __local int vec1[SQ_VEC / 4], vec2[SQ_VEC / 4];
  __local int flag;
#ifdef SQ_SOFTMAX
  __local float ev[SQ_TILE];
  __local float inv;
#endif
  const int lx = get_local_size(0), ly = get_local_size(1);
  const int lxi = get_local_id(0), lyi = get_local_id(1);
  const int lid = lyi * lx + lxi, group = lx * ly;
  const int blocks = (channels + lx - 1) / lx;
  const int g = get_group_id(0);
  const int block = g % blocks, slice = g / blocks;
  const int c = block * lx + lxi;
  const int run = (reduce + slices - 1) / slices;
  const int r1 = min(reduce, (slice + 1) * run);
  int sum = 0;
  if (c < channels) {
    __global const QT* xc = x + c;
#pragma unroll 4
    for (int r = slice * run + lyi; r < r1; r += ly) sum += (int)xc[(long)r * channels];
  }
  part[lid] = sum;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = ly / 2; s > 0; s /= 2) {
    if (lyi < s) part[lid] += part[lid + s * lx];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lyi == 0 && c < channels) global_add(sums + c, part[lxi]);
  // The groups but the last are done (a return the whole group takes: a barrier after it is
  // reached by all of the last group's work-items or none). Sharing the dense passes' barriers
  // with no work instead raced on PoCL 3.1 between concurrent groups.
  if (!last_to_count(counter, blocks * slices, &flag)) return;
  squeeze_int8_finish(sums, channels, mp, up, up_channels, b1, bias1, stage1, n1, kp1, zp1, lo1,
                      hi1, upb1, b2, bias2, stage2, n2, kp2, zp2, lo2, hi2, upb2, layers SQ_SM_PASS,
                      out, part, vec1, vec2 SQ_SM_LOCALS);
}
