// Winograd F(4x4, 3x3) in one kernel for stride-1, dilation-1 CONV_2D (NHWC, OHWI filter), KH
// and KW in 3..9 (sums of zero-padded 3x3 sub-filters, cut as in conv2d_winograd4.cl). The input
// transform, the 36 products and the output transform stay on chip: conv2d_winograd4.cl's three
// kernels pass V [36][P][C'] and Mo [36][P][OC] through global memory instead (Mo alone is 823 MB
// for 1440x1984 4 -> 32, and V is 9x the input for a 7x7 filter). Needs common.cl; the 1-D
// transforms are in winograd4_transforms.cl.
//
// A work-group owns TP output tiles, consecutive along W in one row of tiles of one image, times
// OCB output channels. It walks the reduction over k = s * C + c (sub-filter s, channel c; C' =
// SS * C values) in chunks of CC:
//   1. the group transforms the 6x6 input patches of its TP tiles for the chunk's CC values of k
//      into local Vs [36][CC][TP] (taps outside the image read 0: SAME padding is PT / PL); with
//      U_LOCAL it also copies the chunk of U to local Us [CC][36][OCB];
//   2. each work-item adds, for its 36 / PS positions xi, its RT tiles x RO output channels:
//      M[xi][t][o] += Vs[xi][k][t] * U[k][xi][o], a register block of 36 / PS * RT * RO floats.
//      Its tiles and its channels are consecutive, so each step reads two short vectors (RT
//      floats of Vs, RO of U), shared by the work-items of the same tiles or channels.
// With PS = 1, after the last chunk each work-item holds all 36 positions of its (tile, channel)
// pairs, so A^T M A, bias, residual, clamp and the bounds-checked store of the 4x4 outputs need no
// exchange. Its register block is then 36 * RT * RO floats, which caps RT * RO at about 4: two
// loads per 4 FMAs. With PS > 1 the 36 positions are split over PS work-items (36 / PS each),
// so the same registers hold a larger RT x RO block (fewer loads per FMA); M then goes through
// local Ms [36][TP][OCB] (reusing the staging memory), and the group's work-items take its
// (tile, channel) pairs for the output transform, channel fastest so the stores coalesce. Output
// tile (n, th, tw) covers rows 4*th..4*th+3, columns 4*tw..4*tw+3 and, for sub-filter (a, b), reads
// the patch with corner (4*th - PT + 3a, 4*tw - PL + 3b); TH = ceil(OH / 4), TW = ceil(OW / 4), TB
// = ceil(TW / TP) blocks of tiles per row of tiles, OB = ceil(OC / OCB). Matrices B^T, G, A^T:
// conv2d_winograd4.cl.
//
// Layouts: in [N][H][W][C], out [N][OH][OW][OC] (T); bias [OC] float; residual like out.
//   U [OB][CPAD][36][OCB] float, U[ob][s*C + c][xi][o] = (G g_s G^T)[i][j] of output channel
//   ob * OCB + o, made once; CPAD = C' rounded up to a multiple of CC. Zero past OC and C': the
//   chunk loop needs no tail checks (a zero V meets a zero U), and a group's chunk is CC * 36 * OCB
//   contiguous floats. Float even with half storage: F(4x4)'s output transform magnifies rounding
//   (see TRANSFORMED_FLOAT in conv2d_winograd4.cl), and U is small.
//
// winograd_f4_fused_filter_transform(filter, U, C, OC, KH, KW, CPAD)
//   __global const T* filter [OC][KH][KW][C]; __global float* U (above)
//   NDRange: 1-D, global >= OB * OCB * CPAD (any rounding), any local size.
//
// conv2d_winograd4_fused(in, U, bias, out, N, H, W, C, OH, OW, OC, PT, PL, KH, KW, CPAD,
//                        act_min, act_max, filter[, residual][, slopes])
//   filter: the OHWI filter [OC][KH][KW][C] (T), for the tiles computed directly because their
//   outputs are not all finite (store_winograd_tile, common.cl).
//   NDRange: 1-D, local = WG = PS * (TP / RT) * (OCB / RO) (reqd_work_group_size),
//            global = WG * OB * N * TH * TB. Group g takes channel block g % OB of tile block
//            g / OB (row n * TH + th, block tb): the OB groups that share input patches run
//            side by side, so the patches come from cache after the first.
//
// Defines (the host fits them to the device's work-group and local memory limits):
//   TP (16): tiles per group; RT (2): tiles per work-item; TP % RT == 0.
//   OCB (32): output channels per group; RO (2): per work-item; OCB % RO == 0.
//   CC (4): values of k per chunk (the filter's CPAD must be a multiple of it).
//   U_LOCAL (1): stage U's chunk in local memory; 0 reads it from global (cached) in the loop.
//   PS (1): work-items per (tiles, channels) block, each with 36 / PS positions; 36 % PS == 0.
// Local memory: 4 * 36 * max(TP * CC + U_LOCAL * CC * OCB, PS > 1 ? TP * OCB : 0) bytes (27 KB
// at the defaults).

