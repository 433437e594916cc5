// Winograd F(4x4, 3x3) for stride-1, dilation-1 CONV_2D (NHWC, OHWI filter): 6x6 input tiles,
// 36 transformed positions, 4x4 outputs per tile (4x fewer multiplies than direct for 3x3, vs
// F(2x2, 3x3)'s 2.25x, at some precision cost). Transforms only: the batched GEMM is winograd_gemm
// from conv2d_winograd.cl, run with NB = 36. Needs common.cl; the 1-D transforms are in
// winograd4_transforms.cl (shared with the one-kernel conv2d_winograd4_fused.cl).
//
// Filters larger than 3x3 (KH, KW in 3..9) are cut into SH x SW = ceil(KH/3) x ceil(KW/3)
// zero-padded 3x3 sub-filters: sub-filter s = (a, b) holds taps [3a, 3a+3) x [3b, 3b+3), and the
// convolution is the sum of the sub-filters' 3x3 convolutions over the input shifted by (3a, 3b).
// The sum over s rides in the GEMM's reduction: V and U carry C' = SS * C columns (s-major), so
// a 5x5 conv costs 4 x 36 multiplies per 16 outputs instead of 400, a 7x7 or 9x9 9 x 36 instead
// of 784 or 1296.
//
// Output tile (th, tw) covers output rows 4*th..4*th+3, columns 4*tw..4*tw+3, and, for
// sub-filter (a, b), reads the 6x6 input patch with corner (4*th - PT + 3a, 4*tw - PL + 3b);
// TH = ceil(OH / 4), TW = ceil(OW / 4). A pass handles tile rows
// [tile_row_start, tile_row_start + tile_rows) of every image: P = N * tile_rows * TW tiles,
// tile p = (n * tile_rows + r) * TW + tw.
// Transformed buffers (storage TT: T, or float with -DTRANSFORMED_FLOAT; xi = 6 * i + j):
//   U  [36][OC][C']   filter,  U[xi][oc][s*C + c] = (G g_s G^T)[i][j]   (made once)
//   V  [36][P][C']    input,   V[xi][p][s*C + c] = (B^T d_s B)[i][j]
//   Mo [36][P][OC]    product, from winograd_gemm (conv2d_winograd.cl) with K = C', global (., 36)
// Matrices (interpolation points 0, 1, -1, 2, -2, inf):
//   B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1]
//   G   = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1]
//   A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1]
//
// winograd_f4_filter_transform(filter, U, C, OC, KH, KW)
//   __global const T* filter [OC][KH][KW][C]; __global TT* U [36][OC][C']; int C, OC, KH, KW
//   NDRange: 1-D, global >= OC * C' (any rounding), any local size.
//
// winograd_f4_input_transform(in, V, N, H, W, C, OH, OW, PT, PL, tile_row_start, tile_rows,
//                             KH, KW)
//   __global const T* in [N][H][W][C]; __global TT* V [36][P][C']
//   NDRange: 1-D, global >= P * C' (any rounding), any local size.
//
// winograd_f4_output_transform(Mo, bias, out, N, OH, OW, OC, tile_row_start, tile_rows,
//                              act_min, act_max, in, filter, H, W, C, KH, KW, PT, PL[, residual]
//                              [, slopes])
//   __global const TT* Mo [36][P][OC]; __global const float* bias [OC];
//   __global T* out [N][OH][OW][OC]; in, the OHWI filter and the input geometry for the tiles
//   computed directly (not all finite: store_winograd_tile, common.cl); residual
//   (HAS_RESIDUAL): a fused ADD's other operand, laid out like out; slopes (CHANNEL_SLOPES,
//   common.cl): a folded PRELU's, one per output channel
//   NDRange: 1-D, global >= P * OC (any rounding), any local size.
//
// Defines: TRANSFORMED_FLOAT (off): U, V, Mo are float buffers instead of T. With STORAGE_HALF,
// pass it (to winograd_gemm's build too): half intermediates lose up to ~8e-2 of the output range
// here (measured), float ones ~4e-4.

