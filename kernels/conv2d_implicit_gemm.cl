// CONV_2D as an implicit GEMM: out[M = N*OH*OW][OC] = act(im2col(in)[M][K = KH*KW*C] *
// filter[OC][K]^T + bias), the im2col indices computed on the fly (no extra buffer). Any kernel
// size, stride, dilation and padding; NHWC input/output, OHWI filter (already the [OC][K] matrix).
// Needs common.cl.
//
// conv2d_implicit_gemm(in, out[, residual], prm, filter, bias[, dw_f, dw_bias][, ex_f, ex_bias]
//                      [, a_scale, a_shift]), or with -DPACKED (in, out[, residual], consts)
//   __global const T* in [N][H][W][C]; __global T* out [N][OH][OW][OC]; with HAS_RESIDUAL,
//   __global const T* residual [N][OH][OW][OC] (a fused ADD: out = act(conv + bias + residual));
//   __global const T* filter [OC][KH][KW][C]; __global const float* bias [OC] (zeros when the
//   model has none); __global const int* prm, the launch's scalars, read from memory rather than
//   set as arguments (NVIDIA's driver charges each argument of a launch on the host):
//   prm[0..7] with -DPACKED the byte offsets in `consts` of filter, bias, dw_f, dw_bias, ex_f,
//   ex_bias, a_scale, a_shift (prm itself at 0; a buffer absent: 0); [8..22] N, H, W, C, OH, OW,
//   OC, KH, KW, SH, SW, DH, DW, PT, PL (PT, PL the top/left padding; bottom/right padding is
//   implied by OH/OW: taps outside the input read zero); [23] k_per_split (SPLIT_K); then the
//   bits of floats: [24, 25] act_min, act_max; [26, 27] dw_min, dw_max (DW_A); [28] EC (an int),
//   [29, 30] ex_min, ex_max (EXPAND_A); [31..34] a_lo1, a_hi1, a_lo2, a_hi2 (A_AFFINE); [35] with
//   -DPACKED the offset of T slopes [OC] (CHANNEL_SLOPES, gemm_tiles.cl: the whole kernel applies
//   them, the split one leaves them to gemm_splitk_reduce, which takes them as an argument);
//   [36, 37] out_ldc, out_off (OUT_SLICE, gemm_tiles.cl: the whole kernel reads them, the reduce
//   takes them as arguments); [38] the input's pixel pitch (IN_PITCH, below).
//   src_cpp/ops/conv2d_implicit_gemm.cc's IgParam names them.
//   NDRange: 1-D. local = WG = (TILE_M / WPT_M) * (TILE_N / WPT_N) (reqd_work_group_size),
//            global = ceil(N * OH * OW / TILE_M) * ceil(OC / TILE_N) * WG.
//   A group computes a TILE_M (output pixels) x TILE_N (output channels) block, a work-item
//   WPT_M x WPT_N of it in registers (runs of VWM x VWN read from local memory as float4); the next
//   tile's global loads are issued before the math on the current one. Input loads are float4
//   along C when C % 4 == 0, scalar otherwise; stores float4 when OC % 4 == 0 and VWN == 4.
//   Defines: TILE_M (32), TILE_N (32), TILE_K (16), WPT_M (4), WPT_N (4), VWM (4), VWN (4),
//   LPAD (0): the defaults give 64 work-items per group. Constraints (#error): as in gemm.cl, plus
//   WG % TILE_K == 0. On an H200, TILE_M 128, TILE_N 64, WPT_M 8, WPT_N 4 is ~1.8x faster for
//   C, OC >= 64 (24 vs 14 TFLOP/s fp32); TILE_M 64, TILE_N 32, TILE_K 8 for C = 3..4 inputs.
//   SPLIT_K (off) builds conv2d_implicit_gemm_splitk and gemm_splitk_reduce instead.
//
// DW_A and EXPAND_A (a folded depthwise as A, and the expand before it):
//   igemm_depthwise.cl. A_AFFINE (per-channel nodes applied to each input element it loads):
//   gemm_affine.cl.

// Tile defaults (gemm_tiles.cl): the 32 x 32 x 16 tiles of 4 x 4 named above.
#include "gemm_tiles.cl"
#if GEMM_WG % TILE_K
#error "conv2d_implicit_gemm.cl: the work-group size must be a multiple of TILE_K"
#endif

