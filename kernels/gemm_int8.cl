// The int8 GEMM behind FULLY_CONNECTED and the int8 convolutions (implicit GEMM, 1x1 GEMM):
// out[M][N] = requantize(sum_k A[m][k] * B[n][k] + bias[n]) with int32 accumulation, bit for bit
// with TFLite's kernels. Needs common.cl and quant.cl.
//
// gemm_int8(a, out, prm, b, bias, stage [, rp] [, dw_f, dw_bias, dw_stage] [, ex_b, ex_bias,
//           ex_stage] [, sums] [, res]), or with -DPACKED gemm_int8(a, out, consts [, sums] [, res])
//   __global const char* a: [M][K], or with -DIM2COL the NHWC input [N][H][W][C] read as its
//   im2col matrix (row m = output pixel (n, oh, ow), column k = (kh, kw, c), taps outside the
//   input read a_zero); __global char* out [M][N]; __global const int* prm: the launch's
//   integers (below); b: B [N][Kp / 4], the int8 weights packed four to an int along k (Kp = K
//   rounded up to 4, zero-filled); bias [N]: the model's bias minus a_zero * sum_k B[n][k], so the
//   input's zero point needs no subtraction per element; stage [N]: int2 (multiplier, shift) per
//   output channel (quant.cl).
//   The integers are read from memory, not passed as arguments: NVIDIA's driver charges each
//   argument of a launch on the host, integers included (bench/results/enqueue-probe-*), and a
//   fused layer has about forty. prm[0..9]: with -DPACKED the byte offsets in `consts` of b,
//   bias, stage, rp, dw_f, dw_bias, dw_stage, ex_b, ex_bias, ex_stage (0 where absent); [10..31]
//   M, N, K, Kp, a_zero, up_below, out_zero, act_min, act_max, the geometry (the input's H, W, C;
//   the output's OW, OH; the filter's KW; strides SH, SW; dilations DH, DW; top/left padding PT,
//   PL; read with -DIM2COL or -DDW_A only), k_per_split; [32..35] the depthwise's dw_in_zero,
//   dw_up_below, dw_lo, dw_hi; [36..40] the expand's EC, ex_up_below, ex_zero, ex_lo, ex_hi (0
//   where absent). src_cpp/ops/gemm_int8.cc's GemmInt8Param names the indices.
//   NDRange: 1-D, local = GEMM_WG = (TM / WM) * (TN / WN) (reqd_work_group_size), global =
//   ceil(M / TM) * ceil(N / TN) * GEMM_WG. A group computes a TM x TN block of the output, a
//   work-item WM x WN of it (rows ty + i * TM / WM, columns tx + j * TN / WN), TK4 groups of four
//   k per step through local memory, each a dot4 (dp4a where the device has it).
//   Defines: TM (32), TN (32), TK4 (4), WM (4), WN (4), IM2COL, VEC_A (the four k of a group are
//   four neighbouring bytes of A, 4-byte aligned: K % 4 == 0 for a plain A, C % 4 == 0 with
//   IM2COL), SPLIT_K (below).
//
// Split-K (-DSPLIT_K), for outputs of too few tiles to fill the device: global[1] = splits, and
//   group z = get_group_id(1) sums k in [z * k_per_split, (z + 1) * k_per_split) (k_per_split a
//   multiple of 4), then adds its int32 sums into `sums` [M][N] with atomics (integer sums
//   are exact in any order, so the result is bit for bit the unsplit one) and counts itself in
//   counters[get_group_id(0)]. The group that counts last applies the epilogue, reading the sums
//   back and zeroing them and its counter for the next launch: one launch, no reduction kernel
//   (a launch costs microseconds on some drivers). One more argument: int* sums, [M][N] sums
//   then a counter per tile, all zero before the first launch. Without SPLIT_K, k_per_split
//   >= Kp.
//
// A residual ADD folded in (-DQUANT_RESIDUAL, fusion/attach.h): __global const char* res [M][N],
//   the ADD's other operand, and __global const int* rp, its parameters (quant_add in quant.cl,
//   the output's operand first); the output is the ADD's.
//
// A depthwise convolution folded in as A (-DDW_A), and the expand before it (-DEXPAND_A):
//   gemm_int8_depthwise.cl.
//
// A 2x2 max pool of stride 2 folded in (-DPOOL2, with IM2COL; fusion/pool.cc): the output is the
//   pool's, [n][PH][PW][N] (prm[41], prm[42] PH, PW), and M = 4 * n * PH * PW rows, four to each
//   pooled pixel p = m / 4, its window's pixel m % 4 (row-major) the convolution's output
//   (2 * ph + (m % 4) / 2, 2 * pw + m % 2). A group requantizes its TM x TN block into local
//   memory and writes the largest byte of each window: TFLite's MAX_POOL_2D of the bytes
//   (a pool's output and input share their quantization), after the conv's own clamp and table.
//
// A gate MUL folded in before A (-DGATE_A, plain A only): gemm_int8_gate.cl; one more argument
//   after `res`, and prm[43..49].
//
// A squeeze folded in after the GEMM (-DTAIL_SQUEEZE, fusion/squeeze_tail.cc): the GEMM's bytes
//   are not stored; its tiles add their column sums and the last one runs the squeeze, writing
//   `out` (squeeze_int8_tail.cl's squeeze_int8_tail: the two more, last arguments).
//
// -DPACKED: prm and the constant buffers (b, bias, stage, rp, dw_f, dw_bias, dw_stage, ex_b,
//   ex_bias, ex_stage) are regions of one, `consts`, prm first (offset 0), each other at the
//   byte offset prm gives (16-byte aligned): fewer buffer arguments, each of which NVIDIA's
//   driver charges. With SPLIT_K, the tile counters follow the sums in one buffer either way
//   (counters = sums + M * N).
#include "quant.cl"

