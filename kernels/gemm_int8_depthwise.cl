// The int8 GEMM's A computed where its tiles load it (included by gemm_int8.cl, after its
// argument macros and pack4): a folded depthwise, and the expand before that depthwise.
//
// A depthwise convolution folded in as A (-DDW_A, AttachDepthwise; depth multiplier 1, C % 4
//   == 0, K = C): `a` is the depthwise's NHWC input and A[m][k] its requantized output at pixel m,
//   channel k, computed where the tile loads it: the int8 tensor between the two convolutions is
//   never written, and the pair is one launch. Each tile of k carries the depthwise's work, so
//   K splits down to one tile per group (Int8GemmSplits). The geometry arguments are the
//   depthwise's (as with IM2COL; its filter's size is -DDW_KH and -DDW_KW, so that its loops
//   unroll); a_zero is its output zero point. Its buffers: char dw_f [KH][KW][C], int dw_bias
//   [C], int2 dw_stage [C]; its integers (prm) quant_output's.
//
// EXPAND_A (with DW_A; AttachExpand): the depthwise's input is a 1x1 convolution's output (an
//   inverted-residual block's expand), never written: `a` is that convolution's input [N][H][W]
//   [EC] (EC % 4 == 0) and each depthwise tap computes its four channels there, bytes as the
//   expand's own GEMM stores them: int32 sums of EC products plus its bias (its input zero point
//   folded in), requantized. Its buffers: int ex_b [C][EC / 4] (packed as B), int ex_bias [C],
//   int2 ex_stage [C]. -DEX_C=EC unrolls the expand's loop.
//   -DDW_TAPS_TOGETHER (always with EXPAND_A): the taps load through clamped addresses, not
//   branches (dw_a4).

#ifdef EXPAND_A
// The expand's output bytes at channels c..c + 3 of the pixel starting at byte p of `in`,
// packed: what its own GEMM would have stored there. With -DEX_C (= EC, known when the program
// builds) the loop unrolls, so its loads issue together: at batch 1 these chains, not the
// arithmetic, set the kernel's time.
static inline int expand4(__global const char* in, int p, int c EX_ARGS) {
#ifdef EX_C
  const int ec4 = EX_C >> 2;
#else
  const int ec4 = EC >> 2;
#endif
  __global const int* x = (__global const int*)in + (p >> 2);
  __global const int* b = ex_b + c * ec4;
  int s0 = ex_bias[c], s1 = ex_bias[c + 1], s2 = ex_bias[c + 2], s3 = ex_bias[c + 3];
#pragma unroll
  for (int k = 0; k < ec4; ++k) {
    const int xv = x[k];
    s0 = dot4(xv, b[k], s0);
    s1 = dot4(xv, b[ec4 + k], s1);
    s2 = dot4(xv, b[2 * ec4 + k], s2);
    s3 = dot4(xv, b[3 * ec4 + k], s3);
  }
  return pack4(quant_output(s0, ex_stage[c], c, ex_up_below, ex_zero, ex_lo, ex_hi),
               quant_output(s1, ex_stage[c + 1], c + 1, ex_up_below, ex_zero, ex_lo, ex_hi),
               quant_output(s2, ex_stage[c + 2], c + 2, ex_up_below, ex_zero, ex_lo, ex_hi),
               quant_output(s3, ex_stage[c + 3], c + 3, ex_up_below, ex_zero, ex_lo, ex_hi));
}
#define DW_X4(p, c) expand4(in, (p), (c)EX_PASS)
#else
#define DW_X4(p, c) ((__global const int*)in)[((p) + (c)) >> 2]
#endif

#ifdef DW_A
// The depthwise's output bytes at channels c..c + 3 of the pixel whose tap (0, 0) is at (ih0,
// iw0) of the image starting at `base`, packed: int32 sums of (x - in_zero) * filter plus the
// bias, requantized per channel as depthwise_conv2d_int8.cl does (taps outside add nothing).
static inline int dw_a4(__global const char* in, int base, int ih0, int iw0, int c, int H, int W,
                        int C, int KH, int KW, int DH, int DW, __global const char* f,
                        __global const int* bias, __global const int2* stage, int in_zero,
                        int up_below, int out_zero, int lo, int hi EX_ARGS) {
  int4 acc = vload4(0, bias + c);
#if defined(DW_TAPS_TOGETHER) || defined(EXPAND_A)
  // Every tap reads a clamped, in-bounds pixel and a tap outside the input reads as in_zero
  // (adding nothing): no branch between the loads, so the taps' loads issue together. For
  // layers too small to fill the device, whose time is these chains; in large ones the loads
  // held together cost registers and so resident work-items (Xception int8 ran slower).
  const int zero4 = pack4(in_zero, in_zero, in_zero, in_zero);
#pragma unroll
  for (int ky = 0; ky < KH; ++ky) {
    const int ih = ih0 + ky * DH;
    const bool in_h = (uint)ih < (uint)H;
    const int ihc = clamp(ih, 0, H - 1);
#pragma unroll
    for (int kx = 0; kx < KW; ++kx) {
      const int iw = iw0 + kx * DW;
      const int iwc = clamp(iw, 0, W - 1);
      const int xv = DW_X4(base + (ihc * W + iwc) * IN_C, c);
      const int x = in_h && (uint)iw < (uint)W ? xv : zero4;
      const int w = ((__global const int*)f)[((ky * KW + kx) * C + c) >> 2];
      acc += (convert_int4(as_char4(x)) - in_zero) * convert_int4(as_char4(w));
    }
  }
#else
#pragma unroll
  for (int ky = 0; ky < KH; ++ky) {
    const int ih = ih0 + ky * DH;
    if ((uint)ih >= (uint)H) continue;
#pragma unroll
    for (int kx = 0; kx < KW; ++kx) {
      const int iw = iw0 + kx * DW;
      if ((uint)iw >= (uint)W) continue;
      const int x = DW_X4(base + (ih * W + iw) * IN_C, c);
      const int w = ((__global const int*)f)[((ky * KW + kx) * C + c) >> 2];
      acc += (convert_int4(as_char4(x)) - in_zero) * convert_int4(as_char4(w));
    }
  }
#endif
  return pack4(quant_output(acc.x, stage[c], c, up_below, out_zero, lo, hi),
               quant_output(acc.y, stage[c + 1], c + 1, up_below, out_zero, lo, hi),
               quant_output(acc.z, stage[c + 2], c + 2, up_below, out_zero, lo, hi),
               quant_output(acc.w, stage[c + 3], c + 3, up_below, out_zero, lo, hi));
}
#endif
