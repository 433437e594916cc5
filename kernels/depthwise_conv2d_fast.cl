// DEPTHWISE_CONV_2D, bandwidth-oriented: each work-item computes WPT_W neighbouring output pixels
// of one row x 4 output channels, reusing every filter load across its pixels; float4 loads and
// stores when C * depth_mult % 4 == 0, a scalar fallback otherwise. Needs common.cl.
//
// depthwise_conv2d_fast(in, filter, bias, out, N, H, W, C, OH, OW, depth_mult, KH, KW, SH, SW,
//                       DH, DW, PT, PL, act_min, act_max)
//   __global const T* in [N][H][W][C]; __global const T* filter [1][KH][KW][OC] with
//   OC = C * depth_mult; __global const float* bias [OC] (zeros when the model has none);
//   __global T* out [N][OH][OW][OC] (output channel oc reads input channel oc / depth_mult);
//   int N, H, W, C, OH, OW, depth_mult, KH, KW, SH, SW, DH, DW; int PT, PL (top/left padding;
//   taps outside the input are skipped, as on the CPU); float act_min, act_max
//   NDRange: 1-D, global >= ceil(OC / 4) * ceil(OW / WPT_W) * N * OH (any rounding), any local
//            size (a multiple of 32 is best). Work-item order: channel group fastest, then pixel
//            group along OW, then output row, then image, so a warp reads neighbouring channels.
//   Defines: WPT_W (2), output pixels per work-item (H200: 1 is best for stride 2 and 5x5, 4 for
//   big stride-1 maps, all within ~15%).

#ifndef WPT_W
#define WPT_W 2
#endif

// acc[p] += every tap of output pixel (ow0 + p) for the 4 output channels 4*c4.. (OC % 4 == 0).
// Taps outside the input load from a clamped (valid) position and their product is then
// dropped by a select: no branches, so the loads can all be in flight together.
static inline void depthwise_taps_vec(__global const T* restrict in,
                                      __global const T* restrict filter, float4* acc, int n, int H,
                                      int W, int C, int OC4, int c4, int4 ic, bool direct, int KH,
                                      int KW, int SW, int DH, int DW, int ih0, int iw0) {
#pragma unroll
  for (int kh = 0; kh < KH; ++kh) {
    const int ih = ih0 + kh * DH;
    const bool row_ok = (uint)ih < (uint)H;
    const int rbase = (n * H + clamp(ih, 0, H - 1)) * W;
#pragma unroll
    for (int kw = 0; kw < KW; ++kw) {
      const float4 f = LOADF4(filter, (kh * KW + kw) * OC4 + c4);
#pragma unroll
      for (int p = 0; p < WPT_W; ++p) {
        const int iw = iw0 + p * SW + kw * DW;
        const int pix = (rbase + clamp(iw, 0, W - 1)) * C;
        float4 x;
        if (direct) {  // depth_mult == 1: the 4 input channels are neighbours
          x = LOADF4(in, (pix >> 2) + c4);
        } else {
          x = (float4)(LOADF(in, pix + ic.x), LOADF(in, pix + ic.y), LOADF(in, pix + ic.z),
                       LOADF(in, pix + ic.w));
        }
        // A padded tap is skipped, not multiplied by zero: TFLite's CPU kernel skips it, so a
        // non-finite weight there must not make NaN (0 * Inf).
        acc[p] = row_ok && (uint)iw < (uint)W ? mad(x, f, acc[p]) : acc[p];
      }
    }
  }
}

// CHANNEL_SLOPES (fusion/prelu.cc): a folded PRELU's slopes [OC] after the activation, one more
// argument (common.cl's SLOPES_PARAM); lanes of four channels that OC does not fill load each
// lane's own (SLOPED_LANES, oc: the lanes' channels).
#ifdef CHANNEL_SLOPES
#define SLOPED_LANES(v, oc)                                                           \
  prelu_at4((v), (float4)(LOADF(slopes, (oc).x), LOADF(slopes, (oc).y), LOADF(slopes, (oc).z), \
                          LOADF(slopes, (oc).w)))
#else
#define SLOPED_LANES(v, oc) (v)
#endif

