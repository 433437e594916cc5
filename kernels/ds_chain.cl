// A chain of depthwise-separable blocks on a small map in one launch, one work-group per image:
// each block a depthwise (DSC_KH x DSC_KW, depth multiplier 1, stride 1, the map's size kept)
// and a 1x1 convolution, each with its clamp. On a map of a few hundred pixels and tens of
// channels each block's kernels are chains of loads and barriers, not arithmetic, and a launch
// apiece costs the host more than the device (docs/performance.md): one group runs them all out
// of local memory, the activations never leaving it between the first load and the last store,
// and each block's constants are loaded while the block before computes. Needs common.cl.
//
// ds_chain(in, out, consts, lm, H, W, blocks, x_floats, k_floats)
//   __global const T* in [N][H][W][C0]; __global T* out [N][H][W][OC_last];
//   __global const char* consts: int table [blocks][DSC_FIELDS] at byte 0; then per block its
//     float constants, laid out as local memory holds them: dw_f [KH][KW][C], dw_bias [C],
//     pw_bias [OC], pw_f [C][OC] (the 1x1's filter transposed). Fields: C, OC, DH, DW, PT, PL,
//     the byte offset of the block's constants, ROWS (the 1x1's weight rows local memory holds at
//     a time), the float4s of its constants through its first ROWS rows, and the bits of the
//     floats dw_min, dw_max, pw_min, pw_max (each stage's clamp, a NaN kept as the other kernels
//     keep it).
//   __local float* lm: x_floats (H * W * max(C, OC) over the blocks) + k_floats (the largest
//     block's constants through its first ROWS rows) + blocks * DSC_FIELDS + 3.
//   NDRange: 1-D, local DSC_WG, global N * DSC_WG. C, OC and ROWS multiples of 4.
//   Defines: DSC_WG (the group); DSC_KH, DSC_KW (every block's depthwise filter); DSC_R (the
//   depthwise's output rows per work-item: the rows' taps share their loads); DSC_PX (pixels
//   per work-item in the 1x1's tiles of PX x 4 outputs); DSC_DWPT, DSC_PWT, DSC_PF (the most
//   depthwise items, 1x1 tiles and prefetched float4s a work-item holds: ceil(ceil(H / R) * W *
//   C / 4 / DSC_WG), ceil(ceil(H * W / PX) * OC / 4 / DSC_WG) and ceil(k_floats / 4 / DSC_WG)).

#ifndef DSC_WG
#define DSC_WG 256
#endif
#ifndef DSC_KH
#define DSC_KH 3
#endif
#ifndef DSC_KW
#define DSC_KW 3
#endif
#ifndef DSC_R
#define DSC_R 4
#endif
#ifndef DSC_PX
#define DSC_PX 4
#endif
#ifndef DSC_DWPT
#define DSC_DWPT 1
#endif
#ifndef DSC_PWT
#define DSC_PWT 1
#endif
#ifndef DSC_PF
#define DSC_PF 1
#endif
#define DSC_FIELDS 16

// CLAMP_KEEP_NAN on a float4.
static inline float4 dsc_clamp(float4 x, float lo, float hi) {
  x = select(x, (float4)(lo), x < (float4)(lo));
  return select(x, (float4)(hi), x > (float4)(hi));
}

