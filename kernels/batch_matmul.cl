// BATCH_MATMUL as a strided batched GEMM: C[z] = alpha * A[z] B[z] for every batch index z of the
// output, each operand addressed through strides, so operands that are transposed, broadcast or
// reshaped views of other tensors (ops/matmul_views.h) are read where they lie, with no copy.
// Reuses the local-memory tiles of gemm_tiles.cl. Needs common.cl.
//
// batch_matmul(A, B, C, M, N, K, alpha, sa, sb, sc, e1, e2)
//   __global const T* A, B; __global T* C; int M, N, K; float alpha;
//   int8 sa: A(m, k) = A[i0 * sa.s0 + i1 * sa.s1 + i2 * sa.s2 + m * sa.s3 + k * sa.s4]
//   int8 sb: B(k, n) = B[i0 * sb.s0 + i1 * sb.s1 + i2 * sb.s2 + n * sb.s3 + k * sb.s4]
//   int8 sc: C(m, n) = C[i0 * sc.s0 + i1 * sc.s1 + i2 * sc.s2 + m * sc.s3 + n * sc.s4]
//   (s5..s7 unused); batch index z = (i0 * e1 + i1) * e2 + i2 (a broadcast axis has stride 0).
//   NDRange: 2-D. local (GEMM_WG, 1) = ((TILE_M / WPT_M) * (TILE_N / WPT_N), 1) (reqd),
//            global (ceil(M / TILE_M) * ceil(N / TILE_N) * GEMM_WG, batch count).
//   Defines: the tiles of gemm_tiles.cl (TILE_M, TILE_N, TILE_K, WPT_M, WPT_N, LPAD, GEMM_EVEN);
//   A_MODE / B_MODE, how an operand's tiles are read: 0 floats along k (any strides), 1 float4
//   along k (s4 == 1, K % 4 == 0), 2 float4 along the rows (s3 == 1, rows % 4 == 0), 3 floats
//   along the rows; modes 1 and 2 need every other stride a multiple of 4. C_VEC 1: float4
//   stores (sc.s4 == 1, N % 4 == 0, the other C strides multiples of 4, VWN == 4).

#ifndef TILE_M
#define TILE_M 64
#endif
#ifndef TILE_N
#define TILE_N 64
#endif
#ifndef WPT_M
#define WPT_M 4
#endif
#ifndef WPT_N
#define WPT_N 4
#endif
#ifndef A_MODE
#define A_MODE 0
#endif
#ifndef B_MODE
#define B_MODE 0
#endif
#ifndef C_VEC
#define C_VEC 0
#endif

#include "gemm_tiles.cl"

// Rows [r0, r0 + rows) x columns [k0, k0 + TILE_K) of X(r, k) = src[base + r * rs + k * ks] into
// registers, zero outside nrows x K. `rows` and `mode` are literals at the call sites.
static inline void bmm_fetch(__global const T* restrict src, int base, int rs, int ks, float* r,
                             const int rows, int r0, int nrows, int k0, int K, const int mode,
                             int lid) {
  if (mode == 1 || mode == 2) {
#pragma unroll
    for (int i = 0; i < NV_OF(rows); ++i) {
      const int e = lid + i * GEMM_WG;
      int gr, gk, at;
      if (mode == 1) {
        gr = r0 + e / (TILE_K / 4), gk = k0 + 4 * (e % (TILE_K / 4));
        at = base + gr * rs + gk;
      } else {
        gr = r0 + 4 * (e % (rows / 4)), gk = k0 + e / (rows / 4);
        at = base + gr + gk * ks;
      }
      float4 v = (float4)(0.0f);
#if GEMM_EVEN
      if (e < rows * TILE_K / 4) v = LOADF4(src, at >> 2);
#else
      if (e < rows * TILE_K / 4 && gr < nrows && gk < K) v = LOADF4(src, at >> 2);
#endif
      r[4 * i] = v.x;
      r[4 * i + 1] = v.y;
      r[4 * i + 2] = v.z;
      r[4 * i + 3] = v.w;
    }
  } else {
#pragma unroll
    for (int i = 0; i < NS_OF(rows); ++i) {
      const int e = lid + i * GEMM_WG;
      const int gr = r0 + (mode == 3 ? e % rows : e / TILE_K);
      const int gk = k0 + (mode == 3 ? e / rows : e % TILE_K);
      r[i] = (e < rows * TILE_K && gr < nrows && gk < K) ? LOADF(src, base + gr * rs + gk * ks)
                                                         : 0.0f;
    }
  }
}

