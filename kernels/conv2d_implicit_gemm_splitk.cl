// One split-K kernel of conv2d_implicit_gemm.cl, included there once per form: SPLITK_KERNEL
// names it; with SPLITK_STORES_OUTPUT the split of each tile that counts itself last in
// counters[tile] (group_sync.cl) adds the tile's splits in split order and stores it as the
// whole kernel would (bias, residual, activation, slopes, slice).
// SPLITK_KERNEL(in, P, prm, filter, bias, ...) or with -DPACKED (in, P, consts); storing the
// output (in, P, out[, residual], counters, ...): int counters [tiles], zero before the first
// launch and left zero by each.
// NDRange: 2-D, local (GEMM_WG, 1), global (as conv2d_implicit_gemm, splits).
// Built alone (not included) it is an empty program.
#ifdef SPLITK_KERNEL
#ifdef SPLITK_STORES_OUTPUT
#include "group_sync.cl"
// Splits whose loads of the tile are issued together before their adds: one round trip to L2 a
// batch, with at most 64 loads in flight per work-item (registers the GEMM's main loop has freed).
#define SPLIT_BATCH_RAW (64 / (WPT_M * WPT_N))
#define SPLIT_BATCH (SPLIT_BATCH_RAW < 1 ? 1 : SPLIT_BATCH_RAW > 8 ? 8 : SPLIT_BATCH_RAW)
// The sums of a tile's `splits` partial tiles (store_partial_tile's elements, P[z][M][N]), added
// in split order whichever group came last, read where the other groups' stores landed
// (group_sync.cl's global_load_float; the caller has passed last_to_count). One round trip per
// element and split (the first version's) ran the models up to 2.7x slower on the H200, one per
// split up to 1.4x: the last group's reads are the launch's tail.
static inline void load_split_sums(float acc[WPT_M][WPT_N], __global const float* P, int M, int N,
                                   int splits, int m0, int n0, int tx, int ty) {
  int offset[WPT_M][WPT_N];  // the element's index in a split, or -1 past the output's edge
#pragma unroll
  for (int i = 0; i < WPT_M; ++i) {
    const int m = m0 + ROW_OF(ty, i);
#pragma unroll
    for (int j = 0; j < WPT_N; ++j) {
      const int n = n0 + COL_OF(tx, j);
      offset[i][j] = m < M && n < N ? m * N + n : -1;
      acc[i][j] = 0.0f;
    }
  }
  const long split_stride = (long)M * N;
  for (int z0 = 0; z0 < splits; z0 += SPLIT_BATCH) {
    float v[SPLIT_BATCH][WPT_M][WPT_N];
#pragma unroll
    for (int u = 0; u < SPLIT_BATCH; ++u) {
      __global const float* Pz = P + (z0 + u) * split_stride;
      const bool split_in = z0 + u < splits;
#pragma unroll
      for (int i = 0; i < WPT_M; ++i)
#pragma unroll
        for (int j = 0; j < WPT_N; ++j)
          v[u][i][j] = split_in && offset[i][j] >= 0 ? global_load_float(Pz + offset[i][j]) : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < SPLIT_BATCH; ++u)
#pragma unroll
      for (int i = 0; i < WPT_M; ++i)
#pragma unroll
        for (int j = 0; j < WPT_N; ++j) acc[i][j] += v[u][i][j];
  }
}
#define SPLIT_OUT_PARAM , __global T* restrict out RESIDUAL_PARAM, __global int* restrict counters
#define SPLIT_P_RESTRICT
#else
#define SPLIT_OUT_PARAM
#define SPLIT_P_RESTRICT restrict
#endif
__kernel __attribute__((reqd_work_group_size(GEMM_WG, 1, 1))) void SPLITK_KERNEL(
    __global const T* restrict in,
    __global float* SPLIT_P_RESTRICT P SPLIT_OUT_PARAM IG_CONSTS OVERFLOW_PARAM) {
  IG_READ
#ifndef SPLITK_STORES_OUTPUT
  (void)bias, (void)act_min, (void)act_max;
#ifdef CHANNEL_SLOPES
  (void)slopes;  // the reduce applies them
#endif
#endif
  __local float As[2 * TILE_K][TILE_M + LPAD] __attribute__((aligned(16)));
  __local float Bs[2 * TILE_K][TILE_N + LPAD] __attribute__((aligned(16)));
  const int lid = get_local_id(0);
  const int2 o = group_tile_origin(OC);
#ifdef DW_A
  const int2 k = split_k_range(C, k_per_split);
#else
  const int2 k = split_k_range(KH * KW * C, k_per_split);
#endif
  const int M = N * OH * OW;
  float acc[WPT_M][WPT_N];
  igemm_accumulate(in, filter, N, H, W, C, OH, OW, OC, KH, KW, SH, SW, DH, DW, PT, PL, k.x, k.y,
                   o.x, o.y, &As[0][0], &Bs[0][0], acc DW_PASS);
  store_partial_tile(acc, P + (long)get_group_id(1) * M * OC, M, OC, o.x, o.y, lid % RT_N,
                     lid / RT_N);
#ifdef SPLITK_STORES_OUTPUT
  __local int flag;
  if (last_to_count(counters + get_group_id(0), get_num_groups(1), &flag)) {
    load_split_sums(acc, P, M, OC, get_num_groups(1), o.x, o.y, lid % RT_N, lid / RT_N);
#ifdef OUT_SLICE
    const int out_ldc = prm[36], out_off = prm[37];  // IgParam's kOutSlice
#endif
    store_output_tile(acc, bias, out, M, OC, o.x, o.y, lid % RT_N, lid / RT_N, act_min,
                      act_max RESIDUAL_PASS SLOPES_PASS OUT_SLICE_PASS OVERFLOW_PASS);
  }
#endif
}
#undef SPLIT_OUT_PARAM
#undef SPLIT_P_RESTRICT
#endif  // SPLITK_KERNEL