#ifdef TRANSFORMED_FLOAT
#define TT float
#define LOADT(p, i) ((p)[(i)])
#define STORET(v, p, i) ((p)[(i)] = (v))
#define LOADT4(p, i4) vload4((i4), (p))
#else
#define TT T
#define LOADT(p, i) LOADF(p, i)
#ifdef STORAGE_HALF  // Inf past the half range: see conv2d_winograd.cl
#define STORET(v, p, i) vstore_half((v), (i), (p))
#else
#define STORET(v, p, i) STOREF(v, p, i)
#endif
#define LOADT4(p, i4) LOADF4(p, i4)
#endif

#include "winograd4_transforms.cl"

__kernel void winograd_f4_filter_transform(__global const T* restrict filter,
                                           __global TT* restrict U, int C, int OC, int KH, int KW OVERFLOW_PARAM) {
  const int SW = WINO_SUBS(KW);
  const int SS = WINO_SUBS(KH) * SW;
  const int idx = get_global_id(0);
  if (idx >= OC * SS * C) return;
  const int c = idx % C;
  const int s = (idx / C) % SS;
  const int oc = idx / (C * SS);
  float u[36];
  winograd_f4_filter_tile(filter, oc, c, 3 * (s / SW), 3 * (s % SW), KH, KW, C, u);
#pragma unroll
  for (int xi = 0; xi < 36; ++xi) STORET(u[xi], U, (xi * OC + oc) * (SS * C) + s * C + c);
}

__kernel void winograd_f4_input_transform(__global const T* restrict in, __global TT* restrict V,
                                          int N, int H, int W, int C, int OH, int OW, int PT,
                                          int PL, int tile_row_start, int tile_rows, int KH,
                                          int KW OVERFLOW_PARAM) {
  const int SW = WINO_SUBS(KW);
  const int SS = WINO_SUBS(KH) * SW;
  const int TW = (OW + 3) / 4;
  const int P = N * tile_rows * TW;
  const int idx = get_global_id(0);
  if (idx >= P * SS * C) return;
  const int c = idx % C;
  const int sub = (idx / C) % SS;
  const int p = idx / (C * SS);
  const int tw = p % TW;
  const int t = p / TW;
  const int n = t / tile_rows;
  const int ih0 = (tile_row_start + t % tile_rows) * 4 - PT + 3 * (sub / SW);
  const int iw0 = tw * 4 - PL + 3 * (sub % SW);

  float d[36], s[36], v[36];
#pragma unroll
  for (int i = 0; i < 6; ++i) {
    const int ih = ih0 + i;
#pragma unroll
    for (int j = 0; j < 6; ++j) {
      const int iw = iw0 + j;
      d[6 * i + j] = ((uint)ih < (uint)H && (uint)iw < (uint)W)
                         ? LOADF(in, ((n * H + ih) * W + iw) * C + c)
                         : 0.0f;
    }
  }
#pragma unroll
  for (int j = 0; j < 6; ++j) winograd_f4_bt(d + j, 6, s + j, 6);  // s = B^T d
#pragma unroll
  for (int i = 0; i < 6; ++i) winograd_f4_bt(s + 6 * i, 1, v + 6 * i, 1);  // v = s B
#pragma unroll
  for (int xi = 0; xi < 36; ++xi) STORET(v[xi], V, (xi * P + p) * (SS * C) + sub * C + c);
}

__kernel void winograd_f4_output_transform(__global const TT* restrict Mo,
                                           __global const float* restrict bias,
                                           __global T* restrict out, int N, int OH, int OW, int OC,
                                           int tile_row_start, int tile_rows, float act_min,
                                           float act_max WINO_DIRECT_PARAM
                                               RESIDUAL_PARAM SLOPES_PARAM OVERFLOW_PARAM) {
  const int TW = (OW + 3) / 4;
  const int P = N * tile_rows * TW;
  const int idx = get_global_id(0);
  if (idx >= P * OC) return;
  const int oc = idx % OC;
  const int p = idx / OC;
  const int tw = p % TW;
  const int t = p / TW;
  const int n = t / tile_rows;
  const int oh0 = (tile_row_start + t % tile_rows) * 4;
  const int ow0 = tw * 4;

  float m[36];
#pragma unroll
  for (int xi = 0; xi < 36; ++xi) m[xi] = LOADT(Mo, (xi * P + p) * OC + oc);
  winograd_f4_output_tile(m, bias[oc], out, n, oh0, ow0, OH, OW, OC, oc, act_min,
                          act_max WINO_DIRECT_PASS RESIDUAL_PASS SLOPES_PASS OVERFLOW_PASS);
}