// The registers of bmm_fetch into a local tile laid out [k][row] (what tile_mma reads).
static inline void bmm_store(const float* r, __local float* dst, const int rows, const int mode,
                             int lid) {
  const int ld = rows + LPAD;
  if (mode == 1 || mode == 2) {
#pragma unroll
    for (int i = 0; i < NV_OF(rows); ++i) {
      const int e = lid + i * GEMM_WG;
      if ((rows * TILE_K / 4) % GEMM_WG == 0 || e < rows * TILE_K / 4) {
        if (mode == 1) {
          const int row = e / (TILE_K / 4), k = 4 * (e % (TILE_K / 4));
#pragma unroll
          for (int q = 0; q < 4; ++q) dst[(k + q) * ld + row] = r[4 * i + q];
        } else {
          const int row = 4 * (e % (rows / 4)), k = e / (rows / 4);
#pragma unroll
          for (int q = 0; q < 4; ++q) dst[k * ld + row + q] = r[4 * i + q];
        }
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < NS_OF(rows); ++i) {
      const int e = lid + i * GEMM_WG;
      if ((rows * TILE_K) % GEMM_WG == 0 || e < rows * TILE_K) {
        const int row = mode == 3 ? e % rows : e / TILE_K;
        const int k = mode == 3 ? e / rows : e % TILE_K;
        dst[k * ld + row] = r[i];
      }
    }
  }
}

__kernel __attribute__((reqd_work_group_size(GEMM_WG, 1, 1))) void batch_matmul(
    __global const T* restrict A, __global const T* restrict B, __global T* restrict C, int M,
    int N, int K, float alpha, int8 sa, int8 sb, int8 sc, int e1, int e2 OVERFLOW_PARAM) {
  __local float As[TILE_K * (TILE_M + LPAD)] __attribute__((aligned(16)));
  __local float Bs[TILE_K * (TILE_N + LPAD)] __attribute__((aligned(16)));
  const int lid = get_local_id(0);
  const int tx = lid % RT_N, ty = lid / RT_N;
  int z = get_group_id(1);
  const int i2 = z % e2;
  z /= e2;
  const int i1 = z % e1, i0 = z / e1;
  const int a0 = i0 * sa.s0 + i1 * sa.s1 + i2 * sa.s2;
  const int b0 = i0 * sb.s0 + i1 * sb.s1 + i2 * sb.s2;
  const int c0 = i0 * sc.s0 + i1 * sc.s1 + i2 * sc.s2;
  const int2 o = group_tile_origin(N);

  float acc[WPT_M][WPT_N];
  zero_acc(acc);
  float ra[NREG(TILE_M)], rb[NREG(TILE_N)];
  bmm_fetch(A, a0, sa.s3, sa.s4, ra, TILE_M, o.x, M, 0, K, A_MODE, lid);
  bmm_fetch(B, b0, sb.s3, sb.s4, rb, TILE_N, o.y, N, 0, K, B_MODE, lid);
  for (int k0 = 0; k0 < K; k0 += TILE_K) {
    bmm_store(ra, As, TILE_M, A_MODE, lid);
    bmm_store(rb, Bs, TILE_N, B_MODE, lid);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (k0 + TILE_K < K) {
      bmm_fetch(A, a0, sa.s3, sa.s4, ra, TILE_M, o.x, M, k0 + TILE_K, K, A_MODE, lid);
      bmm_fetch(B, b0, sb.s3, sb.s4, rb, TILE_N, o.y, N, k0 + TILE_K, K, B_MODE, lid);
    }
    tile_mma(As, Bs, tx, ty, acc);
    barrier(CLK_LOCAL_MEM_FENCE);
  }

#pragma unroll
  for (int i = 0; i < WPT_M; ++i) {
    const int m = o.x + ROW_OF(ty, i);
    if (m >= M) break;
#pragma unroll
    for (int q = 0; q < WPT_N / VWN; ++q) {
      const int n = o.y + COL_OF(tx, q * VWN);
#if C_VEC && VWN == 4
      if (n < N)
        STOREF4(alpha * (float4)(acc[i][4 * q], acc[i][4 * q + 1], acc[i][4 * q + 2],
                                 acc[i][4 * q + 3]),
                C, (c0 + m * sc.s3 + n) >> 2);
#else
#pragma unroll
      for (int e = 0; e < VWN; ++e)
        if (n + e < N) STOREF(alpha * acc[i][q * VWN + e], C, c0 + m * sc.s3 + (n + e) * sc.s4);
#endif
    }
  }
}
