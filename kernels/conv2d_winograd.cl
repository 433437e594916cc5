// Winograd F(2x2, 3x3) for 3x3, stride 1, dilation 1 CONV_2D (NHWC, OHWI filter): filter
// transform (once, at init), input transform, 16 batched GEMMs, output transform (+ bias, clamp).
// The batched GEMM between the transforms is winograd_gemm.cl's, shared with
// conv2d_winograd4.cl: a program of its own, so building the transforms compiles no GEMM. Needs
// common.cl.
//
// Tiles: output tile (th, tw) covers output rows 2*th..2*th+1, columns 2*tw..2*tw+1, and reads the
// 4x4 input patch whose corner is (2*th - PT, 2*tw - PL); TH = ceil(OH / 2), TW = ceil(OW / 2).
// Work is split by rows of tiles: one pass handles tile rows [tile_row_start, tile_row_start +
// tile_rows) of every image, P = N * tile_rows * TW tiles, tile p = (n * tile_rows + r) * TW + tw
// (tile row tile_row_start + r). Passes over the whole of [0, TH) give the full output; the host
// picks tile_rows so that the transformed buffers below fit the device's max allocation.
// Transformed buffers (storage TT: T, or float with -DTRANSFORMED_FLOAT; xi = 4 * i + j is the
// position in the 4x4 tile):
//   U  [16][OC][C]   filter,  U[xi] = (G g G^T)[i][j]   (made once; independent of the split)
//   V  [16][P][C]    input,   V[xi] = (B^T d B)[i][j]
//   Mo [16][P][OC]   product, Mo[xi] = V[xi] * U[xi]^T
//
// winograd_f2_filter_transform(filter, U, C, OC)
//   __global const T* filter [OC][3][3][C]; __global TT* U [16][OC][C]; int C, OC
//   NDRange: 1-D, global >= OC * C (any rounding), any local size.
//
// winograd_f2_input_transform(in, V, N, H, W, C, OH, OW, PT, PL, tile_row_start, tile_rows)
//   __global const T* in [N][H][W][C]; __global TT* V [16][P][C]; ints as named (OH, OW: the
//   conv's output size; taps outside the input read zero, so SAME/VALID are just PT/PL and OH/OW)
//   NDRange: 1-D, global >= P * C (any rounding), any local size.
//
// winograd_gemm, the batched GEMM Mo[xi] = V[xi] * U[xi]^T, is in winograd_gemm.cl.
//
// winograd_f2_output_transform(Mo, bias, out, N, OH, OW, OC, tile_row_start, tile_rows,
//                              act_min, act_max, in, filter, H, W, C, KH, KW, PT, PL[, residual]
//                              [, slopes])
//   __global const TT* Mo [16][P][OC]; __global const float* bias [OC]; __global T* out
//   [N][OH][OW][OC] (the whole output; a pass writes its own rows); float act_min, act_max;
//   in and the OHWI filter with the input geometry: a tile whose outputs are not all finite is
//   computed directly from them (store_winograd_tile, common.cl);
//   residual (HAS_RESIDUAL): a fused ADD's other operand, laid out like out; slopes
//   (CHANNEL_SLOPES, common.cl): a folded PRELU's, one per output channel
//   NDRange: 1-D, global >= P * OC (any rounding), any local size.
//
// Define for all three kernels and winograd_gemm: TRANSFORMED_FLOAT (off): U, V, Mo are float
// buffers instead of T. With STORAGE_HALF, F(4x4) needs it; F(2x2)'s half intermediates cost ~1e-3 relative (up to
// ~5e-3 of the output range measured). Every kernel of one convolution must agree on it.

// Storage of the transformed buffers U, V, Mo: T by default; float with -DTRANSFORMED_FLOAT.
#ifdef TRANSFORMED_FLOAT
#define TT float
#define LOADT(p, i) ((p)[(i)])
#define STORET(v, p, i) ((p)[(i)] = (v))
#define LOADT4(p, i4) vload4((i4), (p))
#else
#define TT T
#define LOADT(p, i) LOADF(p, i)
// Half intermediates past the range become Inf, not +-65504 as STOREF's would: the output
// transform then sees a non-finite tile and computes it directly.
#ifdef STORAGE_HALF
#define STORET(v, p, i) vstore_half((v), (i), (p))
#else
#define STORET(v, p, i) STOREF(v, p, i)
#endif
#define LOADT4(p, i4) LOADF4(p, i4)
#endif

// ---- filter transform ------------------------------------------------------------------------

// y = G x for one 3-vector (G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1]); strides in elements.
static inline void winograd_f2_g(const float* x, int sx, float* y, int sy) {
  const float a = 0.5f * (x[0] + x[2 * sx]);
  const float b = 0.5f * x[sx];
  y[0] = x[0];
  y[sy] = a + b;
  y[2 * sy] = a - b;
  y[3 * sy] = x[2 * sx];
}

