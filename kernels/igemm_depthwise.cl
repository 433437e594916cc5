// The implicit GEMM's A computed where its tiles load it (included by conv2d_implicit_gemm.cl,
// after fetch_im2col and the affine's macros): a folded depthwise's output, and the expand
// before that depthwise; FETCH_A, the tile's A loads either way.
//
// DW_A (AttachDepthwise): a 1x1 convolution whose input is a depthwise convolution's output
//   (depth multiplier 1), that tensor never written: the geometry arguments are the depthwise's
//   (its input, filter size, strides, dilations, padding; OC the 1x1's), K = C, and A[m][k] is
//   the depthwise's output at pixel m, channel k: bias plus its taps, clamped, computed where the
//   tile loads it. The 1x1's filter is [OC][C]; -DDW_KH, -DDW_KW are the depthwise's filter size
//   (its loops unroll; KH, KW are not read). Its buffers: T dw_f [KH][KW][C], float dw_bias [C];
//   its clamp dw_min, dw_max.
//
// EXPAND_A (with DW_A; fusion/attach.h's AttachDepthwise): the depthwise's input is itself a 1x1
//   convolution's output (the expand of an inverted-residual block), never written: `in` is that
//   convolution's input [N][H][W][EC], and each depthwise tap computes its C channels there
//   (bias, EC products, clamped) instead of loading them: the whole block is one launch. Its
//   buffers: T ex_f [C][EC], float ex_bias [C]; its EC and clamp ex_min, ex_max. Worth it where
//   launches cost more than the taps' repeated products (ExpandFoldPays).

#ifdef EXPAND_A
#define EX_PARAM                                                                         \
  , int EC, __global const T *restrict ex_f, __global const float *restrict ex_bias, float ex_min, \
      float ex_max
#define EX_PASS , EC, ex_f, ex_bias, ex_min, ex_max
#define IN_C EC  // channels of `in`
// The expand's outputs at channels k..k + 3 (vec) or k of the pixel starting at element p of
// `in`: its bias plus EC products, clamped as its own kernel clamps (a NaN kept).
static inline float4 expand4(__global const T* restrict in, int p, int k, int C EX_PARAM) {
  float4 v = vload4(0, ex_bias + k);
  if ((EC & 3) == 0) {
    for (int c = 0; c < EC; c += 4) {
      const float4 x = LOADF4(in, (p + c) >> 2);
      v.x += dot(x, LOADF4(ex_f, (k * EC + c) >> 2));
      v.y += dot(x, LOADF4(ex_f, ((k + 1) * EC + c) >> 2));
      v.z += dot(x, LOADF4(ex_f, ((k + 2) * EC + c) >> 2));
      v.w += dot(x, LOADF4(ex_f, ((k + 3) * EC + c) >> 2));
    }
  } else {
    for (int c = 0; c < EC; ++c) {
      const float x = LOADF(in, p + c);
      v += x * (float4)(LOADF(ex_f, k * EC + c), LOADF(ex_f, (k + 1) * EC + c),
                        LOADF(ex_f, (k + 2) * EC + c), LOADF(ex_f, (k + 3) * EC + c));
    }
  }
  v = select(v, (float4)(ex_min), v < ex_min);
  return select(v, (float4)(ex_max), v > ex_max);
}
static inline float expand1(__global const T* restrict in, int p, int k, int C EX_PARAM) {
  float v = ex_bias[k];
  for (int c = 0; c < EC; ++c) v += LOADF(in, p + c) * LOADF(ex_f, k * EC + c);
  return CLAMP_KEEP_NAN(v, ex_min, ex_max);
}
#define DW_IN4(p, k) expand4(in, (p), (k), C EX_PASS)
#define DW_IN1(p, k) expand1(in, (p), (k), C EX_PASS)
#else
#define EX_PARAM
#define EX_PASS
#define IN_C CPITCH  // C, or the pixel pitch (IN_PITCH)
#define DW_IN4(p, k) LOADF4(in, ((p) + (k)) >> 2)
#define DW_IN1(p, k) LOADF(in, (p) + (k))
#endif

#ifdef DW_A
// A tap's pixel of the input, clamped into the image (a load that is always in bounds), and
// whether it lies inside, where the depthwise's zero padding does not.
#define TAP_INSIDE(ih, iw) ((uint)(ih) < (uint)H && (uint)(iw) < (uint)W)
#define TAP_PIXEL(ih, iw) (clamp((ih), 0, H - 1) * W + clamp((iw), 0, W - 1))
#define DW_PARAM                                                                      \
  , __global const T *restrict dw_f, __global const float *restrict dw_bias, float dw_min, \
      float dw_max EX_PARAM
