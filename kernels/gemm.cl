// Dense GEMM for FULLY_CONNECTED and 1x1 stride-1 CONV_2D: C = act(A * B^T + bias), with A the
// activations (row-major M x K) and B the TFLite weights (row-major N x K). Needs common.cl.
//
// gemm_nt(A, B, bias, C, M, N, K, act_min, act_max[, residual])
//   __global const T* A [M][K]; __global const T* B [N][K]; __global const float* bias [N] (zeros
//   when the model has none); __global T* C [M][N]; int M, N, K; float act_min, act_max;
//   with HAS_RESIDUAL, __global const T* residual [M][N]: C = act(A * B^T + bias + residual)
//   NDRange: 1-D. local = WG = (TILE_M / WPT_M) * (TILE_N / WPT_N) (reqd_work_group_size),
//            global = ceil(M / TILE_M) * ceil(N / TILE_N) * WG.
//   A group computes a TILE_M x TILE_N block of C through local-memory tiles of depth TILE_K (the
//   next tile's global loads are issued before the math on the current one); a work-item keeps
//   WPT_M x WPT_N accumulators, in runs of VWM rows x VWN columns read from local memory as float4
//   (VW* = 4) or floats (VW* = 1). Global loads are float4 when K % 4 == 0, stores float4 when
//   N % 4 == 0 and VWN == 4, scalar otherwise.
//   Defines: TILE_M (128), TILE_N (64), TILE_K (16), WPT_M (8), WPT_N (4), VWM (4), VWN (4), LPAD
//   (0, local-row padding). Constraints (#error): TILE_M % WPT_M == 0, TILE_N % WPT_N == 0,
//   TILE_K % 4 == 0; VWM, VWN in {1, 4}, dividing WPT_M, WPT_N and TILE_M + LPAD, TILE_N + LPAD.
//   Fastest when WG divides TILE_M * TILE_K / 4 and TILE_N * TILE_K / 4 (no guarded load tail).
//   H200 measurements (bench in tests/kernels_pyopencl_check.py): 128x128 / 8x8 beats the default
//   on big square problems (34 vs 27 TFLOP/s fp32 at 4096^3); 64x64 / 4x4 on small ones (M=196).
//
// gemm_nt_small_m(A, B, bias, C, M, N, K, act_min, act_max[, residual]) -- same arguments,
//   1 <= M <= SM_MAX_M
//   Batch-1 (or small batch) FULLY_CONNECTED: memory-bound, so B is read exactly once, coalesced
//   along K; a group owns SM_N consecutive output columns, its SM_WG work-items stride over K and
//   the partial sums are reduced in local memory.
//   NDRange: 1-D. local = SM_WG (reqd_work_group_size), global = ceil(N / SM_N) * SM_WG.
//   Defines: SM_WG (128, a power of two), SM_N (8), SM_MAX_M (8).

#ifndef TILE_M
#define TILE_M 128
#endif
#ifndef TILE_N
#define TILE_N 64
#endif
#ifndef TILE_K
#define TILE_K 16
#endif
#ifndef WPT_M
#define WPT_M 8
#endif
#ifndef WPT_N
#define WPT_N 4
#endif
#ifndef VWM
#define VWM 4
#endif
#ifndef VWN
#define VWN 4
#endif
#ifndef LPAD
#define LPAD 0
#endif
#ifndef SM_WG
#define SM_WG 128
#endif
#ifndef SM_N
#define SM_N 8
#endif
#ifndef SM_MAX_M
#define SM_MAX_M 8
#endif

#include "gemm_tiles.cl"

__kernel __attribute__((reqd_work_group_size(GEMM_WG, 1, 1))) void gemm_nt(
    __global const T* restrict A, __global const T* restrict B, __global const float* restrict bias,
    __global T* restrict C, int M, int N, int K, float act_min, float act_max RESIDUAL_PARAM) {
  __local float As[NBUF * TILE_K][TILE_M + LPAD] __attribute__((aligned(16)));
  __local float Bs[NBUF * TILE_K][TILE_N + LPAD] __attribute__((aligned(16)));

  const int lid = get_local_id(0);
  const int2 o = group_tile_origin(N);
  float acc[WPT_M][WPT_N];
  gemm_accumulate(A, B, M, N, K, 0, K, o.x, o.y, &As[0][0], &Bs[0][0], acc);
  store_output_tile(acc, bias, C, M, N, o.x, o.y, lid % RT_N, lid / RT_N, act_min,
                    act_max RESIDUAL_PASS);
}

// gemm_nt_splitk(A, B, P, M, N, K, k_per_split) -- GEMMs with too few output tiles to fill the
//   device (1x1 convs on 7x7 maps): split z = get_group_id(1) sums columns [z * k_per_split,
//   (z + 1) * k_per_split) of K into P[z][M][N] (float, no bias). k_per_split is a multiple of
//   TILE_K. NDRange: 2-D, local (GEMM_WG, 1), global (ceil(M/TILE_M) * ceil(N/TILE_N) * GEMM_WG,
//   splits).
// gemm_splitk_reduce (gemm_tiles.cl) adds the splits, the bias and the activation.
__kernel __attribute__((reqd_work_group_size(GEMM_WG, 1, 1))) void gemm_nt_splitk(
    __global const T* restrict A, __global const T* restrict B, __global float* restrict P, int M,
    int N, int K, int k_per_split) {
  __local float As[NBUF * TILE_K][TILE_M + LPAD] __attribute__((aligned(16)));
  __local float Bs[NBUF * TILE_K][TILE_N + LPAD] __attribute__((aligned(16)));
  const int lid = get_local_id(0);
  const int2 o = group_tile_origin(N);
  const int2 k = split_k_range(K, k_per_split);
  float acc[WPT_M][WPT_N];
  gemm_accumulate(A, B, M, N, K, k.x, k.y, o.x, o.y, &As[0][0], &Bs[0][0], acc);
  store_partial_tile(acc, P + (long)get_group_id(1) * M * N, M, N, o.x, o.y, lid % RT_N,
                     lid / RT_N);
}

__kernel __attribute__((reqd_work_group_size(SM_WG, 1, 1))) void gemm_nt_small_m(
    __global const T* restrict A, __global const T* restrict B, __global const float* restrict bias,
    __global T* restrict C, int M, int N, int K, float act_min, float act_max RESIDUAL_PARAM) {
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