#ifndef TM
#define TM 32
#endif
#ifndef TN
#define TN 32
#endif
#ifndef TK4
#define TK4 4
#endif
#ifndef WM
#define WM 4
#endif
#ifndef WN
#define WN 4
#endif
#define RTM (TM / WM)
#define RTN (TN / WN)
#define GEMM_WG (RTM * RTN)
#define A_PER ((TM * TK4 + GEMM_WG - 1) / GEMM_WG)  // A ints a work-item loads per step
#define B_PER ((TN * TK4 + GEMM_WG - 1) / GEMM_WG)
#ifdef SPLIT_K
#define SPLIT_ARGS , __global int* restrict sums
#else
#define SPLIT_ARGS
#endif
// The constant buffers: common.cl's PRM_CONST / PRM_AT.
#ifdef QUANT_RESIDUAL
#define RES_ARG , __global const char* restrict res
#define RP_CONST PRM_CONST(int, rp)
// The output byte of requantized integer v at element idx, column n: plus the residual, as the
// ADD does, then the ADD's table (a PRELU after a block's ADD) where it has one.
#define GEMM_OUT(v, idx, n) quant_store(quant_add((v), res[idx], rp, false), stage, N, (n))
#else
#define RES_ARG
#define RP_CONST
#define GEMM_OUT(v, idx, n) quant_store((v), stage, N, (n))
#endif
#ifdef EXPAND_A
#define EX_ARGS                                                                             \
  , int EC, __global const int *restrict ex_b, __global const int *restrict ex_bias,        \
      __global const int2 *restrict ex_stage, int ex_up_below, int ex_zero, int ex_lo, int ex_hi
#define EX_PASS , EC, ex_b, ex_bias, ex_stage, ex_up_below, ex_zero, ex_lo, ex_hi
#define EX_CONSTS PRM_CONST(int, ex_b) PRM_CONST(int, ex_bias) PRM_CONST(int2, ex_stage)
#define IN_C EC  // channels of `a`
#else
#define EX_ARGS
#define EX_PASS
#define EX_CONSTS
#define IN_C C
#endif
#ifdef DW_A
#define DW_CONSTS PRM_CONST(char, dw_f) PRM_CONST(int, dw_bias) PRM_CONST(int2, dw_stage)
#else
#define DW_CONSTS
#endif
#ifdef PACKED
#define GEMM_CONSTS , __global const char* restrict consts
#else
#define GEMM_CONSTS                                                                          \
  , __global const int* restrict prm PRM_CONST(int, b) PRM_CONST(int, bias)                \
        PRM_CONST(int2, stage) RP_CONST DW_CONSTS EX_CONSTS
#endif
#if defined(IM2COL) || defined(DW_A)
#define PIXEL_A  // A's rows are output pixels of a convolution over `a`
#endif
#if defined(POOL2) && (!defined(IM2COL) || defined(DW_A) || defined(QUANT_RESIDUAL) || TM % 4)
#error "gemm_int8.cl: POOL2 needs IM2COL, no DW_A or residual, and TM a multiple of 4"
#endif
#if (TM % WM) || (TN % WN)
#error "gemm_int8.cl: TM and TN must be multiples of WM and WN"
#endif

