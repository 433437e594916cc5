// Winograd F(4x4, 3x3) transforms of one 6-vector (or 3-vector for G), shared by
// conv2d_winograd4.cl (transform kernels around a batched GEMM) and conv2d_winograd4_fused.cl
// (one kernel). Matrices and the sub-filter cut of larger filters: see conv2d_winograd4.cl.
// Strides sx, sy in elements, so one helper applies a matrix along rows or columns of a tile.

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
