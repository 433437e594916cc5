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
//   the partial sums are reduced in local memory.
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

__kernel __attribute__((reqd_work_group_size(SM_WG, 1, 1))) void gemm_nt_small_m(
    __global const T* restrict A, __global const T* restrict B, __global const float* restrict bias,
    __global T* restrict C, int M, int N, int K, float act_min, float act_max RESIDUAL_PARAM OVERFLOW_PARAM) {
  __local float red[SM_MAX_M * SM_N][SM_WG];

  const int lid = get_local_id(0);
  const int n0 = get_group_id(0) * SM_N;
  float acc[SM_MAX_M][SM_N];
#pragma unroll
  for (int m = 0; m < SM_MAX_M; ++m)
#pragma unroll
    for (int j = 0; j < SM_N; ++j) acc[m][j] = 0.0f;

  // Rows past N re-read row N-1 (always valid memory); their sums are never stored.
  int brow[SM_N];
#pragma unroll
  for (int j = 0; j < SM_N; ++j) brow[j] = min(n0 + j, N - 1);

  if ((K & 3) == 0) {
    const int K4 = K >> 2;
    for (int k4 = lid; k4 < K4; k4 += SM_WG) {
      float4 b[SM_N];
#pragma unroll
      for (int j = 0; j < SM_N; ++j) b[j] = LOADF4(B, brow[j] * K4 + k4);
#pragma unroll
      for (int m = 0; m < SM_MAX_M; ++m) {
        if (m < M) {
          const float4 a = LOADF4(A, m * K4 + k4);
#pragma unroll
          for (int j = 0; j < SM_N; ++j) acc[m][j] += dot(a, b[j]);
        }
      }
    }
  } else {
    for (int k = lid; k < K; k += SM_WG) {
      float b[SM_N];
#pragma unroll
      for (int j = 0; j < SM_N; ++j) b[j] = LOADF(B, brow[j] * K + k);
#pragma unroll
      for (int m = 0; m < SM_MAX_M; ++m) {
        if (m < M) {
          const float a = LOADF(A, m * K + k);
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
  if (lid < slots) {
    const int m = lid / SM_N;
    const int n = n0 + lid % SM_N;
    if (n < N)
      STOREF(ACTIVATE(PLUS_RESIDUAL(red[lid][0] + bias[n], m * N + n), act_min, act_max), C,
             m * N + n);
  }
}