#ifdef IM2COL
// Byte (tap / channel) k of the im2col row of a pixel whose tap (0, 0) is at (ih0, iw0) of the
// image starting at `base`; a_zero outside the input or past K.
static inline int im2col_byte(__global const char* a, int base, int ih0, int iw0, int k, int K,
                              int H, int W, int C, int KW, int DH, int DW, int a_zero) {
  if (k >= K) return a_zero;
  const int c = k % C, t = k / C;
  const int ih = ih0 + (t / KW) * DH, iw = iw0 + (t % KW) * DW;
  return ((uint)ih < (uint)H && (uint)iw < (uint)W) ? a[base + (ih * W + iw) * C + c] : a_zero;
}
#endif

#include "gemm_int8_depthwise.cl"

#include "gemm_int8_gate.cl"

#ifdef TAIL_SQUEEZE
#include "squeeze_int8_tail.cl"
#if GEMM_WG > SQ_TILE || (GEMM_WG & (GEMM_WG - 1))
#error "gemm_int8.cl: TAIL_SQUEEZE needs a group of a power of 2 up to SQ_TILE work-items"
#endif
#if defined(POOL2) || defined(QUANT_RESIDUAL)
#error "gemm_int8.cl: TAIL_SQUEEZE takes no pool or residual"
#endif
#define TAIL_ARGS , __global int* restrict tail_sums, __global const char* restrict tail
#ifdef SQ_SOFTMAX
#define TAIL_SM_LOCALS , tail_ev, &tail_inv
#else
#define TAIL_SM_LOCALS
#endif
#else
#define TAIL_ARGS
#endif

