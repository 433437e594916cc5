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
// 1: two local tiles per operand, so the next tile is stored while the current one is read and
// each TILE_K step needs one barrier instead of two.
#ifndef GEMM_DBUF
#define GEMM_DBUF 0
#endif
// Element order of the float4 tile moves (fetch_tile_nt / store_tile_nt, argument map):
// 0 walks k fastest (coalesced global loads, but the transposed local stores of a warp land
// in 4 banks); 1 walks rows fastest (conflict-free stores, one float4 per row per load);
// 2 takes 16 rows x 2 float4s per warp: whole 32-byte sectors from global memory, and with
// a local row length of 4 mod 32 floats (LPAD = 4) conflict-free stores. 2 needs rows % 16
// == 0. Only for sources that are plain row-major matrices (not im2col).
#ifndef GEMM_TMAP
#define GEMM_TMAP 0
#endif
// 1: the caller guarantees M, N and K are multiples of TILE_M, TILE_N and TILE_K (and of 4 for
// K): the tile loads drop their bounds checks.
#ifndef GEMM_EVEN
#define GEMM_EVEN 0
#endif
// 1: register double-buffering of the local-memory fragments in tile_mma.
#ifndef GEMM_FRAG
#define GEMM_FRAG 0
#endif
#ifndef GEMM_SRC_T
#define GEMM_SRC_T T
#define GEMM_LOAD(p, i) LOADF(p, i)
#define GEMM_LOAD4(p, i4) LOADF4(p, i4)
#endif

#define NBUF (1 + GEMM_DBUF)
#define A_TILE (TILE_K * (TILE_M + LPAD))  // floats of one local A tile
#define B_TILE (TILE_K * (TILE_N + LPAD))
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

