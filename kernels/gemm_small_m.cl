// Batch-1 (or small batch) FULLY_CONNECTED and 1x1 convolutions over at most SM_MAX_M pixels
// (squeeze-excite convs on a 1x1 map): C = act(A * B^T + bias [+ residual]), with A the activations
// (row-major M x K, 1 <= M <= SM_MAX_M) and B the TFLite weights (row-major N x K). Needs common.cl.
//
// gemm_nt_small_m(A, B, bias, C, M, N, K, act_min, act_max, b_max[, residual][, slopes])
//   __global const T* A [M][K]; __global const T* B [N][K]; __global const float* bias [N];
//   __global T* C [M][N]; int M, N, K (1 <= M <= SM_MAX_M); float act_min, act_max; float
//   b_max: the largest |B| (the host knows its constant weights; with TRACK_B_MAX the kernel
//   finds it for its columns itself, for weights computed at run time); with
//   HAS_RESIDUAL, __global const T* residual [M][N], added before the activation; with
//   CHANNEL_SLOPES (common.cl), a folded PRELU's slopes [N] after it
//   Batch-1 (or small batch) FULLY_CONNECTED: memory-bound, so B is read exactly once, coalesced
//   along K; a group owns SM_N consecutive output columns, its SM_WG work-items stride over K and
//   the partial sums are reduced in local memory. Where K * max|A| (over the rows) * max|B row|
//   reaches FLT_MAX an output is summed again in the order of TFLite's CPU kernel (its
//   saturation).
//   NDRange: 1-D. local = SM_WG (reqd_work_group_size), global = ceil(N / SM_N) * SM_WG.
//   Defines: SM_WG (128, a power of two), SM_N (8), SM_MAX_M (8), TRACK_B_MAX.

#ifndef SM_WG
#define SM_WG 128
#endif
#ifndef SM_N
#define SM_N 8
#endif
#ifndef SM_MAX_M
#define SM_MAX_M 8
#endif

static inline float max4(float4 v) { return fmax(fmax(v.x, v.y), fmax(v.z, v.w)); }

// sum over k of a[k] * b[k] in the order of TFLite's CPU FULLY_CONNECTED (Eigen's GEMM on x86),
// each product rounded before it is added, so it saturates (or not) where the CPU does: with
// several rows, in index order; with one (Eigen's GEMV), in 4 lanes (k % 4) summed as
// (l0 + l2) + (l1 + l3), then the last K % 4 products in order.
static inline float cpu_order_dot(__global const T* a, __global const T* b, int K, int M) {
#pragma OPENCL FP_CONTRACT OFF
  const int lanes = M == 1 ? 4 : 1;
  const int whole = K / lanes * lanes;
  float l[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int k = 0; k < whole; ++k) {
    const float p = LOADF(a, k) * LOADF(b, k);
    l[k % lanes] = l[k % lanes] + p;
  }
  float acc = lanes == 4 ? (l[0] + l[2]) + (l[1] + l[3]) : l[0];
  for (int k = whole; k < K; ++k) {
    const float p = LOADF(a, k) * LOADF(b, k);
    acc = acc + p;
  }
  return acc;
}

// Whether a split sum may differ from TFLite's order: where K * max|a| * max|b| (a bound of
// every partial sum of a row's products) reaches FLT_MAX the split sums may overflow where
// TFLite's own order does not, or to the other sign, or to NaN. |A| is bounded over all the
// group's rows at once (one register, no per-row state in the loop: the kernel is bound by
// memory and its occupancy). Without TRACK_B_MAX the host's b_max bounds every column, so each
// work-item compares its own bound and marks the group (a plain store, no atomics); with
// TRACK_B_MAX (weights computed at run time) the group's maxima of |A| and of each column's
// |B| are kept as the bits of non-negative floats, whose int order is theirs.
#ifdef TRACK_B_MAX
#define MAXIMA (1 + SM_N)
#define TRACK_B(j, v) bmax[j] = fmax(bmax[j], fabs(v))
#define PUBLISH(amax)                                            \
  do {                                                           \
    atomic_max(&maxima[0], as_int(max4(amax)));                  \
    for (int j = 0; j < SM_N; ++j)                               \
      atomic_max(&maxima[1 + j], as_int(max4(bmax[j])));         \
  } while (0)
