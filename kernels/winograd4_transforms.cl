// Winograd F(4x4, 3x3) pieces shared by conv2d_winograd4.cl (transform kernels around a batched
// GEMM) and conv2d_winograd4_fused.cl (one kernel): the 1-D transforms of one 6-vector (or
// 3-vector for G), one sub-filter's G g G^T, and one tile's A^T m A with its store. Matrices and
// the sub-filter cut of larger filters: see conv2d_winograd4.cl. Strides sx, sy in elements, so
// one helper applies a matrix along rows or columns of a tile.

// y = G x for one 3-vector; strides in elements.
static inline void winograd_f4_g(const float* x, int sx, float* y, int sy) {
  const float g0 = x[0], g1 = x[sx], g2 = x[2 * sx];
  const float a = g0 + g2;
  const float b = g0 * (1.0f / 24.0f) + g2 * (1.0f / 6.0f);
  y[0] = 0.25f * g0;
  y[sy] = -(a + g1) * (1.0f / 6.0f);
  y[2 * sy] = -(a - g1) * (1.0f / 6.0f);
  y[3 * sy] = b + g1 * (1.0f / 12.0f);
  y[4 * sy] = b - g1 * (1.0f / 12.0f);
  y[5 * sy] = g2;
}

// y = B^T x for one 6-vector.
static inline void winograd_f4_bt(const float* x, int sx, float* y, int sy) {
  const float x0 = x[0], x1 = x[sx], x2 = x[2 * sx], x3 = x[3 * sx], x4 = x[4 * sx], x5 = x[5 * sx];
  const float a = x4 - 4.0f * x2;  // rows 1, 2 share x4 - 4 x2 and x3 - 4 x1
  const float b = x3 - 4.0f * x1;
  const float c = x4 - x2;  // rows 3, 4 share x4 - x2 and 2 (x3 - x1)
  const float d = 2.0f * (x3 - x1);
  y[0] = 4.0f * x0 - 5.0f * x2 + x4;
  y[sy] = a + b;
  y[2 * sy] = a - b;
  y[3 * sy] = c + d;
  y[4 * sy] = c - d;
  y[5 * sy] = 4.0f * x1 - 5.0f * x3 + x5;
}

// y = A^T x for one 6-vector.
static inline void winograd_f4_at(const float* x, int sx, float* y, int sy) {
  const float x0 = x[0], x1 = x[sx], x2 = x[2 * sx], x3 = x[3 * sx], x4 = x[4 * sx], x5 = x[5 * sx];
  const float a = x1 + x2, b = x1 - x2, c = x3 + x4, d = x3 - x4;
  y[0] = x0 + a + c;
  y[sy] = b + 2.0f * d;
  y[2 * sy] = a + 4.0f * c;
  y[3 * sy] = b + 8.0f * d + x5;
}

// Sub-filters per dimension of a KH x KW filter.
#define WINO_SUBS(k) (((k) + 2) / 3)

// u[6][6] = G g G^T for the 3x3 sub-filter g with corner (a3, b3) of output channel oc and input
// channel c of an OHWI filter [OC][KH][KW][C] (taps past KH, KW are 0). Needs common.cl.
static inline void winograd_f4_filter_tile(__global const T* restrict filter, int oc, int c, int a3,
                                           int b3, int KH, int KW, int C, float* u) {
  float g[9], t[18];
#pragma unroll
  for (int i = 0; i < 3; ++i)
#pragma unroll
    for (int j = 0; j < 3; ++j)
      g[3 * i + j] = (a3 + i < KH && b3 + j < KW)
                         ? LOADF(filter, ((oc * KH + a3 + i) * KW + b3 + j) * C + c)
                         : 0.0f;
#pragma unroll
  for (int j = 0; j < 3; ++j) winograd_f4_g(g + j, 3, t + j, 3);  // t[6][3] = G g
#pragma unroll
  for (int i = 0; i < 6; ++i) winograd_f4_g(t + 3 * i, 1, u + 6 * i, 1);  // u[6][6] = t G^T
}

// The 4x4 outputs of one tile from its 36 products m: y = A^T m A, then store_winograd_tile
// (common.cl) adds bias and residual, clamps and stores them.
static inline void winograd_f4_output_tile(const float* m, float bv, __global T* restrict out,
                                           int n, int oh0, int ow0, int OH, int OW, int OC, int oc,
                                           float act_min,
                                           float act_max WINO_DIRECT_PARAM
                                               RESIDUAL_PARAM SLOPES_PARAM OVERFLOW_PARAM) {
  float s[24], y[16];
#pragma unroll
  for (int j = 0; j < 6; ++j) winograd_f4_at(m + j, 6, s + j, 6);  // s[4][6] = A^T m
#pragma unroll
  for (int i = 0; i < 4; ++i) winograd_f4_at(s + 6 * i, 1, y + 4 * i, 1);  // y[4][4] = s A
  store_winograd_tile(y, 4, bv, out, n, oh0, ow0, OH, OW, OC, oc, act_min,
                      act_max WINO_DIRECT_PASS RESIDUAL_PASS SLOPES_PASS OVERFLOW_PASS);
}