#define DW_PASS , dw_f, dw_bias, dw_min, dw_max EX_PASS
// The depthwise's outputs at channel k (four from k with vec) of the work-item's pixels (see
// fetch_im2col), clamped (a NaN kept, as its own kernel does); zero past K (= C).
static inline void fetch_depthwise(__global const T* restrict in, float* r, const int* pix_base,
                                   const int* pix_ih, const int* pix_iw, int k, int K, int C,
                                   int KH, int KW, int DH, int DW, int H, int W, bool vec,
                                   __global const T* restrict dw_f,
                                   __global const float* restrict dw_bias, float lo,
                                   float hi EX_PARAM) {
  // A column past the split's end is zero and loads nothing (past C its taps would read beyond
  // the input's last pixel).
  if (k >= K) {
#pragma unroll
    for (int i = 0; i < NREG(TILE_M); ++i) r[i] = 0.0f;
    return;
  }
  if (vec) {
    const float4 b = vload4(0, dw_bias + k);
#pragma unroll
    for (int i = 0; i < NV_OF(TILE_M); ++i) {
      float4 v = b;
#pragma unroll
      for (int kh = 0; kh < KH; ++kh) {
        const int ih = pix_ih[i] + kh * DH;
#ifdef EXPAND_A
        if ((uint)ih >= (uint)H) continue;
#endif
#pragma unroll
        for (int kw = 0; kw < KW; ++kw) {
          const int iw = pix_iw[i] + kw * DW;
#ifdef EXPAND_A
          if ((uint)iw < (uint)W)
            v += DW_IN4(pix_base[i] + (ih * W + iw) * IN_C, k) *
                 LOADF4(dw_f, ((kh * KW + kw) * C + k) >> 2);
#else
          // Every tap loads, from its pixel clamped into the image, and a padding tap adds
          // nothing: loads outside a branch issue together instead of one after another.
          const float4 x = DW_IN4(pix_base[i] + (TAP_PIXEL(ih, iw)) * IN_C, k);
          const float4 f = LOADF4(dw_f, ((kh * KW + kw) * C + k) >> 2);
          if (TAP_INSIDE(ih, iw)) v += x * f;
#endif
        }
      }
      // Clamped as the depthwise kernel clamps (CLAMP_KEEP_NAN): a NaN passes.
      v = select(v, (float4)(lo), v < lo);
      v = select(v, (float4)(hi), v > hi);
      v = DW_ACTIVATE(v);
      r[4 * i] = v.x;
      r[4 * i + 1] = v.y;
      r[4 * i + 2] = v.z;
      r[4 * i + 3] = v.w;
    }
  } else {
    const float b = dw_bias[k];
#pragma unroll
    for (int i = 0; i < NS_OF(TILE_M); ++i) {
      float v = b;
#pragma unroll
      for (int kh = 0; kh < KH; ++kh) {
        const int ih = pix_ih[i] + kh * DH;
#ifdef EXPAND_A
        if ((uint)ih >= (uint)H) continue;
#endif
#pragma unroll
        for (int kw = 0; kw < KW; ++kw) {
          const int iw = pix_iw[i] + kw * DW;
#ifdef EXPAND_A
          if ((uint)iw < (uint)W)
            v += DW_IN1(pix_base[i] + (ih * W + iw) * IN_C, k) *
                 LOADF(dw_f, (kh * KW + kw) * C + k);
#else
          const float x = DW_IN1(pix_base[i] + (TAP_PIXEL(ih, iw)) * IN_C, k);
          const float f = LOADF(dw_f, (kh * KW + kw) * C + k);
          if (TAP_INSIDE(ih, iw)) v += x * f;
#endif
        }
      }
      r[i] = DW_ACTIVATE(CLAMP_KEEP_NAN(v, lo, hi));
    }
  }
}
#define FETCH_A(k)                                                                           \
  fetch_depthwise(in, ra, pix_base, pix_ih, pix_iw, (k), kend, C, DW_KH, DW_KW, DH, DW, H, W, \
                  vec_a, dw_f, dw_bias, dw_min, dw_max EX_PASS)
#else
// The A of the plain convolution: its input, or the affine's; its pixels CPITCH apart.
#define DW_PARAM AFFINE_PARAM IN_PITCH_PARAM
#define DW_PASS AFFINE_PASS IN_PITCH_PASS
#define FETCH_A(k)                                                                      \
  fetch_im2col(in, ra, pix_base, pix_ih, pix_iw, (k), kend, C, KW, DH, DW, H, W, vec_a \
               AFFINE_PASS IN_PITCH_PASS)
#endif
