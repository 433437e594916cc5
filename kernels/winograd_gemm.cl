// The batched GEMM stage of Winograd convolutions (conv2d_winograd.cl F(2x2), conv2d_winograd4.cl
// F(4x4)): one GEMM per tile position, over the transformed buffers. A program of its own, so
// building the transforms compiles no GEMM. Needs common.cl.
//
// winograd_gemm(V, U, Mo, P, OC, C) -- Mo[b] = V[b] * U[b]^T for b = get_group_id(1)
//   __global const TT* V [NB][P][C]; __global const TT* U [NB][OC][C];
//   __global TT* Mo [NB][P][OC]; int P, OC, C. NB = 16 for F(2x2), 36 for F(4x4).
//   NDRange: 2-D. local = (WG, 1), WG = (TILE_M / WPT_M) * (TILE_N / WPT_N) (reqd_work_group_size),
//            global = (ceil(P / TILE_M) * ceil(OC / TILE_N) * WG, NB).
//   Defines: TILE_M (128), TILE_N (64), TILE_K (16), WPT_M (8), WPT_N (4), VWM (4), VWN (4),
//   LPAD (0): meaning and constraints as in gemm.cl; float4 loads when C % 4 == 0. 128x128 / 8x8
//   is ~1.4x faster when C, OC >= 256 on an H200; TILE_K 8 when C <= 8.
//
// Define: TRANSFORMED_FLOAT (off): V, U, Mo are float buffers instead of T, as the transforms of
// the same convolution were built.

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

#ifdef TRANSFORMED_FLOAT
#define TT float
#define LOADT(p, i) ((p)[(i)])
#define STORET(v, p, i) ((p)[(i)] = (v))
#define LOADT4(p, i4) vload4((i4), (p))
#else
#define TT T
#define LOADT(p, i) LOADF(p, i)
#define STORET(v, p, i) STOREF(v, p, i)
#define LOADT4(p, i4) LOADF4(p, i4)
#endif

// The GEMM reads the transformed buffers (type TT).
#define GEMM_SRC_T TT
#define GEMM_LOAD(p, i) LOADT(p, i)
#define GEMM_LOAD4(p, i4) LOADT4(p, i4)
#include "gemm_tiles.cl"

__kernel __attribute__((reqd_work_group_size(GEMM_WG, 1, 1))) void winograd_gemm(
    __global const TT* restrict V, __global const TT* restrict U, __global TT* restrict Mo, int P,
    int OC, int C OVERFLOW_PARAM) {
  __local float As[NBUF * TILE_K][TILE_M + LPAD] __attribute__((aligned(16)));
  __local float Bs[NBUF * TILE_K][TILE_N + LPAD] __attribute__((aligned(16)));

  const int b = get_group_id(1);
  __global const TT* A = V + b * P * C;
  __global const TT* B = U + b * OC * C;
  const int lid = get_local_id(0);
  const int tx = lid % RT_N;
  const int ty = lid / RT_N;
  const int2 o = group_tile_origin(OC);
  const int m0 = o.x, n0 = o.y;
  float acc[WPT_M][WPT_N];
  gemm_accumulate(A, B, P, OC, C, 0, C, m0, n0, &As[0][0], &Bs[0][0], acc K_SCALE_PASS);

  const int out0 = b * P * OC;
#pragma unroll
  for (int i = 0; i < WPT_M; ++i) {
    const int m = m0 + ROW_OF(ty, i);
    if (m >= P) break;
#pragma unroll
    for (int q = 0; q < WPT_N / VWN; ++q) {
      const int n = n0 + COL_OF(tx, q * VWN);
#pragma unroll
      for (int e = 0; e < VWN; ++e)
        if (n + e < OC) STORET(acc[i][q * VWN + e], Mo, out0 + m * OC + n + e);
    }
  }
}