#define SAFE(j) ((float)K * as_float(maxima[0]) * as_float(maxima[1 + (j)]) < FLT_MAX)
#else
#define MAXIMA 1
#define TRACK_B(j, v)
#define PUBLISH(amax) \
  if (!((float)K * max4(amax) * b_max < FLT_MAX)) maxima[0] = 1
#define SAFE(j) (maxima[0] == 0)
#endif

__kernel __attribute__((reqd_work_group_size(SM_WG, 1, 1))) void gemm_nt_small_m(
    __global const T* restrict A, __global const T* restrict B, __global const float* restrict bias,
    __global T* restrict C, int M, int N, int K, float act_min, float act_max,
    float b_max RESIDUAL_PARAM SLOPES_PARAM OVERFLOW_PARAM) {
  __local float red[SM_MAX_M * SM_N][SM_WG];
  // SAFE above; amax (bmax): this work-item's largest |A| over its rows (|B| per column).
  __local int maxima[MAXIMA];
  const int lid = get_local_id(0);
  if (lid < MAXIMA) maxima[lid] = 0;
  barrier(CLK_LOCAL_MEM_FENCE);
  const int n0 = get_group_id(0) * SM_N;
  float acc[SM_MAX_M][SM_N];
  float4 amax = (float4)(0.0f);
#pragma unroll
  for (int m = 0; m < SM_MAX_M; ++m)
#pragma unroll
    for (int j = 0; j < SM_N; ++j) acc[m][j] = 0.0f;
  // Rows past N re-read row N-1 (always valid memory); their sums are never stored.
  int brow[SM_N];
#pragma unroll
  for (int j = 0; j < SM_N; ++j) brow[j] = min(n0 + j, N - 1);
#ifdef TRACK_B_MAX
  float4 bmax[SM_N];
#pragma unroll
  for (int j = 0; j < SM_N; ++j) bmax[j] = (float4)(0.0f);
#endif

  if ((K & 3) == 0) {
    const int K4 = K >> 2;
    for (int k4 = lid; k4 < K4; k4 += SM_WG) {
      float4 b[SM_N];
#pragma unroll
      for (int j = 0; j < SM_N; ++j) {
        b[j] = LOADF4(B, brow[j] * K4 + k4);
        TRACK_B(j, b[j]);
      }
#pragma unroll
      for (int m = 0; m < SM_MAX_M; ++m) {
        if (m < M) {
          const float4 a = LOADF4(A, m * K4 + k4);
          amax = fmax(amax, fabs(a));
#pragma unroll
          for (int j = 0; j < SM_N; ++j) acc[m][j] += dot(a, b[j]);
        }
      }
    }
  } else {
    for (int k = lid; k < K; k += SM_WG) {
      float b[SM_N];
#pragma unroll
      for (int j = 0; j < SM_N; ++j) {
        b[j] = LOADF(B, brow[j] * K + k);
        TRACK_B(j, (float4)(b[j]));
      }
#pragma unroll
      for (int m = 0; m < SM_MAX_M; ++m) {
        if (m < M) {
          const float a = LOADF(A, m * K + k);
          amax.x = fmax(amax.x, fabs(a));
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
  PUBLISH(amax);
  barrier(CLK_LOCAL_MEM_FENCE);
  // The tree over the lanes that summed anything (past K's lanes hold zeros), each level's
  // (slot, lane) pairs spread over the whole group: a squeeze-excite conv at batch 8 (64 slots,
  // K of 32) took 14 us walking 64 slots per lane down all 7 levels. Same pairs, same sums.
  const int slots = min(M, SM_MAX_M) * SM_N;
  const int lanes = min(SM_WG, (K & 3) == 0 ? K >> 2 : K);
  int s = 1, log2s = 0;
  while (2 * s < lanes) s *= 2, ++log2s;
  for (; s > 0 && lanes > 1; s >>= 1, --log2s) {
    for (int p = lid; p < slots << log2s; p += SM_WG) {
      const int q = p >> log2s, l = p & (s - 1);
      red[q][l] += red[q][l + s];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lid < slots) {
    const int m = lid / SM_N, n = n0 + lid % SM_N;
    if (n < N) {
      const float sum =
          SAFE(lid % SM_N) ? red[lid][0] : cpu_order_dot(A + (long)m * K, B + (long)n * K, K, M);
      STOREF(SLOPED(ACTIVATE(PLUS_RESIDUAL(sum + bias[n], m * N + n), act_min, act_max), n), C,
             m * N + n);
    }
  }
}