// IN_PITCH (fusion/concat_chain.cc): the input's pixels lie CPITCH values apart (prm[38]), the
// first C channels of each pixel of a wider tensor; else C apart. Not with DW_A or EXPAND_A.
#ifdef IN_PITCH
#define IN_PITCH_PARAM , int CPITCH
#define IN_PITCH_PASS , CPITCH
#define IG_PITCH_READ const int CPITCH = prm[38];
#else
#define IN_PITCH_PARAM
#define IN_PITCH_PASS
#define IG_PITCH_READ
#define CPITCH C
#endif

// A row that does not exist (m >= M) gets this input row origin, so every tap of it fails the
// bounds check and reads zero.
#define NO_ROW (-(1 << 29))


// The A (im2col) tile: rows = output pixels [m0, m0 + TILE_M), columns [k0, k0 + TILE_K). The
// work-item's element i is the pixel whose image offset and tap-(0, 0) input row/column are
// pix_base/pix_ih/pix_iw[i] (NO_ROW when the element or the pixel does not exist), at column k (the
// same for all its elements, WG being a multiple of TILE_K, so the k -> (kh, kw, c) split costs
// two divisions per tile, not per element). Taps outside the input and columns past K read zero.
static inline void fetch_im2col(__global const T* restrict in, float* r, const int* pix_base,
                                const int* pix_ih, const int* pix_iw, int k, int K, int C, int KW,
                                int DH, int DW, int H, int W, bool vec AFFINE_PARAM IN_PITCH_PARAM) {
  const int c = k % C;
  const int t = k / C;
  AFFINE_SETUP(c, vec)
  // Past the end of K, kh lands past KH; forcing the row out of range zero-fills the column.
  const int dh = (k < K) ? (t / KW) * DH : NO_ROW;
  const int dw = (t % KW) * DW;
  if (vec) {
#pragma unroll
    for (int i = 0; i < NV_OF(TILE_M); ++i) {
      const int ih = pix_ih[i] + dh;
      const int iw = pix_iw[i] + dw;
      float4 v = (float4)(0.0f);
      if ((uint)ih < (uint)H && (uint)iw < (uint)W) {
        v = LOADF4(in, (pix_base[i] + (ih * W + iw) * CPITCH + c) >> 2);
        AFFINE4(v);
      }
      r[4 * i] = v.x;
      r[4 * i + 1] = v.y;
      r[4 * i + 2] = v.z;
      r[4 * i + 3] = v.w;
    }
  } else {
#pragma unroll
    for (int i = 0; i < NS_OF(TILE_M); ++i) {
      const int ih = pix_ih[i] + dh;
      const int iw = pix_iw[i] + dw;
      r[i] = ((uint)ih < (uint)H && (uint)iw < (uint)W)
                 ? AFFINE1(LOADF(in, pix_base[i] + (ih * W + iw) * CPITCH + c))
                 : 0.0f;
    }
  }
}

#include "igemm_depthwise.cl"