__kernel void depthwise_conv2d_fast(__global const T* restrict in,
                                    __global const T* restrict filter,
                                    __global const float* restrict bias, __global T* restrict out,
                                    int N, int H, int W, int C, int OH, int OW, int depth_mult,
                                    int KH, int KW, int SH, int SW, int DH, int DW, int PT, int PL,
                                    float act_min, float act_max SLOPES_PARAM OVERFLOW_PARAM) {
  const int OC = C * depth_mult;
  const int OC4 = (OC + 3) >> 2;
  const int OWB = (OW + WPT_W - 1) / WPT_W;
  const int idx = get_global_id(0);
  const int c4 = idx % OC4;
  const int t = idx / OC4;
  const int owb = t % OWB;
  const int row = t / OWB;  // n * OH + oh
  if (row >= N * OH) return;
  const int oh = row % OH;
  const int n = row / OH;
  const int oc0 = 4 * c4;
  const int ow0 = owb * WPT_W;
  const int ih0 = oh * SH - PT;
  const int iw0 = ow0 * SW - PL;

  float4 acc[WPT_W];
  if ((OC & 3) == 0) {
    const float4 b = vload4(c4, bias);
#pragma unroll
    for (int p = 0; p < WPT_W; ++p) acc[p] = b;
    // Input channels of the 4 lanes: one float4 when depth_mult == 1, else gathered.
    const int4 ic = (int4)(oc0, oc0 + 1, oc0 + 2, oc0 + 3) / depth_mult;
    // Literal sizes for the common cases let the tap loops unroll and drop the depth_mult branch,
    // so all loads can be in flight at once.
#define DW_TAPS(KH_, KW_, DIRECT_)                                                                 \
  depthwise_taps_vec(in, filter, acc, n, H, W, C, OC4, c4, ic, DIRECT_, KH_, KW_, SW, DH, DW, ih0, \
                     iw0)
    const bool direct = depth_mult == 1;
    if (KH == 3 && KW == 3 && direct)
      DW_TAPS(3, 3, true);
    else if (KH == 3 && KW == 3)
      DW_TAPS(3, 3, false);
    else if (KH == 5 && KW == 5 && direct)
      DW_TAPS(5, 5, true);
    else
      DW_TAPS(KH, KW, direct);
#undef DW_TAPS
    const int obase = (row * OW + ow0) * OC4 + c4;
#pragma unroll
    for (int p = 0; p < WPT_W; ++p)
      if (ow0 + p < OW)
        STOREF4(SLOPED4(ACTIVATE(acc[p], act_min, act_max), oc0), out, obase + p * OC4);
  } else {
    // Lanes past OC repeat channel OC - 1 (valid memory) and are not stored.
    const int4 oc = min((int4)(oc0, oc0 + 1, oc0 + 2, oc0 + 3), (int4)(OC - 1));
    const int4 ic = oc / depth_mult;
    const float4 b = (float4)(bias[oc.x], bias[oc.y], bias[oc.z], bias[oc.w]);
#pragma unroll
    for (int p = 0; p < WPT_W; ++p) acc[p] = b;
    for (int kh = 0; kh < KH; ++kh) {
      const int ih = ih0 + kh * DH;
      if ((uint)ih >= (uint)H) continue;
      const int rbase = (n * H + ih) * W;
      for (int kw = 0; kw < KW; ++kw) {
        const int fbase = (kh * KW + kw) * OC;
        const float4 f = (float4)(LOADF(filter, fbase + oc.x), LOADF(filter, fbase + oc.y),
                                  LOADF(filter, fbase + oc.z), LOADF(filter, fbase + oc.w));
#pragma unroll
        for (int p = 0; p < WPT_W; ++p) {
          const int iw = iw0 + p * SW + kw * DW;
          const int pix = (rbase + clamp(iw, 0, W - 1)) * C;
          const float4 x = (float4)(LOADF(in, pix + ic.x), LOADF(in, pix + ic.y),
                                    LOADF(in, pix + ic.z), LOADF(in, pix + ic.w));
          acc[p] = (uint)iw < (uint)W ? mad(x, f, acc[p]) : acc[p];  // padded: skipped
        }
      }
    }
#pragma unroll
    for (int p = 0; p < WPT_W; ++p) {
      if (ow0 + p >= OW) break;
      const float4 v = SLOPED_LANES(ACTIVATE(acc[p], act_min, act_max), oc);
      const int obase = (row * OW + ow0 + p) * OC;
      STOREF(v.x, out, obase + oc0);
      if (oc0 + 1 < OC) STOREF(v.y, out, obase + oc0 + 1);
      if (oc0 + 2 < OC) STOREF(v.z, out, obase + oc0 + 2);
      if (oc0 + 3 < OC) STOREF(v.w, out, obase + oc0 + 3);
    }
  }
}
