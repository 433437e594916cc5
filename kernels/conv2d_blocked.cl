// Register-blocked direct convolution: each work-item computes PX consecutive output pixels of one
// row times OCB output channels in registers, so every input value loaded feeds OCB multiply-adds
// per tap and every weight PX of them. All work-items of a group share one output-channel block:
// their weight reads are one address (a broadcast). Any kernel size, stride, dilation and padding;
// NHWC input/output; the filter re-laid out by the host as [ceil(OC / OCB)][KH][KW][C][OCB], zero
// past OC. Needs common.cl.
//
// conv2d_blocked(in, filter, bias, out, N, H, W, C, OH, OW, OC, KH, SH, DH, PT, PL,
//                act_min, act_max[, residual][, slopes])
//   __global const T* in [N][H][W][C]; __global const T* filter (above); __global const float*
//   bias [OC]; __global T* out [N][OH][OW][OC]; PT, PL: top/left padding (taps outside the input
//   read zero); residual (HAS_RESIDUAL): a fused ADD's other operand, laid out like out; slopes
//   (CHANNEL_SLOPES, common.cl): a folded PRELU's, one per output channel.
//   NDRange: global (ceil(OC / OCB), ceil(OW / PX), N * OH), each rounded up to local, local
//   (1, WGX, WGY) (reqd_work_group_size): the channel blocks of the same pixels are neighbours in
//   launch order and share their input through the cache.
//   Defines: PX, OCB, WGX, WGY; KW, SW, DW (filter width, stride and dilation along W:
//   compile-time, so the tap loops unroll into fixed registers); CV 4 when C % 4 == 0 (float4
//   input loads), else 1; VEC_OUT 1 when OC % 4 == 0 and OCB % 4 == 0 (float4 stores); SEG_MAX.

#ifndef PX
#define PX 4
#endif
#ifndef OCB
#define OCB 4
#endif
#ifndef WGX
#define WGX 8
#endif
#ifndef WGY
#define WGY 2
#endif
#ifndef KW
#define KW 3
#endif
#ifndef SW
#define SW 1
#endif
#ifndef DW
#define DW 1
#endif
#ifndef CV
#define CV 1
#endif
#ifndef VEC_OUT
#define VEC_OUT 0
#endif
#ifndef SEG_MAX
#define SEG_MAX 24
#endif

#if CV != 1 && CV != 4
#error "conv2d_blocked.cl: CV must be 1 or 4"
#endif

// The input columns the PX outputs of a work-item read along one input row, all taps together.
// Loaded once when that is no more loads than tap by tap (stride 1: PX + KW - 1 against PX * KW);
// large strides or dilations load each tap's PX columns instead.
#define SEG ((PX - 1) * SW + (KW - 1) * DW + 1)
#if SEG <= PX * KW && SEG <= SEG_MAX
#define USE_SEGMENT 1
#else
#define USE_SEGMENT 0
#endif

// Channels [c, c + CV) of input column ix of the row starting at element `row`; zero outside.
static inline void load_pixel(__global const T* restrict in, long row, int ix, int W, int C, int c,
                              float* x) {
  if ((uint)ix < (uint)W) {
    const long i = row + (long)ix * C + c;
#if CV == 4
    const float4 v = LOADF4A(in, i >> 2);
    x[0] = v.x, x[1] = v.y, x[2] = v.z, x[3] = v.w;
#else
    x[0] = LOADF(in, i);
#endif
  } else {
#pragma unroll
    for (int j = 0; j < CV; ++j) x[j] = 0.0f;
  }
}

// The OCB weights of one (ky, kx, c), from element i (a multiple of OCB).
static inline void load_weights(__global const T* restrict filter, long i, float* w) {
#if OCB % 4 == 0
#pragma unroll
  for (int q = 0; q < OCB / 4; ++q) {
    const float4 v = LOADF4A(filter, (i >> 2) + q);
    w[4 * q] = v.x, w[4 * q + 1] = v.y, w[4 * q + 2] = v.z, w[4 * q + 3] = v.w;
  }
#else
#pragma unroll
  for (int o = 0; o < OCB; ++o) w[o] = LOADF(filter, i + o);
#endif
}

