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