#ifndef TP
#define TP 16
#endif
#ifndef RT
#define RT 2
#endif
#ifndef OCB
#define OCB 32
#endif
#ifndef RO
#define RO 2
#endif
#ifndef CC
#define CC 4
#endif
#ifndef U_LOCAL
#define U_LOCAL 1
#endif

#ifndef PS
#define PS 1
#endif

#if (TP % RT) || (OCB % RO) || (36 % PS)
#error "TP must be a multiple of RT, OCB a multiple of RO and 36 a multiple of PS"
#endif

#define TGROUPS (TP / RT)   // work-items along the tiles
#define OGROUPS (OCB / RO)  // work-items along the output channels (fastest in the group)
#define PP (36 / PS)        // positions per work-item
#define FUSED_WG (PS * TGROUPS * OGROUPS)
#define STAGE_FLOATS (36 * CC * TP + U_LOCAL * CC * 36 * OCB)
#define EXCHANGE_FLOATS (PS > 1 ? 36 * TP * OCB : 0)

#include "winograd4_transforms.cl"

__kernel void winograd_f4_fused_filter_transform(__global const T* restrict filter,
                                                 __global float* restrict U, int C, int OC, int KH,
                                                 int KW, int CPAD OVERFLOW_PARAM) {
  const int SW = WINO_SUBS(KW);
  const int CP = WINO_SUBS(KH) * SW * C;
  const int OB = (OC + OCB - 1) / OCB;
  const int idx = get_global_id(0);
  if (idx >= OB * OCB * CPAD) return;
  const int o = idx % OCB;  // fastest: neighbouring work-items store neighbouring floats
  const int k = (idx / OCB) % CPAD;
  const int ob = idx / (OCB * CPAD);
  const int oc = ob * OCB + o;
  float u[36];
  if (oc < OC && k < CP) {
    const int s = k / C;
    winograd_f4_filter_tile(filter, oc, k % C, 3 * (s / SW), 3 * (s % SW), KH, KW, C, u);
  } else {
#pragma unroll
    for (int xi = 0; xi < 36; ++xi) u[xi] = 0.0f;
  }
  __global float* dst = U + (ob * CPAD + k) * 36 * OCB + o;
#pragma unroll
  for (int xi = 0; xi < 36; ++xi) dst[xi * OCB] = u[xi];
}

