// DEPTHWISE_CONV_2D on int8 tensors: one work-item per output element, int32 accumulation of
// (input - in_zero) * filter plus the bias, then TFLite's requantization per output channel
// (quant.cl). Needs common.cl and quant.cl.
//
// depthwise_conv2d_int8(in, filter, bias, stage, out, N, H, W, C, OH, OW, M, KH, KW, SH, SW, DH,
//                       DW, PT, PL, in_zero, up_below, out_zero, act_min, act_max)
//   __global const char* in [N][H][W][C], filter [KH][KW][C * M]; __global const int* bias
//   [C * M]; __global const int2* stage [C * M]; __global char* out [N][OH][OW][C * M]; output
//   channel o reads input channel o / M (depth multiplier M).
//   NDRange: global (C * M, OW, N * OH), local chosen by the driver.
#include "quant.cl"

__kernel void depthwise_conv2d_int8(__global const char* in, __global const char* filter,
                                    __global const int* bias, __global const int2* stage,
                                    __global char* out, int N, int H, int W, int C, int OH, int OW,
                                    int M, int KH, int KW, int SH, int SW, int DH, int DW, int PT,
                                    int PL, int in_zero, int up_below, int out_zero, int act_min,
                                    int act_max OVERFLOW_PARAM) {
  const int oc = get_global_id(0), ox = get_global_id(1), nz = get_global_id(2);
  const int OC = C * M;
  if (oc >= OC || ox >= OW || nz >= N * OH) return;
  const int n = nz / OH, oy = nz % OH, ic = oc / M;
  int acc = bias[oc];
  for (int ky = 0; ky < KH; ++ky) {
    const int iy = oy * SH - PT + ky * DH;
    if (iy < 0 || iy >= H) continue;
    for (int kx = 0; kx < KW; ++kx) {
      const int ix = ox * SW - PL + kx * DW;
      if (ix < 0 || ix >= W) continue;
      acc += ((int)in[((n * H + iy) * W + ix) * C + ic] - in_zero) *
             (int)filter[(ky * KW + kx) * OC + oc];
    }
  }
  const int q = quant_output(acc, stage[oc], oc, up_below, out_zero, act_min, act_max);
  out[((n * OH + oy) * OW + ox) * OC + oc] = quant_store(q, stage, OC, oc);
}

// depthwise_conv2d_int8_c4: the same for depth multiplier 1 and C % 4 == 0, four neighbouring
// channels per work-item (char4 loads, int4 sums). Same arguments (M = 1).
//   NDRange: global (C / 4, OW, N * OH).
__kernel void depthwise_conv2d_int8_c4(__global const char* in, __global const char* filter,
                                       __global const int* bias, __global const int2* stage,
                                       __global char* out, int N, int H, int W, int C, int OH,
                                       int OW, int M, int KH, int KW, int SH, int SW, int DH,
                                       int DW, int PT, int PL, int in_zero, int up_below,
                                       int out_zero, int act_min, int act_max OVERFLOW_PARAM) {
  const int c4 = get_global_id(0), ox = get_global_id(1), nz = get_global_id(2);
  if (4 * c4 >= C || ox >= OW || nz >= N * OH) return;
  const int n = nz / OH, oy = nz % OH, c = 4 * c4;
  int4 acc = vload4(c4, bias);
  for (int ky = 0; ky < KH; ++ky) {
    const int iy = oy * SH - PT + ky * DH;
    if (iy < 0 || iy >= H) continue;
    for (int kx = 0; kx < KW; ++kx) {
      const int ix = ox * SW - PL + kx * DW;
      if (ix < 0 || ix >= W) continue;
      const int4 x = convert_int4(vload4(c4, in + ((n * H + iy) * W + ix) * C)) - in_zero;
      acc += x * convert_int4(vload4(c4, filter + (ky * KW + kx) * C));
    }
  }
  const int o = ((n * OH + oy) * OW + ox) * C + c;
  const int4 q = (int4)(
      quant_output(acc.x, stage[c], c, up_below, out_zero, act_min, act_max),
      quant_output(acc.y, stage[c + 1], c + 1, up_below, out_zero, act_min, act_max),
      quant_output(acc.z, stage[c + 2], c + 2, up_below, out_zero, act_min, act_max),
      quant_output(acc.w, stage[c + 3], c + 3, up_below, out_zero, act_min, act_max));
  out[o] = quant_store(q.x, stage, C, c);
  out[o + 1] = quant_store(q.y, stage, C, c + 1);
  out[o + 2] = quant_store(q.z, stage, C, c + 2);
  out[o + 3] = quant_store(q.w, stage, C, c + 3);
}
