// Batch-1 (or small batch) FULLY_CONNECTED and 1x1 convolutions over at most SM_MAX_M pixels
// (squeeze-excite convs on a 1x1 map): C = act(A * B^T + bias [+ residual]), with A the activations
// (row-major M x K, 1 <= M <= SM_MAX_M) and B the TFLite weights (row-major N x K). Needs common.cl.
//
// gemm_nt_small_m(A, B, bias, C, M, N, K, act_min, act_max[, residual])
//   __global const T* A [M][K]; __global const T* B [N][K]; __global const float* bias [N];
//   __global T* C [M][N]; int M, N, K (1 <= M <= SM_MAX_M); float act_min, act_max; with
//   HAS_RESIDUAL, __global const T* residual [M][N], added before the activation
//   Batch-1 (or small batch) FULLY_CONNECTED: memory-bound, so B is read exactly once, coalesced
//   along K; a group owns SM_N consecutive output columns, its SM_WG work-items stride over K and
//   the partial sums are reduced in local memory. Where K * max|A row| * max|B row| reaches
//   FLT_MAX an output is summed again in the order of TFLite's CPU kernel (its saturation).
//   NDRange: 1-D. local = SM_WG (reqd_work_group_size), global = ceil(N / SM_N) * SM_WG.
//   Defines: SM_WG (128, a power of two), SM_N (8), SM_MAX_M (8).

#ifndef SM_WG
#define SM_WG 128
#endif
#ifndef SM_N
#define SM_N 8
#endif
#ifndef SM_MAX_M
#define SM_MAX_M 8
#endif

static inline float max4(float4 v) { return fmax(fmax(v.x, v.y), fmax(v.z, v.w)); }

// sum over k of a[k] * b[k] in the order of TFLite's CPU FULLY_CONNECTED (Eigen's GEMM on x86),
// each product rounded before it is added, so it saturates (or not) where the CPU does: with
// several rows, in index order; with one (Eigen's GEMV), in 4 lanes (k % 4) summed as
// (l0 + l2) + (l1 + l3), then the last K % 4 products in order.
static inline float cpu_order_dot(__global const T* a, __global const T* b, int K, int M) {
#pragma OPENCL FP_CONTRACT OFF
  const int lanes = M == 1 ? 4 : 1;
  const int whole = K / lanes * lanes;
  float l[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int k = 0; k < whole; ++k) {
    const float p = LOADF(a, k) * LOADF(b, k);
    l[k % lanes] = l[k % lanes] + p;
  }
  float acc = lanes == 4 ? (l[0] + l[2]) + (l[1] + l[3]) : l[0];
  for (int k = whole; k < K; ++k) {
    const float p = LOADF(a, k) * LOADF(b, k);
    acc = acc + p;
  }
  return acc;
}

__kernel __attribute__((reqd_work_group_size(SM_WG, 1, 1))) void gemm_nt_small_m(
    __global const T* restrict A, __global const T* restrict B, __global const float* restrict bias,
    __global T* restrict C, int M, int N, int K, float act_min, float act_max RESIDUAL_PARAM) {
  __local float red[SM_MAX_M * SM_N][SM_WG];

  const int lid = get_local_id(0);
  const int n0 = get_group_id(0) * SM_N;
  float acc[SM_MAX_M][SM_N];
  // The largest |A| of each row and |B| of each column this work-item reads (overflow_guard).
  float amax[SM_MAX_M], bmax[SM_N];
#pragma unroll
  for (int m = 0; m < SM_MAX_M; ++m) {
    amax[m] = 0.0f;
#pragma unroll
    for (int j = 0; j < SM_N; ++j) acc[m][j] = 0.0f;
  }
#pragma unroll
  for (int j = 0; j < SM_N; ++j) bmax[j] = 0.0f;

  // Rows past N re-read row N-1 (always valid memory); their sums are never stored.
  int brow[SM_N];
#pragma unroll
  for (int j = 0; j < SM_N; ++j) brow[j] = min(n0 + j, N - 1);

  if ((K & 3) == 0) {
    const int K4 = K >> 2;
    for (int k4 = lid; k4 < K4; k4 += SM_WG) {
      float4 b[SM_N];
#pragma unroll
      for (int j = 0; j < SM_N; ++j) {
        b[j] = LOADF4(B, brow[j] * K4 + k4);
        bmax[j] = fmax(bmax[j], max4(fabs(b[j])));
      }
#pragma unroll
      for (int m = 0; m < SM_MAX_M; ++m) {
        if (m < M) {
          const float4 a = LOADF4(A, m * K4 + k4);
          amax[m] = fmax(amax[m], max4(fabs(a)));
#pragma unroll
          for (int j = 0; j < SM_N; ++j) acc[m][j] += dot(a, b[j]);
        }
      }
    }
  } else {
    for (int k = lid; k < K; k += SM_WG) {
      float b[SM_N];
#pragma unroll
      for (int j = 0; j < SM_N; ++j) {
        b[j] = LOADF(B, brow[j] * K + k);
        bmax[j] = fmax(bmax[j], fabs(b[j]));
      }
#pragma unroll
      for (int m = 0; m < SM_MAX_M; ++m) {
        if (m < M) {
          const float a = LOADF(A, m * K + k);
          amax[m] = fmax(amax[m], fabs(a));
#pragma unroll
          for (int j = 0; j < SM_N; ++j) acc[m][j] = mad(a, b[j], acc[m][j]);
        }
      }
    }
  }

#pragma unroll
  for (int m = 0; m < SM_MAX_M; ++m)
#pragma unroll
    for (int j = 0; j < SM_N; ++j) red[m * SM_N + j][lid] = acc[m][j];
  barrier(CLK_LOCAL_MEM_FENCE);
  const int slots = min(M, SM_MAX_M) * SM_N;
  for (int s = SM_WG / 2; s > 0; s >>= 1) {
    if (lid < s)
      for (int q = 0; q < slots; ++q) red[q][lid] += red[q][lid + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  float sum = lid < slots ? red[lid][0] : 0.0f;
  barrier(CLK_LOCAL_MEM_FENCE);
  // The maxima of the group, reduced in red's first SM_MAX_M + SM_N rows.
#pragma unroll
  for (int m = 0; m < SM_MAX_M; ++m) red[m][lid] = amax[m];
#pragma unroll
  for (int j = 0; j < SM_N; ++j) red[SM_MAX_M + j][lid] = bmax[j];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = SM_WG / 2; s > 0; s >>= 1) {
    if (lid < s)
      for (int q = 0; q < SM_MAX_M + SM_N; ++q) red[q][lid] = fmax(red[q][lid], red[q][lid + s]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lid < slots) {
    const int m = lid / SM_N;
    const int n = n0 + lid % SM_N;
    // K * max|a| * max|b| bounds every partial sum of the row's products. Where it reaches
    // FLT_MAX the split sums above may overflow where TFLite's own order does not (or to
    // the other sign, or to NaN), so the output is summed again in TFLite's order.
    if (n < N && !((float)K * red[m][0] * red[SM_MAX_M + lid % SM_N][0] < FLT_MAX))
      sum = cpu_order_dot(A + (long)m * K, B + (long)n * K, K, M);
    if (n < N)
      STOREF(ACTIVATE(PLUS_RESIDUAL(sum + bias[n], m * N + n), act_min, act_max), C, m * N + n);
  }
}
