// The end of an int8 squeeze (squeeze_int8.cl), run by the one group that counted itself last:
// the mean's integers from the column sums every group added, the dense ops on them and the
// optional SOFTMAX, written to out. Shared by squeeze_int8.cl and by gemm_int8.cl's TAIL_SQUEEZE,
// where the GEMM's tiles are the groups that add the sums (squeeze_int8_tail below).
#ifndef SQUEEZE_INT8_TAIL_CL
#define SQUEEZE_INT8_TAIL_CL
#ifndef QMIN  // quant.cl not included yet (a program of this file alone: the build test)
#include "quant.cl"
#endif

#ifdef SQ_SOFTMAX
#pragma OPENCL FP_CONTRACT OFF
#define SQ_SM_PARAMS , __global const float *restrict sm_table, float sm_scale, int sm_zero
#define SQ_SM_LOCAL_PARAMS , __local float *restrict ev, __local float *restrict inv
#else
#define SQ_SM_PARAMS
#define SQ_SM_LOCAL_PARAMS
#endif

#define SQ_TILE 256
#define SQ_VEC 4096

// One dense op over the int8 vector in4 (kp4 ints) on the whole group, into res: output j's dot
// products split between partners (a power of 2) whose sums a tree adds.
static inline void squeeze_dense(__local const int* in4, int kp4,
                                 __global const int* b, __global const int* bias,
                                 __global const int2* stage, int n, int zp, int lo, int hi,
                                 int upb, __local char* res, __local int* part) {
  const int lid = get_local_id(1) * get_local_size(0) + get_local_id(0);
  const int group = get_local_size(0) * get_local_size(1);
  int partners = 1;
  while (n > 0 && partners * 2 * n <= group) partners *= 2;
  const int per = group / partners;
  __global const char* table = (__global const char*)(stage + n);
  for (int j0 = 0; j0 < n; j0 += per) {
    const int j = j0 + lid / partners, r = lid % partners;
    int acc = 0;
    if (j < n) {
      __global const int* bj = b + (long)j * kp4;
      for (int k = r; k < kp4; k += partners) acc = dot4(in4[k], bj[k], acc);
    }
    part[lid] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = partners / 2; s > 0; s /= 2) {
      if (r < s) part[lid] += part[lid + s];
      barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (r == 0 && j < n) {
      const int v = quant_output(part[lid] + bias[j], stage[j], j, upb, zp, lo, hi);
      res[j] = table[(uchar)v];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
}

// sums[channels]: the column sums (left zero for the next launch); mp: int[5] = add, multiplier,
// shift, offset, count (squeeze_int8.cl); the dense ops and SOFTMAX as squeeze_int8's arguments.
// The group (a power of 2, at most SQ_TILE work-items) runs it whole: every work-item or none.
static inline void squeeze_int8_finish(
    __global int* sums, int channels, __global const int* mp, __global const uchar* up,
    int up_channels, __global const int* b1, __global const int* bias1,
    __global const int2* stage1, int n1, int kp1, int zp1, int lo1, int hi1, int upb1,
    __global const int* b2, __global const int* bias2, __global const int2* stage2, int n2,
    int kp2, int zp2, int lo2, int hi2, int upb2, int layers SQ_SM_PARAMS, __global QT* out,
    __local int* part, __local int* vec1, __local int* vec2 SQ_SM_LOCAL_PARAMS) {
  const int lid = get_local_id(1) * get_local_size(0) + get_local_id(0);
  const int group = get_local_size(0) * get_local_size(1);
  // The mean's integers, zero up to kp1 (the weights' padding).
  __local char* v1 = (__local char*)vec1;
  for (int k = lid; k < kp1; k += group) {
    int q = 0;
    if (k < channels) {
      const int s = global_take(sums + k), count = mp[4];
      const int v = count > 0 ? (s > 0 ? s + count / 2 : s - count / 2) / count
                              : quant_multiply(s + mp[0], mp[1], mp[2], up[k % up_channels] != 0) +
                                    mp[3];
      q = clamp(v, QMIN, QMAX);
    }
    v1[k] = (char)q;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  __local char* v2 = (__local char*)vec2;
  for (int k = n1 + lid; k < kp2; k += group) v2[k] = 0;
  squeeze_dense(vec1, kp1 / 4, b1, bias1, stage1, n1, zp1, lo1, hi1, upb1, v2, part);
  // With one layer the host passes n2 = 0: no pass, no barrier. Layer 2 reads vec2 and writes
  // vec1 (the mean is no longer needed).
  squeeze_dense(vec2, kp2 / 4, b2, bias2, stage2, n2, zp2, lo2, hi2, upb2, v1, part);
  __local const char* res = layers > 1 ? v1 : v2;
  const int n = layers > 1 ? n2 : n1;
#ifdef SQ_SOFTMAX
  // The row's largest integer, then its table values gathered (their loads together) and added
  // in order by one work-item, as softmax_int8.cl does.
  int m = QMIN;
  for (int j = lid; j < n; j += group) m = max(m, (int)res[j]);
  __global const float* table = sm_table + 255 - group_max_int(part, m, lid, group);
  for (int j = lid; j < n; j += group) ev[j] = table[(int)res[j]];
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lid == 0) {
    float sum = 0.0f;
    for (int j = 0; j < n; ++j) sum += ev[j];
    *inv = recip_rn(sum * sm_scale);
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int j = lid; j < n; j += group)
    out[j] = (QT)clamp((int)round(ev[j] * *inv) + sm_zero, QMIN, QMAX);
#else
  for (int j = lid; j < n; j += group) out[j] = (QT)res[j];
#endif
}

// An int8 GEMM's tiles as the squeeze's groups (gemm_int8.cl's -DTAIL_SQUEEZE, after a tile's
// epilogue, every work-item of each tile's last group): the tile's column sums col[0, tn) of
// output columns n0.. go into sums [channels] (then a counter; all zero before the first
// launch), and the last tile to count itself runs the squeeze's end into out. `tail`: ints
// [0..8] the byte offsets in it of mp, up, b1, bias1, stage1, b2, bias2, stage2, sm_table, then
// [9] channels, [10] up_channels, [11..16] n1, kp1, zp1, lo1, hi1, upb1, [17..22] the same of
// dense op 2, [23] layers, [24] sm_zero, [25] sm_scale's bits (PrepareInt8TailSqueeze,
// src_cpp/ops/squeeze.cc).
static inline void squeeze_int8_tail(__global int* sums, __global const char* tail, int channels,
                                     int n0, int tn, __global QT* out, __local int* col,
                                     __local int* flag, __local int* part, __local int* vec1,
                                     __local int* vec2 SQ_SM_LOCAL_PARAMS) {
  const int lid = get_local_id(1) * get_local_size(0) + get_local_id(0);
  const int group = get_local_size(0) * get_local_size(1);
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int e = lid; e < tn; e += group)
    if (n0 + e < channels) global_add(&sums[n0 + e], col[e]);
  if (!last_to_count(&sums[channels], get_num_groups(0), flag)) return;
  __global const int* ti = (__global const int*)tail;
  squeeze_int8_finish(sums, channels, (__global const int*)(tail + ti[0]),
                      (__global const uchar*)(tail + ti[1]), ti[10],
                      (__global const int*)(tail + ti[2]), (__global const int*)(tail + ti[3]),
                      (__global const int2*)(tail + ti[4]), ti[11], ti[12], ti[13], ti[14], ti[15],
                      ti[16], (__global const int*)(tail + ti[5]),
                      (__global const int*)(tail + ti[6]), (__global const int2*)(tail + ti[7]),
                      ti[17], ti[18], ti[19], ti[20], ti[21], ti[22], ti[23]
#ifdef SQ_SOFTMAX
                      , (__global const float*)(tail + ti[8]), as_float(ti[25]), ti[24]
#endif
                      , out, part, vec1, vec2
#ifdef SQ_SOFTMAX
                      , ev, inv
#endif
  );
}

#endif  // SQUEEZE_INT8_TAIL_CL
