// Dense GEMM for FULLY_CONNECTED and 1x1 stride-1 CONV_2D: C = act(A * B^T + bias), with A the
// activations (row-major M x K) and B the TFLite weights (row-major N x K). Needs common.cl.
//
// gemm_nt(A, B, bias, C, M, N, K, act_min, act_max[, residual])
//   __global const T* A [M][K]; __global const T* B [N][K]; __global const float* bias [N] (zeros
//   when the model has none); __global T* C [M][N]; int M, N, K; float act_min, act_max;
//   with HAS_RESIDUAL, __global const T* residual [M][N]: C = act(A * B^T + bias + residual)
//   with K_SCALE (gemm_tiles.cl), __global const T* kscale [K] after the slopes: A's column k
//   times kscale[k] (gemm_nt_splitk takes it too, after k_per_split)
//   with A_AFFINE (gemm_affine.cl), T a_scale, a_shift and float a_lo1, a_hi1, a_lo2, a_hi2 after
//   those: A read through per-channel MUL / ADD nodes (gemm_nt_splitk takes them too)
//   with A_PITCH (gemm_tiles.cl), int lda after those: A's rows lda apart (both kernels)
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
// gemm_nt_small_m, batch-1 FULLY_CONNECTED, is in gemm_small_m.cl: its own program, so neither
// pays for compiling the other.
//
// Defines: SPLIT_K (off) builds gemm_nt_splitk and gemm_splitk_reduce instead of gemm_nt: a GEMM
// runs either whole or split, and its program holds only the kernels it launches (compiling the
// others made a cold start slower: PoCL compiles every kernel of a program it is asked the binary
// of, NVIDIA every kernel of a program it builds). OUT_SLICE: the output written into a folded
// CONCATENATION's tensor (gemm_tiles.cl), two more int arguments of gemm_nt / the reduce.

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

#include "gemm_tiles.cl"

#ifndef SPLIT_K
__kernel __attribute__((reqd_work_group_size(GEMM_WG, 1, 1))) void gemm_nt(
    __global const T* restrict A, __global const T* restrict B, __global const float* restrict bias,
    __global T* restrict C, int M, int N, int K, float act_min,
    float act_max RESIDUAL_PARAM SLOPES_PARAM K_SCALE_PARAM AFFINE_PARAM A_PITCH_PARAM OUT_SLICE_PARAM
        OVERFLOW_PARAM) {
  __local float As[NBUF * TILE_K][TILE_M + LPAD] __attribute__((aligned(16)));
  __local float Bs[NBUF * TILE_K][TILE_N + LPAD] __attribute__((aligned(16)));

  const int lid = get_local_id(0);
  const int2 o = group_tile_origin(N);
  float acc[WPT_M][WPT_N];
  gemm_accumulate(A, B, M, N, K, 0, K, o.x, o.y, &As[0][0], &Bs[0][0], acc K_SCALE_PASS AFFINE_PASS
                  A_PITCH_PASS);
  store_output_tile(acc, bias, C, M, N, o.x, o.y, lid % RT_N, lid / RT_N, act_min,
                    act_max RESIDUAL_PASS SLOPES_PASS OUT_SLICE_PASS OVERFLOW_PASS);
}
#else

// gemm_nt_splitk(A, B, P, M, N, K, k_per_split) -- GEMMs with too few output tiles to fill the
//   device (1x1 convs on 7x7 maps): split z = get_group_id(1) sums columns [z * k_per_split,
//   (z + 1) * k_per_split) of K into P[z][M][N] (float, no bias). k_per_split is a multiple of
//   TILE_K. NDRange: 2-D, local (GEMM_WG, 1), global (ceil(M/TILE_M) * ceil(N/TILE_N) * GEMM_WG,
//   splits).
// gemm_splitk_reduce (gemm_tiles.cl) adds the splits, the bias and the activation.
__kernel __attribute__((reqd_work_group_size(GEMM_WG, 1, 1))) void gemm_nt_splitk(
    __global const T* restrict A, __global const T* restrict B, __global float* restrict P, int M,
    int N, int K, int k_per_split K_SCALE_PARAM AFFINE_PARAM A_PITCH_PARAM OVERFLOW_PARAM) {
  __local float As[NBUF * TILE_K][TILE_M + LPAD] __attribute__((aligned(16)));
  __local float Bs[NBUF * TILE_K][TILE_N + LPAD] __attribute__((aligned(16)));
  const int lid = get_local_id(0);
  const int2 o = group_tile_origin(N);
  const int2 k = split_k_range(K, k_per_split);
  float acc[WPT_M][WPT_N];
  gemm_accumulate(A, B, M, N, K, k.x, k.y, o.x, o.y, &As[0][0], &Bs[0][0], acc K_SCALE_PASS AFFINE_PASS
                  A_PITCH_PASS);
  store_partial_tile(acc, P + (long)get_group_id(1) * M * N, M, N, o.x, o.y, lid % RT_N,
                     lid / RT_N);
}
#endif  // SPLIT_K
