// TRANSPOSE_CONV: out[n, oy, ox, oc] = bias[oc] + sum over the taps (ky, kx) whose input pixel
// iy = (oy + pad_top - ky) / sh (exactly divisible, inside the input) exists, and over ic, of
// x[n, iy, ix, ic] * w[oc, ky, kx, ic].

// transpose_conv(x, w, bias, out, N, H, W, IC, OH, OW, OC, KH, KW, SH, SW, pad_top, pad_left,
//                act_min, act_max) — NDRange: global (N * OH * OW * OC), one output each.
__kernel void transpose_conv(__global const T* x, __global const T* w, __global const float* bias,
                             __global T* out, int N, int H, int W, int IC, int OH, int OW, int OC,
                             int KH, int KW, int SH, int SW, int pad_top, int pad_left,
                             float act_min, float act_max OVERFLOW_PARAM) {
  const int i = get_global_id(0);
  if (i >= N * OH * OW * OC) return;
  const int oc = i % OC;
  const int ox = i / OC % OW;
  const int oy = i / (OC * OW) % OH;
  const int n = i / (OC * OW * OH);
  float acc = bias[oc];
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
      for (int c = 0; c < IC; ++c) acc += LOADF(x, xb + c) * LOADF(w, wb + c);
    }
  }
  STOREF(ACTIVATE(acc, act_min, act_max), out, i);
}