// The group size tells the compiler how many registers each work-item may have.
__kernel __attribute__((reqd_work_group_size(1, WGX, WGY))) void conv2d_blocked(
    __global const T* restrict in, __global const T* restrict filter,
    __global const float* restrict bias, __global T* restrict out, int N, int H, int W, int C,
    int OH, int OW, int OC, int KH, int SH, int DH, int PT, int PL, float act_min,
    float act_max RESIDUAL_PARAM SLOPES_PARAM OVERFLOW_PARAM) {
  const int ob = get_global_id(0);
  const int ox0 = get_global_id(1) * PX;
  const int nz = get_global_id(2);  // n * OH + oy
  if (ox0 >= OW || nz >= N * OH) return;
  const int n = nz / OH, oy = nz - n * OH;
  const int oc0 = ob * OCB;

  float acc[PX][OCB];
#pragma unroll
  for (int o = 0; o < OCB; ++o) {
    const float b = oc0 + o < OC ? bias[oc0 + o] : 0.0f;
#pragma unroll
    for (int p = 0; p < PX; ++p) acc[p][o] = b;
  }

  const int ix0 = ox0 * SW - PL;
  const long wtap = (long)C * OCB;  // one (ky, kx) of the filter block
  const long wblock = (long)ob * KH * KW * wtap;
  for (int ky = 0; ky < KH; ++ky) {
    const int iy = oy * SH - PT + ky * DH;
    if ((uint)iy >= (uint)H) continue;
    const long row = ((long)n * H + iy) * W * C;
    const long wky = wblock + ky * KW * wtap;
    for (int c = 0; c < C; c += CV) {
#if USE_SEGMENT
      float x[SEG][CV];
#pragma unroll
      for (int s = 0; s < SEG; ++s) load_pixel(in, row, ix0 + s, W, C, c, x[s]);
#endif
#pragma unroll
      for (int kx = 0; kx < KW; ++kx) {
#if !USE_SEGMENT
        float x[PX][CV];
#pragma unroll
        for (int p = 0; p < PX; ++p) load_pixel(in, row, ix0 + p * SW + kx * DW, W, C, c, x[p]);
#endif
#pragma unroll
        for (int j = 0; j < CV; ++j) {
          float w[OCB];
          load_weights(filter, wky + kx * wtap + (long)(c + j) * OCB, w);
#pragma unroll
          for (int p = 0; p < PX; ++p) {
#if USE_SEGMENT
            const float xv = x[p * SW + kx * DW][j];
#else
            const float xv = x[p][j];
#endif
#pragma unroll
            for (int o = 0; o < OCB; ++o) acc[p][o] = fma(xv, w[o], acc[p][o]);
          }
        }
      }
    }
  }

  const long obase = ((long)nz * OW + ox0) * OC + oc0;
#pragma unroll
  for (int p = 0; p < PX; ++p) {
    const long op = obase + (long)p * OC;
    if (ox0 + p < OW) {
#if VEC_OUT
#pragma unroll
      for (int q = 0; q < OCB / 4; ++q) {
        const float4 v =
            (float4)(acc[p][4 * q], acc[p][4 * q + 1], acc[p][4 * q + 2], acc[p][4 * q + 3]);
        if (oc0 + 4 * q < OC)
          STOREF4A(SLOPED4(ACTIVATE(PLUS_RESIDUAL4(v, (op >> 2) + q), act_min, act_max),
                           oc0 + 4 * q),
                   out, (op >> 2) + q);
      }
#else
#pragma unroll
      for (int o = 0; o < OCB; ++o)
        if (oc0 + o < OC)
          STOREF(SLOPED(ACTIVATE(PLUS_RESIDUAL(acc[p][o], op + o), act_min, act_max), oc0 + o),
                 out, op + o);
#endif
    }
  }
}