__kernel __attribute__((reqd_work_group_size(FUSED_WG, 1, 1))) void conv2d_winograd4_fused(
    __global const T* restrict in, __global const float* restrict U,
    __global const float* restrict bias, __global T* restrict out, int N, int H, int W, int C,
    int OH, int OW, int OC, int PT, int PL, int KH, int KW, int CPAD, float act_min,
    float act_max, __global const T* restrict filter RESIDUAL_PARAM SLOPES_PARAM OVERFLOW_PARAM) {
  // Vs, then Us (36 * CC * TP floats in: 16-byte aligned for vstore4); Ms after the loop.
  __local float lmem[STAGE_FLOATS > EXCHANGE_FLOATS ? STAGE_FLOATS : EXCHANGE_FLOATS]
      __attribute__((aligned(16)));
  __local float* Vs = lmem;
#if U_LOCAL
  __local float* Us = lmem + 36 * CC * TP;
#endif
  const int SW = WINO_SUBS(KW);
  const int CP = WINO_SUBS(KH) * SW * C;
  const int TH = (OH + 3) / 4, TW = (OW + 3) / 4;
  const int TB = (TW + TP - 1) / TP;
  const int OB = (OC + OCB - 1) / OCB;
  const int grp = get_group_id(0);
  const int ob = grp % OB;
  const int tb = (grp / OB) % TB;
  const int row = grp / (OB * TB);  // n * TH + th
  if (row >= N * TH) return;        // whole groups only: no barrier is left waiting
  const int n = row / TH, th = row % TH;
  const int tw0 = tb * TP;
  const int lid = get_local_id(0);
  const int og = lid % OGROUPS, tg = (lid / OGROUPS) % TGROUPS,
            xi0 = lid / (OGROUPS * TGROUPS) * PP;

  float acc[PP][RT][RO];
#pragma unroll
  for (int p = 0; p < PP; ++p)
#pragma unroll
    for (int i = 0; i < RT; ++i)
#pragma unroll
      for (int r = 0; r < RO; ++r) acc[p][i][r] = 0.0f;

  for (int k0 = 0; k0 < CPAD; k0 += CC) {
    // 1. Input transform of the chunk: one (tile, k) patch per work-item and round, k fastest
    // so that neighbouring work-items read neighbouring channels of one pixel.
    for (int q = lid; q < TP * CC; q += FUSED_WG) {
      const int kk = q % CC, t = q / CC;
      const int k = k0 + kk, tw = tw0 + t;
      if (k < CP && tw < TW) {
        const int sub = k / C, c = k - sub * C;
        const int ih0 = th * 4 - PT + 3 * (sub / SW), iw0 = tw * 4 - PL + 3 * (sub % SW);
        // Column by column (s = B^T d), then row by row (v = s B), storing each row as it is
        // done: 36 live floats instead of 72, next to the 36 * RT * RO accumulators.
        float s[36];
#pragma unroll
        for (int j = 0; j < 6; ++j) {
          const int iw = iw0 + j;
          float x[6];
#pragma unroll
          for (int i = 0; i < 6; ++i) {
            const int ih = ih0 + i;
            x[i] = ((uint)ih < (uint)H && (uint)iw < (uint)W)
                       ? LOADF(in, ((n * H + ih) * W + iw) * C + c)
                       : 0.0f;
          }
          winograd_f4_bt(x, 1, s + j, 6);
        }
#pragma unroll
        for (int i = 0; i < 6; ++i) {
          float v[6];
          winograd_f4_bt(s + 6 * i, 1, v, 1);
#pragma unroll
          for (int j = 0; j < 6; ++j) Vs[((6 * i + j) * CC + kk) * TP + t] = v[j];
        }
      } else {
#pragma unroll
        for (int xi = 0; xi < 36; ++xi) Vs[(xi * CC + kk) * TP + t] = 0.0f;
      }
    }
    // The chunk of U: CC * 36 * OCB contiguous floats (a multiple of 4 from a multiple of 4).
    __global const float* uchunk = U + (ob * CPAD + k0) * 36 * OCB;
#if U_LOCAL
    for (int e = get_local_id(0); e < CC * 9 * OCB; e += FUSED_WG)
      vstore4(vload4(e, uchunk), e, Us);
    __local const float* uc = Us;
#else
    __global const float* uc = uchunk;
#endif
    barrier(CLK_LOCAL_MEM_FENCE);

    // 2. The products of the chunk for this work-item's positions and register block.
    for (int kk = 0; kk < CC; ++kk) {
#pragma unroll
      for (int p = 0; p < PP; ++p) {
        const int xi = xi0 + p;
        float v[RT], u[RO];
#pragma unroll
        for (int i = 0; i < RT; ++i) v[i] = Vs[(xi * CC + kk) * TP + tg * RT + i];
#pragma unroll
        for (int r = 0; r < RO; ++r) u[r] = uc[(kk * 36 + xi) * OCB + og * RO + r];
#pragma unroll
        for (int i = 0; i < RT; ++i)
#pragma unroll
          for (int r = 0; r < RO; ++r) acc[p][i][r] = fma(v[i], u[r], acc[p][i][r]);
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);  // Vs (and Us) are rewritten by the next chunk
  }

  // 3. Output transform, bias, residual, clamp and store, per (tile, channel) of the block.
#if PS > 1
  // The loop's last barrier freed the staging memory: gather the positions in Ms.
  __local float* Ms = lmem;
#pragma unroll
  for (int p = 0; p < PP; ++p)
#pragma unroll
    for (int i = 0; i < RT; ++i)
#pragma unroll
      for (int r = 0; r < RO; ++r)
        Ms[((xi0 + p) * TP + tg * RT + i) * OCB + og * RO + r] = acc[p][i][r];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int q = lid; q < TP * OCB; q += FUSED_WG) {
    const int t = q / OCB, o = q % OCB;
    const int tw = tw0 + t, oc = ob * OCB + o;
    if (tw < TW && oc < OC) {
      float m[36];
#pragma unroll
      for (int xi = 0; xi < 36; ++xi) m[xi] = Ms[(xi * TP + t) * OCB + o];
      winograd_f4_output_tile(m, bias[oc], out, n, th * 4, tw * 4, OH, OW, OC, oc, act_min,
                              act_max, in, filter, H, W, C, KH, KW, PT, PL
                                  RESIDUAL_PASS SLOPES_PASS OVERFLOW_PASS);
    }
  }
#else
  // Conditions, not breaks: a loop with an early exit is not unrolled, and acc needs constant
  // indices to stay in registers.
#pragma unroll
  for (int i = 0; i < RT; ++i) {
    const int tw = tw0 + tg * RT + i;
    const int oh0 = th * 4, ow0 = tw * 4;
#pragma unroll
    for (int r = 0; r < RO; ++r) {
      const int oc = ob * OCB + og * RO + r;
      if (tw < TW && oc < OC) {
        float m[36];
#pragma unroll
        for (int xi = 0; xi < 36; ++xi) m[xi] = acc[xi][i][r];
        winograd_f4_output_tile(m, bias[oc], out, n, oh0, ow0, OH, OW, OC, oc, act_min,
                                act_max, in, filter, H, W, C, KH, KW, PT, PL
                                    RESIDUAL_PASS SLOPES_PASS OVERFLOW_PASS);
      }
    }
  }
#endif
}
