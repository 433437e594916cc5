// Direct convolution: the reference algorithm and the fallback for any shape.
// One work-item per output element; filter OHWI, activations NHWC.
//
// conv2d_direct(in, filter, bias, out, N,H,W,C, OH,OW,OC, KH,KW, SH,SW, DH,DW, PT,PL, CG,OCG,
//               act_min, act_max[, residual][, slopes])
//   CG, OCG: input and output channels per group (a grouped convolution; C and OC without
//   groups). Filter OHWI with I = CG; output channel oc reads input channels from
//   (oc / OCG) * CG on.
//   residual (HAS_RESIDUAL): a fused ADD's other operand, laid out like out; slopes
//   (CHANNEL_SLOPES, common.cl): a folded PRELU's, one per output channel.
//   NDRange: global (OC, OW, N*OH), local chosen by the driver.
__kernel void conv2d_direct(__global const T* in, __global const T* filter,
                            __global const float* bias, __global T* out, int N, int H, int W,
                            int C, int OH, int OW, int OC, int KH, int KW, int SH, int SW, int DH,
                            int DW, int PT, int PL, int CG, int OCG, float act_min,
                            float act_max RESIDUAL_PARAM SLOPES_PARAM OVERFLOW_PARAM) {
  const int oc = get_global_id(0), ox = get_global_id(1), nz = get_global_id(2);
  if (oc >= OC || ox >= OW || nz >= N * OH) return;
  const int n = nz / OH, oy = nz % OH;
  const int c0 = (oc / OCG) * CG;
  float acc = bias[oc];
  for (int ky = 0; ky < KH; ++ky) {
    const int iy = oy * SH - PT + ky * DH;
    if (iy < 0 || iy >= H) continue;
    for (int kx = 0; kx < KW; ++kx) {
      const int ix = ox * SW - PL + kx * DW;
      if (ix < 0 || ix >= W) continue;
      const long ibase = (((long)n * H + iy) * W + ix) * C + c0;
      const long fbase = (((long)oc * KH + ky) * KW + kx) * CG;
      for (int c = 0; c < CG; ++c) acc += LOADF(in, ibase + c) * LOADF(filter, fbase + c);
    }
  }
  const long o = (((long)n * OH + oy) * OW + ox) * OC + oc;
  STOREF(SLOPED(ACTIVATE(PLUS_RESIDUAL(acc, o), act_min, act_max), oc), out, o);
}
