// Depthwise convolution, one work-item per output element (reference version).
// Filter [1][KH][KW][C*M]; output channel oc reads input channel oc / M.
//
// depthwise_conv2d(in, filter, bias, out, N,H,W,C, OH,OW, M, KH,KW, SH,SW, DH,DW, PT,PL,
//                  act_min, act_max)
//   NDRange: global (C*M, OW, N*OH).
__kernel void depthwise_conv2d(__global const T* in, __global const T* filter,
                               __global const float* bias, __global T* out, int N, int H, int W,
                               int C, int OH, int OW, int M, int KH, int KW, int SH, int SW,
                               int DH, int DW, int PT, int PL, float act_min, float act_max) {
  const int OC = C * M;
  const int oc = get_global_id(0), ox = get_global_id(1), nz = get_global_id(2);
  if (oc >= OC || ox >= OW || nz >= N * OH) return;
  const int n = nz / OH, oy = nz % OH, ic = oc / M;
  float acc = bias[oc];
  for (int ky = 0; ky < KH; ++ky) {
    const int iy = oy * SH - PT + ky * DH;
    if (iy < 0 || iy >= H) continue;
    for (int kx = 0; kx < KW; ++kx) {
      const int ix = ox * SW - PL + kx * DW;
      if (ix < 0 || ix >= W) continue;
      acc += LOADF(in, (((long)n * H + iy) * W + ix) * C + ic) *
             LOADF(filter, ((long)ky * KW + kx) * OC + oc);
    }
  }
  STOREF(ACTIVATE(acc, act_min, act_max), out, (((long)n * OH + oy) * OW + ox) * OC + oc);
}