__kernel void winograd_f2_filter_transform(__global const T* restrict filter,
                                           __global TT* restrict U, int C, int OC OVERFLOW_PARAM) {
  const int idx = get_global_id(0);
  if (idx >= OC * C) return;
  const int c = idx % C;
  const int oc = idx / C;
  float g[9], t[12], u[16];
#pragma unroll
  for (int k = 0; k < 9; ++k) g[k] = LOADF(filter, (oc * 9 + k) * C + c);
#pragma unroll
  for (int j = 0; j < 3; ++j) winograd_f2_g(g + j, 3, t + j, 3);  // t[4][3] = G g
#pragma unroll
  for (int i = 0; i < 4; ++i) winograd_f2_g(t + 3 * i, 1, u + 4 * i, 1);  // u[4][4] = t G^T
#pragma unroll
  for (int xi = 0; xi < 16; ++xi) STORET(u[xi], U, (xi * OC + oc) * C + c);
}

// ---- input transform -------------------------------------------------------------------------

// y = B^T x for one 4-vector (B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]).
static inline void winograd_f2_bt(const float* x, int sx, float* y, int sy) {
  y[0] = x[0] - x[2 * sx];
  y[sy] = x[sx] + x[2 * sx];
  y[2 * sy] = x[2 * sx] - x[sx];
  y[3 * sy] = x[sx] - x[3 * sx];
}

__kernel void winograd_f2_input_transform(__global const T* restrict in, __global TT* restrict V,
                                          int N, int H, int W, int C, int OH, int OW, int PT,
                                          int PL, int tile_row_start, int tile_rows OVERFLOW_PARAM) {
  const int TW = (OW + 1) / 2;
  const int P = N * tile_rows * TW;
  const int idx = get_global_id(0);
  if (idx >= P * C) return;
  const int c = idx % C;
  const int p = idx / C;
  const int tw = p % TW;
  const int t = p / TW;
  const int n = t / tile_rows;
  const int ih0 = (tile_row_start + t % tile_rows) * 2 - PT;
  const int iw0 = tw * 2 - PL;

  float d[16], s[16], v[16];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int ih = ih0 + i;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int iw = iw0 + j;
      d[4 * i + j] = ((uint)ih < (uint)H && (uint)iw < (uint)W)
                         ? LOADF(in, ((n * H + ih) * W + iw) * C + c)
                         : 0.0f;
    }
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) winograd_f2_bt(d + j, 4, s + j, 4);  // s = B^T d
#pragma unroll
  for (int i = 0; i < 4; ++i) winograd_f2_bt(s + 4 * i, 1, v + 4 * i, 1);  // v = s B
#pragma unroll
  for (int xi = 0; xi < 16; ++xi) STORET(v[xi], V, (xi * P + p) * C + c);
}

// ---- output transform ------------------------------------------------------------------------

// y = A^T x for one 4-vector (A^T = [1 1 1 0; 0 1 -1 -1]).
static inline void winograd_f2_at(const float* x, int sx, float* y, int sy) {
  y[0] = x[0] + x[sx] + x[2 * sx];
  y[sy] = x[sx] - x[2 * sx] - x[3 * sx];
}

__kernel void winograd_f2_output_transform(__global const TT* restrict Mo,
                                           __global const float* restrict bias,
                                           __global T* restrict out, int N, int OH, int OW, int OC,
                                           int tile_row_start, int tile_rows, float act_min,
                                           float act_max WINO_DIRECT_PARAM
                                               RESIDUAL_PARAM SLOPES_PARAM OVERFLOW_PARAM) {
  const int TW = (OW + 1) / 2;
  const int P = N * tile_rows * TW;
  const int idx = get_global_id(0);
  if (idx >= P * OC) return;
  const int oc = idx % OC;
  const int p = idx / OC;
  const int tw = p % TW;
  const int t = p / TW;
  const int n = t / tile_rows;
  const int oh0 = (tile_row_start + t % tile_rows) * 2;
  const int ow0 = tw * 2;

  float m[16], s[8], y[4];
#pragma unroll
  for (int xi = 0; xi < 16; ++xi) m[xi] = LOADT(Mo, (xi * P + p) * OC + oc);
#pragma unroll
  for (int j = 0; j < 4; ++j) winograd_f2_at(m + j, 4, s + j, 4);  // s[2][4] = A^T m
#pragma unroll
  for (int i = 0; i < 2; ++i) winograd_f2_at(s + 4 * i, 1, y + 2 * i, 1);  // y[2][2] = s A
  const float bv = bias[oc];
  store_winograd_tile(y, 2, bv, out, n, oh0, ow0, OH, OW, OC, oc, act_min,
                      act_max WINO_DIRECT_PASS RESIDUAL_PASS SLOPES_PASS OVERFLOW_PASS);
}
