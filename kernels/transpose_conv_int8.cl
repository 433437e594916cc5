// TRANSPOSE_CONV on int8 tensors: out[n, oy, ox, oc] = requantize(bias[oc] + sum over the taps
// (ky, kx) whose input pixel iy = (oy + pad_top - ky) / SH (exactly divisible, inside the input)
// exists, and over ic, of (x[n, iy, ix, ic] - in_zero) * w[oc, ky, kx, ic]): int32 sums, then
// TFLite's requantization (quant.cl). Needs quant.cl.
//
// transpose_conv_int8(x, w, bias, stage, out, N, H, W, IC, OH, OW, OC, KH, KW, SH, SW, pad_top,
//                     pad_left, in_zero, up_below, out_zero, act_min, act_max)
//   stage: int2 [OC] (multiplier, shift); channels below up_below round ties up.
//   NDRange: global (OC, OW, N * OH).
#include "quant.cl"

__kernel void transpose_conv_int8(__global const char* x, __global const char* w,
                                  __global const int* bias, __global const int2* stage,
                                  __global char* out, int N, int H, int W, int IC, int OH, int OW,
                                  int OC, int KH, int KW, int SH, int SW, int pad_top,
                                  int pad_left, int in_zero, int up_below, int out_zero,
                                  int act_min, int act_max OVERFLOW_PARAM) {
  const int oc = get_global_id(0), ox = get_global_id(1), nz = get_global_id(2);
  if (oc >= OC || ox >= OW || nz >= N * OH) return;
  const int n = nz / OH, oy = nz % OH;
  int acc = bias[oc];
  for (int ky = 0; ky < KH; ++ky) {
    const int ty = oy + pad_top - ky;
    if (ty < 0 || ty % SH) continue;
    const int iy = ty / SH;
    if (iy >= H) continue;
    for (int kx = 0; kx < KW; ++kx) {
      const int tx = ox + pad_left - kx;
      if (tx < 0 || tx % SW) continue;
      const int ix = tx / SW;
      if (ix >= W) continue;
      const long xb = (((long)n * H + iy) * W + ix) * IC;
      const long wb = (((long)oc * KH + ky) * KW + kx) * IC;
      for (int c = 0; c < IC; ++c) acc += ((int)x[xb + c] - in_zero) * (int)w[wb + c];
    }
  }
  out[(((long)n * OH + oy) * OW + ox) * OC + oc] =
      (char)quant_output(acc, stage[oc], oc, up_below, out_zero, act_min, act_max);
}