// Accumulates columns [kbeg, kend) of K (kbeg a multiple of TILE_K) of the group's output tile
// into acc: the whole of K, or one split of it.
static inline void igemm_accumulate(__global const T* restrict in, __global const T* restrict filter,
                                    int N, int H, int W, int C, int OH, int OW, int OC, int KH,
                                    int KW, int SH, int SW, int DH, int DW, int PT, int PL,
                                    int kbeg, int kend, int m0, int n0, __local float* As,
                                    __local float* Bs, float acc[WPT_M][WPT_N] DW_PARAM) {
  const int lid = get_local_id(0);
  const int tx = lid % RT_N;
  const int ty = lid / RT_N;
  const int M = N * OH * OW;
#ifdef DW_A
  const int K = C;
#else
  const int K = KH * KW * C;
#endif
  // 4 neighbouring k of one tap are 4 neighbouring channels, at a 4-aligned offset
  const bool vec_a = ((C | CPITCH) & 3) == 0;
  const bool vec_b = (K & 3) == 0;

  // The output pixels whose im2col rows this work-item loads (see fetch_im2col).
  int pix_base[NS_OF(TILE_M)], pix_ih[NS_OF(TILE_M)], pix_iw[NS_OF(TILE_M)];
#pragma unroll
  for (int i = 0; i < NS_OF(TILE_M); ++i) {
    const int e = lid + i * GEMM_WG;
    const bool exists =
        vec_a ? (i < NV_OF(TILE_M) && e < TILE_M * TILE_K / 4) : e < TILE_M * TILE_K;
    const int m = m0 + (vec_a ? e / (TILE_K / 4) : e / TILE_K);
    pix_base[i] = 0;
    pix_ih[i] = NO_ROW;
    pix_iw[i] = 0;
    if (exists && m < M) {
      const int ow = m % OW;
      const int t = m / OW;
      pix_base[i] = (t / OH) * H * W * IN_C;
      pix_ih[i] = (t % OH) * SH - PT;
      pix_iw[i] = ow * SW - PL;
    }
  }

  zero_acc(acc);

  const int kstep = vec_a ? 4 * (lid % (TILE_K / 4)) : lid % TILE_K;
  float ra[NREG(TILE_M)], rb[NREG(TILE_N)];
  FETCH_A(kbeg + kstep);
  fetch_tile_nt(filter, rb, TILE_N, n0, OC, kbeg, K, kend, vec_b, lid, GEMM_TMAP);
  // Always double-buffered (one barrier per step; the tuned variant on the H200). The
  // single-buffered loop gave wrong results on PoCL 3.1 with 8-wide register runs (cause
  // not found; this loop is correct there and on NVIDIA), so it is not offered here.
  store_tile_nt(ra, As, TILE_M, vec_a, lid, 0);
  store_tile_nt(rb, Bs, TILE_N, vec_b, lid, GEMM_TMAP);
  barrier(CLK_LOCAL_MEM_FENCE);
  int cur = 0;
  for (int k0 = kbeg; k0 < kend; k0 += TILE_K) {
    const bool more = k0 + TILE_K < kend;
    if (more) {
      FETCH_A(k0 + TILE_K + kstep);
      fetch_tile_nt(filter, rb, TILE_N, n0, OC, k0 + TILE_K, K, kend, vec_b, lid, GEMM_TMAP);
    }
    tile_mma(As + cur * A_TILE, Bs + cur * B_TILE, tx, ty, acc);
    if (more) {
      store_tile_nt(ra, As + (cur ^ 1) * A_TILE, TILE_M, vec_a, lid, 0);
      store_tile_nt(rb, Bs + (cur ^ 1) * B_TILE, TILE_N, vec_b, lid, GEMM_TMAP);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    cur ^= 1;
  }
}

// The launch's constant buffers and scalars (prm, above): IG_CONSTS in the signature, IG_READ
// first in the body.
// common.cl's PRM_CONST / PRM_AT.
#ifdef PACKED
#define IG_CONSTS , __global const char* restrict consts
#endif
#ifdef DW_A
#define IG_DW_CONSTS PRM_CONST(T, dw_f) PRM_CONST(float, dw_bias)
#define IG_DW_READ                 \
  PRM_AT(T, dw_f, 2);               \
  PRM_AT(float, dw_bias, 3);        \
  const float dw_min = as_float(prm[26]), dw_max = as_float(prm[27]);
#else
#define IG_DW_CONSTS
#define IG_DW_READ
#endif
#ifdef EXPAND_A
#define IG_EX_CONSTS PRM_CONST(T, ex_f) PRM_CONST(float, ex_bias)
#define IG_EX_READ                 \
  PRM_AT(T, ex_f, 4);               \
  PRM_AT(float, ex_bias, 5);        \
  const int EC = prm[28];          \
  const float ex_min = as_float(prm[29]), ex_max = as_float(prm[30]);
#else
#define IG_EX_CONSTS
#define IG_EX_READ
#endif
#ifdef A_AFFINE
#define IG_AFFINE_CONSTS PRM_CONST(T, a_scale) PRM_CONST(T, a_shift)
#define IG_AFFINE_READ                                                   \
  PRM_AT(T, a_scale, 6);                                                  \
  PRM_AT(T, a_shift, 7);                                                  \
  const float a_lo1 = as_float(prm[31]), a_hi1 = as_float(prm[32]);      \
  const float a_lo2 = as_float(prm[33]), a_hi2 = as_float(prm[34]);
#else
#define IG_AFFINE_CONSTS
#define IG_AFFINE_READ
#endif
#ifdef CHANNEL_SLOPES
#define IG_SLOPES_CONSTS PRM_CONST(T, slopes)
#define IG_SLOPES_READ PRM_AT(T, slopes, 35);
#else
#define IG_SLOPES_CONSTS
#define IG_SLOPES_READ
#endif
#ifndef PACKED
#define IG_CONSTS                                                                             \
  , __global const int* restrict prm PRM_CONST(T, filter) PRM_CONST(float, bias) IG_DW_CONSTS \
        IG_EX_CONSTS IG_AFFINE_CONSTS IG_SLOPES_CONSTS
#endif
#define IG_READ                                                                            \
  PRM_FROM_CONSTS                                                                          \
  PRM_AT(T, filter, 0);                                                                    \
  PRM_AT(float, bias, 1);                                                                  \
  const int N = prm[8], H = prm[9], W = prm[10], C = prm[11], OH = prm[12], OW = prm[13];  \
  const int OC = prm[14], KH = prm[15], KW = prm[16], SH = prm[17], SW = prm[18];          \
  const int DH = prm[19], DW = prm[20], PT = prm[21], PL = prm[22], k_per_split = prm[23]; \
  const float act_min = as_float(prm[24]), act_max = as_float(prm[25]);                    \
  IG_DW_READ IG_EX_READ IG_AFFINE_READ IG_SLOPES_READ IG_PITCH_READ

#ifndef SPLIT_K  // a convolution runs whole or split: its program holds only those kernels
__kernel __attribute__((reqd_work_group_size(GEMM_WG, 1, 1))) void conv2d_implicit_gemm(
    __global const T* restrict in,
    __global T* restrict out RESIDUAL_PARAM IG_CONSTS OVERFLOW_PARAM) {
  IG_READ
  (void)k_per_split;
  __local float As[2 * TILE_K][TILE_M + LPAD] __attribute__((aligned(16)));
  __local float Bs[2 * TILE_K][TILE_N + LPAD] __attribute__((aligned(16)));
  const int lid = get_local_id(0);
  const int2 o = group_tile_origin(OC);
  float acc[WPT_M][WPT_N];
#ifdef DW_A
  const int K = C;
#else
  const int K = KH * KW * C;
#endif
  igemm_accumulate(in, filter, N, H, W, C, OH, OW, OC, KH, KW, SH, SW, DH, DW, PT, PL, 0, K, o.x,
                   o.y, &As[0][0], &Bs[0][0], acc DW_PASS);
#ifdef OUT_SLICE
  const int out_ldc = prm[36], out_off = prm[37];  // IgParam's kOutSlice
#endif
  store_output_tile(acc, bias, out, N * OH * OW, OC, o.x, o.y, lid % RT_N, lid / RT_N, act_min,
                    act_max RESIDUAL_PASS SLOPES_PASS OUT_SLICE_PASS OVERFLOW_PASS);
}
#else

// Split-K: batch-1 layers on small maps (a 7x7 output, K in the thousands) give a few output
// tiles, so most compute units would idle while each group walks the whole of K. Split z =
// get_group_id(1) sums columns [z * k_per_split, (z + 1) * k_per_split) of K into
// P[z][M][OC] (float, no bias); gemm_splitk_reduce adds the splits, the bias and the activation.
// With -DSPLIT_K_LAST the program also has conv2d_implicit_gemm_splitk_last, which adds them
// itself: the split of each tile that counts itself last stores the tile (one launch, where a
// host-bound invoke feels each; conv2d_implicit_gemm_splitk.cl). A partition runs one form or the
// other (runtime/launch_forms.h).
#define SPLITK_KERNEL conv2d_implicit_gemm_splitk
#include "conv2d_implicit_gemm_splitk.cl"
#undef SPLITK_KERNEL
#ifdef SPLIT_K_LAST
#define SPLITK_KERNEL conv2d_implicit_gemm_splitk_last
#define SPLITK_STORES_OUTPUT
#include "conv2d_implicit_gemm_splitk.cl"
#undef SPLITK_STORES_OUTPUT
#undef SPLITK_KERNEL
#endif
#endif  // SPLIT_K
