// The local-memory tile machinery shared by the GEMM family (gemm.cl,
// conv2d_implicit_gemm.cl, conv2d_winograd.cl): work-group shape, which tile rows and
// columns a work-item owns, and global -> registers -> local-memory tile moves.
// The including file defines TILE_M, TILE_N, TILE_K, WPT_M, WPT_N (its own defaults)
// and may set GEMM_SRC_T / GEMM_LOAD / GEMM_LOAD4 for sources that are not of type T.
// Needs common.cl. The program builder expands the #include (kernels are embedded).

// Fallbacks, so the file also builds on its own (tests build every kernel file).
#ifndef TILE_M
#define TILE_M 32
#endif
#ifndef TILE_N
#define TILE_N 32
#endif
#ifndef TILE_K
#define TILE_K 16
#endif
#ifndef WPT_M
#define WPT_M 4
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
#ifndef GEMM_SRC_T
#define GEMM_SRC_T T
#define GEMM_LOAD(p, i) LOADF(p, i)
#define GEMM_LOAD4(p, i4) LOADF4(p, i4)
#endif

#define RT_M (TILE_M / WPT_M)  // work-items along M
#define RT_N (TILE_N / WPT_N)  // work-items along N
#define GEMM_WG (RT_M * RT_N)

#if (TILE_M % WPT_M) || (TILE_N % WPT_N) || (TILE_K % 4)
#error "TILE_M/TILE_N must be multiples of WPT_M/WPT_N and TILE_K a multiple of 4"
#endif
#if (VWM != 1 && VWM != 4) || (VWN != 1 && VWN != 4) || (WPT_M % VWM) || (WPT_N % VWN) || \
    ((TILE_M + LPAD) % VWM) || ((TILE_N + LPAD) % VWN)
#error "VWM/VWN must be 1 or 4 and divide WPT_M/WPT_N and the local row lengths"
#endif

// Row i / column j of the tile owned by work-item (tx, ty): runs of VWM (VWN) neighbours, the runs
// RT_M * VWM (RT_N * VWN) apart, so neighbouring work-items read neighbouring float4s from local
// memory (no bank conflicts) and write neighbouring float4s to the output.
#define ROW_OF(ty, i) (((i) / VWM) * (RT_M * VWM) + VWM * (ty) + (i) % VWM)
#define COL_OF(tx, j) (((j) / VWN) * (RT_N * VWN) + VWN * (tx) + (j) % VWN)

// Tiles travel global -> registers (fetch_tile_nt, issued before the math on the previous tile so
// the loads are in flight meanwhile) -> local memory (store_tile_nt), transposed: dst[k][row].
// A work-item moves elements e = lid + i * GEMM_WG of the tile, as float4 along k when vec (K % 4
// == 0), else as floats. rows is TILE_M or TILE_N, a constant after inlining, so loops unroll.
#define NV_OF(rows) ((TILE_K * (rows) / 4 + GEMM_WG - 1) / GEMM_WG)  // float4s per work-item
#define NS_OF(rows) ((TILE_K * (rows) + GEMM_WG - 1) / GEMM_WG)      // floats per work-item
#define NREG(rows) (4 * NV_OF(rows))                                 // >= NS_OF(rows)

// Reads the WPT values of one local tile row that a work-item owns (see ROW_OF / COL_OF).
static inline void read_local_run(__local const float* row, int t, float* dst, int vw, int rt,
                                  int wpt) {
  if (vw == 4) {
#pragma unroll
    for (int q = 0; q < wpt / 4; ++q) {
      const float4 v = *(__local const float4*)(row + q * rt * 4 + t * 4);
      dst[4 * q] = v.x;
      dst[4 * q + 1] = v.y;
      dst[4 * q + 2] = v.z;
      dst[4 * q + 3] = v.w;
    }
  } else {
#pragma unroll
    for (int i = 0; i < wpt; ++i) dst[i] = row[i * rt + t];
  }
}
// Rows [r0, r0 + rows) x columns [k0, k0 + TILE_K) of a row-major nrows x K matrix, zero at
// or past column kend (K for the whole row; the end of its slice under split-K).
static inline void fetch_tile_nt(__global const GEMM_SRC_T* restrict src, float* r, int rows, int r0,
                                 int nrows, int k0, int K, int kend, bool vec, int lid) {
  if (vec) {
    const int K4 = K >> 2, kend4 = kend >> 2;
#pragma unroll
    for (int i = 0; i < NV_OF(rows); ++i) {
      const int e = lid + i * GEMM_WG;
      const int gr = r0 + e / (TILE_K / 4);
      const int gk4 = (k0 >> 2) + e % (TILE_K / 4);
      float4 v = (float4)(0.0f);
      if (e < rows * TILE_K / 4 && gr < nrows && gk4 < kend4) v = GEMM_LOAD4(src, gr * K4 + gk4);
      r[4 * i] = v.x;
      r[4 * i + 1] = v.y;
      r[4 * i + 2] = v.z;
      r[4 * i + 3] = v.w;
    }
  } else {
#pragma unroll
    for (int i = 0; i < NS_OF(rows); ++i) {
      const int e = lid + i * GEMM_WG;
      const int gr = r0 + e / TILE_K;
      const int gk = k0 + e % TILE_K;
      r[i] = (e < rows * TILE_K && gr < nrows && gk < kend) ? GEMM_LOAD(src, gr * K + gk) : 0.0f;
    }
  }
}
static inline void store_tile_nt(const float* r, __local float* dst, int rows, bool vec, int lid) {
  const int ld = rows + LPAD;
  if (vec) {
#pragma unroll
    for (int i = 0; i < NV_OF(rows); ++i) {
      const int e = lid + i * GEMM_WG;
      if ((rows * TILE_K / 4) % GEMM_WG == 0 || e < rows * TILE_K / 4) {
        const int row = e / (TILE_K / 4);
        const int k = 4 * (e % (TILE_K / 4));
        dst[k * ld + row] = r[4 * i];
        dst[(k + 1) * ld + row] = r[4 * i + 1];
        dst[(k + 2) * ld + row] = r[4 * i + 2];
        dst[(k + 3) * ld + row] = r[4 * i + 3];
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < NS_OF(rows); ++i) {
      const int e = lid + i * GEMM_WG;
      if ((rows * TILE_K) % GEMM_WG == 0 || e < rows * TILE_K)
        dst[(e % TILE_K) * ld + e / TILE_K] = r[i];
    }
  }
}