// Tile row / float4 column of element e (see GEMM_TMAP).
static inline int tile_row(int e, int rows, int map) {
  return map == 2 ? e % 16 + 16 * (e / (4 * TILE_K)) : map ? e % rows : e / (TILE_K / 4);
}
static inline int tile_k4(int e, int rows, int map) {
  return map == 2 ? (e / 16) % (TILE_K / 4) : map ? e / rows : e % (TILE_K / 4);
}

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
// Rows [r0, r0 + rows) x columns [k0, k0 + TILE_K) of a row-major nrows x K matrix whose rows
// lie ld apart (K, or a wider tensor's pitch: A_PITCH), zero at or past column kend (K for the
// whole row; the end of its slice under split-K). vec needs ld % 4 == 0 too.
static inline void fetch_tile_nt(__global const GEMM_SRC_T* restrict src, float* r, int rows, int r0,
                                 int nrows, int k0, int ld, int kend, bool vec, int lid, int map) {
  if (vec) {
    const int K4 = ld >> 2, kend4 = kend >> 2;
#pragma unroll
    for (int i = 0; i < NV_OF(rows); ++i) {
      const int e = lid + i * GEMM_WG;
      const int gr = r0 + tile_row(e, rows, map);
      const int gk4 = (k0 >> 2) + tile_k4(e, rows, map);
      float4 v = (float4)(0.0f);
      // Chosen by the preprocessor: NVIDIA's compiler warns on "&& (1 || ...)".
#if GEMM_EVEN
      if (e < rows * TILE_K / 4) v = GEMM_LOAD4(src, gr * K4 + gk4);
#else
      if (e < rows * TILE_K / 4 && gr < nrows && gk4 < kend4)
        v = GEMM_LOAD4(src, gr * K4 + gk4);
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
      const int gr = r0 + e / TILE_K;
      const int gk = k0 + e % TILE_K;
      r[i] = (e < rows * TILE_K && gr < nrows && gk < kend) ? GEMM_LOAD(src, gr * ld + gk) : 0.0f;
    }
  }
}
static inline void store_tile_nt(const float* r, __local float* dst, int rows, bool vec, int lid,
                                 int map) {
  const int ld = rows + LPAD;
  if (vec) {
#pragma unroll
    for (int i = 0; i < NV_OF(rows); ++i) {
      const int e = lid + i * GEMM_WG;
      if ((rows * TILE_K / 4) % GEMM_WG == 0 || e < rows * TILE_K / 4) {
        const int row = tile_row(e, rows, map);
        const int k = 4 * tile_k4(e, rows, map);
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

// acc += As^T Bs over one local tile pair (TILE_K deep): each work-item reads its WPT_M rows of A
// and WPT_N columns of B per k as runs (ROW_OF / COL_OF) and does WPT_M * WPT_N mads.
static inline void tile_mma(__local const float* As, __local const float* Bs, int tx, int ty,
                            float acc[WPT_M][WPT_N]) {
#if GEMM_FRAG
  // Fragments double-buffered in registers: step kk + 1's local reads are issued before step
  // kk's mads, so their latency hides behind the arithmetic even with few warps per scheduler.
  float a[2][WPT_M], b[2][WPT_N];
  read_local_run(As, ty, a[0], VWM, RT_M, WPT_M);
  read_local_run(Bs, tx, b[0], VWN, RT_N, WPT_N);
#pragma unroll
  for (int kk = 0; kk < TILE_K; ++kk) {
    if (kk + 1 < TILE_K) {
      read_local_run(As + (kk + 1) * (TILE_M + LPAD), ty, a[(kk + 1) & 1], VWM, RT_M, WPT_M);
      read_local_run(Bs + (kk + 1) * (TILE_N + LPAD), tx, b[(kk + 1) & 1], VWN, RT_N, WPT_N);
    }
#pragma unroll
    for (int i = 0; i < WPT_M; ++i)
#pragma unroll
      for (int j = 0; j < WPT_N; ++j) acc[i][j] = mad(a[kk & 1][i], b[kk & 1][j], acc[i][j]);
  }
#else
#pragma unroll
  for (int kk = 0; kk < TILE_K; ++kk) {
    float a[WPT_M], b[WPT_N];
    read_local_run(As + kk * (TILE_M + LPAD), ty, a, VWM, RT_M, WPT_M);
    read_local_run(Bs + kk * (TILE_N + LPAD), tx, b, VWN, RT_N, WPT_N);
#pragma unroll
    for (int i = 0; i < WPT_M; ++i)
#pragma unroll
      for (int j = 0; j < WPT_N; ++j) acc[i][j] = mad(a[i], b[j], acc[i][j]);
  }
#endif
}

// The group's output tile origin (m0, n0) in a row-major output of N columns: groups run along N
// first (get_group_id(0) = tile row * tiles along N + tile column).
static inline int2 group_tile_origin(int N) {
  const int tiles_n = (N + TILE_N - 1) / TILE_N;
  return (int2)((get_group_id(0) / tiles_n) * TILE_M, (get_group_id(0) % tiles_n) * TILE_N);
}

// Columns [x, y) of K that split z = get_group_id(1) of a split-K GEMM sums.
static inline int2 split_k_range(int K, int k_per_split) {
  const int kbeg = get_group_id(1) * k_per_split;
  return (int2)(kbeg, min(K, kbeg + k_per_split));
}

static inline void zero_acc(float acc[WPT_M][WPT_N]) {
#pragma unroll
  for (int i = 0; i < WPT_M; ++i)
#pragma unroll
    for (int j = 0; j < WPT_N; ++j) acc[i][j] = 0.0f;
}

#include "gemm_kscale.cl"
#include "gemm_affine.cl"

// A_PITCH (fusion/concat_chain.cc): A's rows lie lda apart, the first K values of each row of
// a wider tensor (a concatenation that later columns extend in place); one more int argument of
// gemm_accumulate, gemm_nt and gemm_nt_splitk after A_AFFINE's.
#ifdef A_PITCH
#define A_PITCH_PARAM , int lda
#define A_PITCH_PASS , lda
#define A_LD lda
#else
#define A_PITCH_PARAM
#define A_PITCH_PASS
#define A_LD K
#endif

// acc = A[m0.., kbeg..kend) * B[n0.., kbeg..kend)^T for this work-item's WPT_M x WPT_N outputs.
// As / Bs hold NBUF tiles each (see GEMM_DBUF in gemm_tiles.cl).
static inline void gemm_accumulate(__global const GEMM_SRC_T* restrict A,
                                   __global const GEMM_SRC_T* restrict B,
                                   int M, int N, int K, int kbeg, int kend, int m0, int n0,
                                   __local float* As, __local float* Bs,
                                   float acc[WPT_M][WPT_N] K_SCALE_PARAM AFFINE_PARAM
                                       A_PITCH_PARAM) {
  const int lid = get_local_id(0);
  const int tx = lid % RT_N;
  const int ty = lid / RT_N;
  const bool vec = ((K | A_LD) & 3) == 0;
  zero_acc(acc);
  float ra[NREG(TILE_M)], rb[NREG(TILE_N)];
  fetch_tile_nt(A, ra, TILE_M, m0, M, kbeg, A_LD, kend, vec, lid, GEMM_TMAP);
  fetch_tile_nt(B, rb, TILE_N, n0, N, kbeg, K, kend, vec, lid, GEMM_TMAP);
  SCALE_B_TILE(rb, kbeg, kend, vec, lid);
  // A's per-channel nodes apply where its tile is stored, not where it is fetched: there the
  // loads have had the previous tile's math to arrive, so the fetch still overlaps it.
#if GEMM_DBUF
  AFFINE_A_TILE(ra, kbeg, kend, vec, lid);
  store_tile_nt(ra, As, TILE_M, vec, lid, GEMM_TMAP);
  store_tile_nt(rb, Bs, TILE_N, vec, lid, GEMM_TMAP);
  barrier(CLK_LOCAL_MEM_FENCE);
  int cur = 0;
  for (int k0 = kbeg; k0 < kend; k0 += TILE_K) {
    const bool more = k0 + TILE_K < kend;
    if (more) {
      fetch_tile_nt(A, ra, TILE_M, m0, M, k0 + TILE_K, A_LD, kend, vec, lid, GEMM_TMAP);
      fetch_tile_nt(B, rb, TILE_N, n0, N, k0 + TILE_K, K, kend, vec, lid, GEMM_TMAP);
      SCALE_B_TILE(rb, k0 + TILE_K, kend, vec, lid);
    }
    tile_mma(As + cur * A_TILE, Bs + cur * B_TILE, tx, ty, acc);
    if (more) {
      AFFINE_A_TILE(ra, k0 + TILE_K, kend, vec, lid);
      store_tile_nt(ra, As + (cur ^ 1) * A_TILE, TILE_M, vec, lid, GEMM_TMAP);
      store_tile_nt(rb, Bs + (cur ^ 1) * B_TILE, TILE_N, vec, lid, GEMM_TMAP);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    cur ^= 1;
  }
#else
  for (int k0 = kbeg; k0 < kend; k0 += TILE_K) {
    AFFINE_A_TILE(ra, k0, kend, vec, lid);
    store_tile_nt(ra, As, TILE_M, vec, lid, GEMM_TMAP);
    store_tile_nt(rb, Bs, TILE_N, vec, lid, GEMM_TMAP);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (k0 + TILE_K < kend) {
      fetch_tile_nt(A, ra, TILE_M, m0, M, k0 + TILE_K, A_LD, kend, vec, lid, GEMM_TMAP);
      fetch_tile_nt(B, rb, TILE_N, n0, N, k0 + TILE_K, K, kend, vec, lid, GEMM_TMAP);
      SCALE_B_TILE(rb, k0 + TILE_K, kend, vec, lid);
    }
    tile_mma(As, Bs, tx, ty, acc);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
#endif
}

// CHANNEL_SLOPES: common.cl's SLOPES_PARAM, the slope of output column (channel) n.

// OUT_SLICE (fusion/concat.cc): a CONCATENATION folded into the op, which writes its output
// row m at out_ldc * m + out_off of the concatenation's tensor instead of at N * m; two more
// arguments before OVERFLOW_PARAM. A residual is still read at N * m + n.
#ifdef OUT_SLICE
#define OUT_SLICE_PARAM , int out_ldc, int out_off
#define OUT_SLICE_PASS , out_ldc, out_off
#define OUT_ROW(m, N) ((m) * out_ldc + out_off)
#define OUT_ROW4_OK (((out_ldc | out_off) & 3) == 0)
#else
#define OUT_SLICE_PARAM
#define OUT_SLICE_PASS
#define OUT_ROW(m, N) ((m) * (N))
#define OUT_ROW4_OK 1
#endif

// C[m0.., n0..] = act(acc + bias [+ residual]) for this work-item's WPT_M x WPT_N outputs of a row-major
// M x N output (float4 stores when N % 4 == 0 and VWN == 4), skipping rows / columns past the end.
static inline void store_output_tile(float acc[WPT_M][WPT_N], __global const float* restrict bias,
                                     __global T* restrict C, int M, int N, int m0, int n0, int tx,
                                     int ty, float act_min,
                                     float act_max RESIDUAL_PARAM SLOPES_PARAM OUT_SLICE_PARAM
                                         OVERFLOW_PARAM) {
#pragma unroll
  for (int i = 0; i < WPT_M; ++i) {
    const int m = m0 + ROW_OF(ty, i);
    if (m >= M) break;
#pragma unroll
    for (int q = 0; q < WPT_N / VWN; ++q) {
      const int n = n0 + COL_OF(tx, q * VWN);
#if VWN == 4
      if ((N & 3) == 0 && OUT_ROW4_OK) {
        if (n < N) {
          const float4 v =
              (float4)(acc[i][4 * q], acc[i][4 * q + 1], acc[i][4 * q + 2], acc[i][4 * q + 3]) +
              vload4(n >> 2, bias);
          STOREF4(SLOPED4(ACTIVATE(PLUS_RESIDUAL4(v, (m * N + n) >> 2), act_min, act_max), n), C,
                  (OUT_ROW(m, N) + n) >> 2);
        }
        continue;
      }
#endif
#pragma unroll
      for (int e = 0; e < VWN; ++e)
        if (n + e < N)
          STOREF(SLOPED(ACTIVATE(PLUS_RESIDUAL(acc[i][q * VWN + e] + bias[n + e], m * N + n + e),
                                 act_min, act_max),
                        n + e),
                 C, OUT_ROW(m, N) + n + e);
    }
  }
}

// One split-K slice's partial sums: Pz[m][n] = acc (float, no bias), rows / columns past the
// end skipped.
static inline void store_partial_tile(float acc[WPT_M][WPT_N], __global float* restrict Pz, int M,
                                      int N, int m0, int n0, int tx, int ty) {
#pragma unroll
  for (int i = 0; i < WPT_M; ++i) {
    const int m = m0 + ROW_OF(ty, i);
    if (m >= M) break;
#pragma unroll
    for (int j = 0; j < WPT_N; ++j) {
      const int n = n0 + COL_OF(tx, j);
      if (n < N) Pz[(long)m * N + n] = acc[i][j];
    }
  }
}

#ifdef SPLIT_K  // built only into the programs of split GEMMs (gemm.cl)
// gemm_splitk_reduce(P, bias, C, M, N, splits, act_min, act_max[, residual][, slopes]
//   [, out_ldc, out_off]) -- C =
//   act(sum_z P[z] + bias [+ residual]) after a split-K GEMM (gemm_nt_splitk,
//   conv2d_implicit_gemm_splitk), then the slopes (CHANNEL_SLOPES): a fused residual ADD is added
//   here, once, not by each split.
//   NDRange: 1-D, global >= M * N, any local size.
__kernel void gemm_splitk_reduce(__global const float* restrict P, __global const float* restrict bias,
                                 __global T* restrict C, int M, int N, int splits, float act_min,
                                 float act_max RESIDUAL_PARAM SLOPES_PARAM OUT_SLICE_PARAM
                                     OVERFLOW_PARAM) {
  const int idx = get_global_id(0);
  if (idx >= M * N) return;
  float s = bias[idx % N];
  for (int z = 0; z < splits; ++z) s += P[(long)z * M * N + idx];
#ifdef OUT_SLICE
  const int o = OUT_ROW(idx / N, N) + idx % N;
#else
  const int o = idx;
#endif
  STOREF(SLOPED(ACTIVATE(PLUS_RESIDUAL(s, idx), act_min, act_max), idx % N), C, o);
}
#endif  // SPLIT_K