__kernel __attribute__((reqd_work_group_size(GEMM_WG, 1, 1))) void gemm_int8(
    __global const char* restrict a,
    __global char* restrict out GEMM_CONSTS SPLIT_ARGS RES_ARG GATE_ARG TAIL_ARGS OVERFLOW_PARAM) {
  PRM_FROM_CONSTS
  PRM_AT(int, b, 0);
  PRM_AT(int, bias, 1);
  PRM_AT(int2, stage, 2);
  const int M = prm[10], N = prm[11], K = prm[12], Kp = prm[13], a_zero = prm[14];
  const int up_below = prm[15], out_zero = prm[16], act_min = prm[17], act_max = prm[18];
  const int H = prm[19], W = prm[20], C = prm[21], OW = prm[22], OH = prm[23], KW = prm[24];
  const int SH = prm[25], SW = prm[26], DH = prm[27], DW = prm[28], PT = prm[29], PL = prm[30];
  const int k_per_split = prm[31];
#ifdef POOL2
  const int PH = prm[41], PW = prm[42];
  __local char pooled[TM][TN];  // the block's output bytes, four rows to a window
#endif
#ifdef QUANT_RESIDUAL
  PRM_AT(int, rp, 3);
#endif
#ifdef DW_A
  PRM_AT(char, dw_f, 4);
  PRM_AT(int, dw_bias, 5);
  PRM_AT(int2, dw_stage, 6);
  const int dw_in_zero = prm[32], dw_up_below = prm[33], dw_lo = prm[34], dw_hi = prm[35];
#endif
#ifdef GATE_A
  const GateParams gp = gate_params(prm);
#endif
#ifdef EXPAND_A
  PRM_AT(int, ex_b, 7);
  PRM_AT(int, ex_bias, 8);
  PRM_AT(int2, ex_stage, 9);
  const int EC = prm[36], ex_up_below = prm[37], ex_zero = prm[38], ex_lo = prm[39];
  const int ex_hi = prm[40];
#endif
  __local int As[TK4][TM];
  __local int Bs[TK4][TN];
  const int lid = get_local_id(0);
  const int groups_n = (N + TN - 1) / TN;
  const int m0 = (get_group_id(0) / groups_n) * TM, n0 = (get_group_id(0) % groups_n) * TN;
  const int tx = lid % RTN, ty = lid / RTN;
  const int zero4 = pack4(a_zero, a_zero, a_zero, a_zero);
#ifdef TAIL_SQUEEZE
  __local int tail_col[TN];  // the tile's column sums of its output bytes
  __local int tail_flag;
  __local int tail_part[SQ_TILE];
  __local int tail_vec1[SQ_VEC / 4], tail_vec2[SQ_VEC / 4];
#ifdef SQ_SOFTMAX
  __local float tail_ev[SQ_TILE];
  __local float tail_inv;
#endif
  for (int e = lid; e < TN; e += GEMM_WG) tail_col[e] = 0;
  barrier(CLK_LOCAL_MEM_FENCE);
#endif

  // The A rows this work-item loads, and where their pixels start (IM2COL, DW_A).
  int a_row[A_PER];
#ifdef PIXEL_A
  int a_base[A_PER], a_ih[A_PER], a_iw[A_PER];
#endif
#pragma unroll
  for (int i = 0; i < A_PER; ++i) {
    const int m = m0 + (lid + i * GEMM_WG) / TK4;
    a_row[i] = m;
#if defined(POOL2)
    // Row m: pixel m % 4 of pooled pixel m / 4's window.
    const int q = m & 3, pw = (m >> 2) % PW, t = (m >> 2) / PW;
    a_base[i] = (t / PH) * H * W * IN_C;
    a_ih[i] = ((t % PH) * 2 + (q >> 1)) * SH - PT;
    a_iw[i] = (pw * 2 + (q & 1)) * SW - PL;
#elif defined(PIXEL_A)
    const int ow = m % OW, t = m / OW;
    a_base[i] = (t / OH) * H * W * IN_C;
    a_ih[i] = (t % OH) * SH - PT;
    a_iw[i] = ow * SW - PL;
#endif
  }

  int acc[WM][WN];
#pragma unroll
  for (int i = 0; i < WM; ++i)
#pragma unroll
    for (int j = 0; j < WN; ++j) acc[i][j] = 0;

  const int Kp4 = Kp >> 2;
  const int kbeg = get_group_id(1) * k_per_split, kend = min(Kp, kbeg + k_per_split);
  // A split may end inside a step: B past its end reads as zero, so those k add nothing.
  const int kend4 = kend >> 2;
  for (int k0 = kbeg; k0 < kend; k0 += 4 * TK4) {
#if defined(IM2COL) && defined(VEC_A) && GEMM_WG % TK4 == 0
    // Every A load of this work-item in this step reads the same k (e % TK4 = lid % TK4): its
    // tap and channel once, not three divisions per load.
    const int k_same = k0 + 4 * (lid % TK4);
    const int c_same = k_same % C, t_same = k_same / C;
    const int dh_same = (t_same / KW) * DH, dw_same = (t_same % KW) * DW;
#endif
#pragma unroll
    for (int i = 0; i < A_PER; ++i) {
      const int e = lid + i * GEMM_WG;
      if (e < TM * TK4) {
        const int g = e % TK4, m = a_row[i], k = k0 + 4 * g;
        int v = zero4;
        if (m < M && k < K) {
#if defined(IM2COL) && defined(VEC_A) && GEMM_WG % TK4 == 0
          const int c = c_same;
          const int ih = a_ih[i] + dh_same, iw = a_iw[i] + dw_same;
#elif defined(IM2COL) && defined(VEC_A)
          const int c = k % C, t = k / C;
          const int ih = a_ih[i] + (t / KW) * DH, iw = a_iw[i] + (t % KW) * DW;
#endif
#if defined(DW_A)
          v = dw_a4(a, a_base[i], a_ih[i], a_iw[i], k, H, W, C, DW_KH, DW_KW, DH, DW, dw_f, dw_bias,
                    dw_stage, dw_in_zero, dw_up_below, a_zero, dw_lo, dw_hi EX_PASS);
#elif defined(IM2COL) && defined(VEC_A)
          if ((uint)ih < (uint)H && (uint)iw < (uint)W)
            v = ((__global const int*)a)[(a_base[i] + (ih * W + iw) * C + c) >> 2];
#elif defined(IM2COL)
          v = pack4(im2col_byte(a, a_base[i], a_ih[i], a_iw[i], k, K, H, W, C, KW, DH, DW, a_zero),
                    im2col_byte(a, a_base[i], a_ih[i], a_iw[i], k + 1, K, H, W, C, KW, DH, DW,
                                a_zero),
                    im2col_byte(a, a_base[i], a_ih[i], a_iw[i], k + 2, K, H, W, C, KW, DH, DW,
                                a_zero),
                    im2col_byte(a, a_base[i], a_ih[i], a_iw[i], k + 3, K, H, W, C, KW, DH, DW,
                                a_zero));
#elif defined(VEC_A)
          v = ((__global const int*)a)[(m * K + k) >> 2];
#else
          const int r = m * K;
          v = pack4(a[r + k], k + 1 < K ? a[r + k + 1] : a_zero, k + 2 < K ? a[r + k + 2] : a_zero,
                    k + 3 < K ? a[r + k + 3] : a_zero);
#endif
#ifdef GATE_A
          v = gate4(v, gate, k, K, gp);
#endif
        }
        As[g][e / TK4] = v;
      }
    }
#pragma unroll
    for (int i = 0; i < B_PER; ++i) {
      const int e = lid + i * GEMM_WG;
      if (e < TN * TK4) {
        const int g = e % TK4, n = n0 + e / TK4, k4 = (k0 >> 2) + g;
        Bs[g][e / TK4] = (n < N && k4 < kend4) ? b[n * Kp4 + k4] : 0;
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
    for (int g = 0; g < TK4; ++g) {
      int av[WM], bv[WN];
#pragma unroll
      for (int i = 0; i < WM; ++i) av[i] = As[g][ty + i * RTM];
#pragma unroll
      for (int j = 0; j < WN; ++j) bv[j] = Bs[g][tx + j * RTN];
#pragma unroll
      for (int i = 0; i < WM; ++i)
#pragma unroll
        for (int j = 0; j < WN; ++j) acc[i][j] = dot4(av[i], bv[j], acc[i][j]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }

#ifdef SPLIT_K
#pragma unroll
  for (int j = 0; j < WN; ++j) {
    const int n = n0 + tx + j * RTN;
    if (n >= N) continue;
#pragma unroll
    for (int i = 0; i < WM; ++i) {
      const int m = m0 + ty + i * RTM;
      if (m < M) global_add(&sums[m * N + n], acc[i][j]);
    }
  }
  // The last split of this tile to finish applies the epilogue. No early return after a
  // barrier: PoCL 3.1 was seen to run the code past one anyway.
  __local int flag;
  if (last_to_count(&sums[(long)M * N + get_group_id(0)], get_num_groups(1), &flag)) {
#endif
#pragma unroll
    for (int j = 0; j < WN; ++j) {
      const int n = n0 + tx + j * RTN;
      if (n >= N) continue;  // POOL2: windows past N or M are never read back
      const int2 ms = stage[n];
      const int bn = bias[n];
#ifdef TAIL_SQUEEZE
      int col = 0;
#endif
#pragma unroll
      for (int i = 0; i < WM; ++i) {
        const int m = m0 + ty + i * RTM;
        if (m >= M) continue;
        const int idx = m * N + n;
#ifdef SPLIT_K
        const int s = global_take(&sums[idx]);
#else
        const int s = acc[i][j];
#endif
#if defined(POOL2)
        pooled[ty + i * RTM][tx + j * RTN] =
            GEMM_OUT(quant_output(s + bn, ms, n, up_below, out_zero, act_min, act_max), idx, n);
#elif defined(TAIL_SQUEEZE)
        col += (int)(char)GEMM_OUT(
            quant_output(s + bn, ms, n, up_below, out_zero, act_min, act_max), idx, n);
#else
        out[idx] =
            GEMM_OUT(quant_output(s + bn, ms, n, up_below, out_zero, act_min, act_max), idx, n);
#endif
      }
#ifdef TAIL_SQUEEZE
      atomic_add(&tail_col[tx + j * RTN], col);
#endif
    }
#ifdef POOL2
    // Each window's largest byte, one pooled pixel and channel at a time (M and TM are multiples
    // of four: a window's rows are all below M or none).
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int e = lid; e < (TM / 4) * TN; e += GEMM_WG) {
      const int r = (e / TN) * 4, c = e % TN, p = (m0 + r) >> 2, n = n0 + c;
      if (m0 + r < M && n < N)
        out[p * N + n] = max(max(pooled[r][c], pooled[r + 1][c]),
                             max(pooled[r + 2][c], pooled[r + 3][c]));
    }
#endif
#ifdef TAIL_SQUEEZE
    squeeze_int8_tail(tail_sums, tail, N, n0, TN, out, tail_col, &tail_flag, tail_part, tail_vec1,
                      tail_vec2 TAIL_SM_LOCALS);
#endif
#ifdef SPLIT_K
  }
#endif
}

