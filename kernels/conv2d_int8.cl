// CONV_2D on int8 tensors, direct: one work-item per output element, int32 accumulation of
// (input - in_zero) * filter plus the bias, then TFLite's requantization (quant.cl). The
// reference for the implicit GEMM (gemm_int8.cl) and the fallback for any geometry.
// Needs common.cl and quant.cl.
//
// conv2d_int8_direct(in, filter, bias, stage, out, N, H, W, C, OH, OW, OC, KH, KW, SH, SW, DH, DW,
//                    PT, PL, in_zero, up_below, out_zero, act_min, act_max)
//   __global const char* in [N][H][W][C], filter [OC][KH][KW][C]; __global const int* bias [OC]
//   (zeros when the model has none); __global const int2* stage [OC] (multiplier, shift);
//   __global char* out [N][OH][OW][OC]. Taps outside the input contribute nothing (TFLite pads
//   with the input's zero point).
//   NDRange: global (OC, OW, N * OH), local chosen by the driver.
#include "quant.cl"

__kernel void conv2d_int8_direct(__global const char* in, __global const char* filter,
                                 __global const int* bias, __global const int2* stage,
                                 __global char* out, int N, int H, int W, int C, int OH, int OW,
                                 int OC, int KH, int KW, int SH, int SW, int DH, int DW, int PT,
                                 int PL, int in_zero, int up_below, int out_zero, int act_min,
                                 int act_max OVERFLOW_PARAM) {
  const int oc = get_global_id(0), ox = get_global_id(1), nz = get_global_id(2);
  if (oc >= OC || ox >= OW || nz >= N * OH) return;
  const int n = nz / OH, oy = nz % OH;
  int acc = bias[oc];
  for (int ky = 0; ky < KH; ++ky) {
    const int iy = oy * SH - PT + ky * DH;
    if (iy < 0 || iy >= H) continue;
    for (int kx = 0; kx < KW; ++kx) {
      const int ix = ox * SW - PL + kx * DW;
      if (ix < 0 || ix >= W) continue;
      const int ibase = ((n * H + iy) * W + ix) * C;
      const int fbase = ((oc * KH + ky) * KW + kx) * C;
      for (int c = 0; c < C; ++c) acc += ((int)in[ibase + c] - in_zero) * (int)filter[fbase + c];
    }
  }
  const int q = quant_output(acc, stage[oc], oc, up_below, out_zero, act_min, act_max);
  out[((n * OH + oy) * OW + ox) * OC + oc] = quant_store(q, stage, OC, oc);
}