__kernel __attribute__((reqd_work_group_size(DSC_WG, 1, 1))) void ds_chain(
    __global const T* restrict in, __global T* restrict out, __global const char* restrict consts,
    __local float* lm, int H, int W, int blocks, int x_floats, int k_floats OVERFLOW_PARAM) {
  // float4 reads of local memory need 16-byte alignment, which a local argument need not have
  // (NVIDIA's is 4): the plan allocates 3 floats more.
  __local float4* x4 = (__local float4*)(lm + (((16 - ((uint)(size_t)lm & 15)) & 15) >> 2));
  __local float4* k4 = x4 + (x_floats >> 2);  // the block's constants
  __local int* tab = (__local int*)(k4 + (k_floats >> 2));
  const int n = get_group_id(0);
  const int lid = get_local_id(0);
  const int HW = H * W;
  const int C0 = ((__global const int*)consts)[0];
  // The table, the input and the first block's constants: all loads issued before any store.
  {
    const int tn = blocks * DSC_FIELDS;
    const int first4 = ((__global const int*)consts)[8];
    __global const float4* kf = (__global const float4*)(consts + ((__global const int*)consts)[6]);
    __global const T* src = in + (size_t)n * HW * C0;
    const int xn = HW * (C0 >> 2);
    for (int i0 = 0; i0 < max(max(tn, first4), xn); i0 += DSC_WG) {
      const int i = i0 + lid;
      int t = 0;
      float4 k = 0, x = 0;
      if (i < tn) t = ((__global const int*)consts)[i];
      if (i < first4) k = kf[i];
      if (i < xn) x = LOADF4(src, i);
      if (i < tn) tab[i] = t;
      if (i < first4) k4[i] = k;
      if (i < xn) x4[i] = x;
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int b = 0; b < blocks; ++b) {
    __local const int* p = tab + b * DSC_FIELDS;
    const int C = p[0], OC = p[1], DH = p[2], DW = p[3], PT = p[4], PL = p[5];
    const int rows = p[7];
    const float dw_min = as_float(p[12]), dw_max = as_float(p[13]);
    const float pw_min = as_float(p[14]), pw_max = as_float(p[15]);
    const int c4 = C >> 2, oc4 = OC >> 2;
    __global const float4* kf = (__global const float4*)(consts + p[6]);
    __local float4* kdw = k4;  // [KH][KW][C]
    __local float4* kdb = kdw + DSC_KH * DSC_KW * c4;
    __local float4* kpb = kdb + c4;
    __local float4* kpw = kpb + oc4;  // [rows][OC]
    const int pw_at = DSC_KH * DSC_KW * c4 + c4 + oc4;  // kpw's float4 in kf

    // The depthwise into registers: each work-item DSC_R rows of one column of a channel quad,
    // neighbours the next quads (the rows' taps read each input row once).
    const int hb = (H + DSC_R - 1) / DSC_R;
    float4 d[DSC_DWPT][DSC_R];
#pragma unroll
    for (int r = 0; r < DSC_DWPT; ++r) {
      const int e = min(lid + r * DSC_WG, hb * W * c4 - 1);  // past the end: a copy of the last
      const int q = e % c4, col = e / c4;
      const int ow = col % W, oh0 = (col / W) * DSC_R;
      float4 f[DSC_KH][DSC_KW];
#pragma unroll
      for (int kh = 0; kh < DSC_KH; ++kh)
#pragma unroll
        for (int kw = 0; kw < DSC_KW; ++kw) f[kh][kw] = kdw[(kh * DSC_KW + kw) * c4 + q];
      const float4 bias = kdb[q];
#pragma unroll
      for (int j = 0; j < DSC_R; ++j) {
        const int oh = oh0 + j;
        float4 acc = bias;
#pragma unroll
        for (int kh = 0; kh < DSC_KH; ++kh) {
          const int ih = oh - PT + kh * DH;
#pragma unroll
          for (int kw = 0; kw < DSC_KW; ++kw) {
            const int iw = ow - PL + kw * DW;
            if (ih >= 0 && ih < H && iw >= 0 && iw < W)
              acc = fma(x4[(ih * W + iw) * c4 + q], f[kh][kw], acc);
          }
        }
        d[r][j] = dsc_clamp(acc, dw_min, dw_max);
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
    for (int r = 0; r < DSC_DWPT; ++r) {
      const int e = lid + r * DSC_WG;
      const int q = e % c4, col = e / c4;
      const int ow = col % W, oh0 = (col / W) * DSC_R;
#pragma unroll
      for (int j = 0; j < DSC_R; ++j)
        if (e < hb * W * c4 && oh0 + j < H) x4[((oh0 + j) * W + ow) * c4 + q] = d[r][j];
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    // The next block's constants, loaded now and stored once this block is done with its own.
    float4 pf[DSC_PF];
    const int next4 = b + 1 < blocks ? tab[(b + 1) * DSC_FIELDS + 8] : 0;
    __global const float4* nkf =
        (__global const float4*)(consts + (b + 1 < blocks ? tab[(b + 1) * DSC_FIELDS + 6] : 0));
#pragma unroll
    for (int r = 0; r < DSC_PF; ++r) {
      const int i = lid + r * DSC_WG;
      if (i < next4) pf[r] = nkf[i];
    }

    // The 1x1: each work-item tiles of DSC_PX pixels x 4 output channels, neighbours the next
    // quads of channels (the same pixels' values: one local read for the warp), over the weight
    // rows in chunks of `rows`.
    const int tiles = (HW + DSC_PX - 1) / DSC_PX;
    float4 acc[DSC_PWT][DSC_PX];
#pragma unroll
    for (int r = 0; r < DSC_PWT; ++r)
#pragma unroll
      for (int i = 0; i < DSC_PX; ++i) acc[r][i] = kpb[(lid + r * DSC_WG) % oc4];
    for (int k0 = 0; k0 < C; k0 += rows) {
      if (k0 > 0) {
        // A later chunk of rows (a block wider than local memory holds at once).
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int i = lid; i < min(rows, C - k0) * oc4; i += DSC_WG)
          kpw[i] = kf[pw_at + k0 * oc4 + i];
        barrier(CLK_LOCAL_MEM_FENCE);
      }
      const int kn = min(rows, C - k0) >> 2;
#pragma unroll
      for (int r = 0; r < DSC_PWT; ++r) {
        // Past the last tile: a copy of it, never stored.
        const int t = min(lid + r * DSC_WG, tiles * oc4 - 1);
        const int q = t % oc4, p0 = (t / oc4) * DSC_PX;
        int row[DSC_PX];
#pragma unroll
        for (int i = 0; i < DSC_PX; ++i) row[i] = min(p0 + i, HW - 1) * c4 + (k0 >> 2);
        for (int kq = 0; kq < kn; ++kq) {
          const int w = 4 * kq * oc4 + q;
          const float4 f0 = kpw[w], f1 = kpw[w + oc4], f2 = kpw[w + 2 * oc4],
                       f3 = kpw[w + 3 * oc4];
#pragma unroll
          for (int i = 0; i < DSC_PX; ++i) {
            const float4 x = x4[row[i] + kq];
            acc[r][i] = fma((float4)(x.s0), f0, acc[r][i]);
            acc[r][i] = fma((float4)(x.s1), f1, acc[r][i]);
            acc[r][i] = fma((float4)(x.s2), f2, acc[r][i]);
            acc[r][i] = fma((float4)(x.s3), f3, acc[r][i]);
          }
        }
      }
    }
    // Every read of the depthwise's output and of this block's constants done.
    barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
    for (int r = 0; r < DSC_PWT; ++r) {
      const int t = lid + r * DSC_WG;
      const int q = t % oc4, p0 = (t / oc4) * DSC_PX;
#pragma unroll
      for (int i = 0; i < DSC_PX; ++i) {
        if (t >= tiles * oc4 || p0 + i >= HW) continue;
        const float4 v = dsc_clamp(acc[r][i], pw_min, pw_max);
        if (b == blocks - 1)
          STOREF4(v, out + (size_t)n * HW * OC, (p0 + i) * oc4 + q);
        else
          x4[(p0 + i) * oc4 + q] = v;
      }
    }
#pragma unroll
    for (int r = 0; r < DSC_PF; ++r) {
      const int i = lid + r * DSC_WG;
      if (i < next4) k4[i] = pf[r];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
}
