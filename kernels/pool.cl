// MAX_POOL_2D and AVERAGE_POOL_2D over NHWC with TFLite's semantics: the window is
// clipped to the input (padding is never read), a max starts from -FLT_MAX, an average
// divides by the number of in-bounds elements. One work-item per output element (or
// per 4 channels in the _c4 variants, for C % 4 == 0): dimension 0 runs over one output
// row (ow * cv consecutive values), so neighbours read and write consecutive channels.
//
// Arguments of every kernel: in, out, h, w (input), cv (channels, in units of 4 for
// _c4), oh, ow, kh, kw, sh, sw, pad_top, pad_left, act_min, act_max.
// NDRange (ow * cv rounded up to the work-group, oh, batch).

#define POOL_ARGS                                                                               \
  __global const T *in, __global T *out, int h, int w, int cv, int oh, int ow, int kh, int kw, \
      int sh, int sw, int pad_top, int pad_left, float act_min, float act_max

// The window of this work-item's output, clipped to the input: rows [y0 + ky0, y0 + ky1),
// columns [x0 + kx0, x0 + kx1) of image b.
#define POOL_WINDOW                                                        \
  const int i = get_global_id(0), oy = get_global_id(1), b = get_global_id(2); \
  if (i >= ow * cv) return;                                                \
  const int ox = i / cv, cx = i - ox * cv;                                 \
  const int y0 = oy * sh - pad_top, x0 = ox * sw - pad_left;               \
  const int ky0 = max(0, -y0), ky1 = min(kh, h - y0);                      \
  const int kx0 = max(0, -x0), kx1 = min(kw, w - x0);                      \
  const long dst = ((long)b * oh + oy) * ow * cv + i;

#define POOL_IN(ky, kx) ((((long)b * h + y0 + (ky)) * w + x0 + (kx)) * cv + cx)

__kernel void max_pool2d(POOL_ARGS OVERFLOW_PARAM) {
  POOL_WINDOW
  float m = -FLT_MAX;
  for (int ky = ky0; ky < ky1; ++ky)
    for (int kx = kx0; kx < kx1; ++kx) m = fmax(m, LOADF(in, POOL_IN(ky, kx)));
  STOREF(ACTIVATE(m, act_min, act_max), out, dst);
}

__kernel void max_pool2d_c4(POOL_ARGS OVERFLOW_PARAM) {
  POOL_WINDOW
  float4 m = (float4)(-FLT_MAX);
  for (int ky = ky0; ky < ky1; ++ky)
    for (int kx = kx0; kx < kx1; ++kx) m = fmax(m, LOADF4A(in, POOL_IN(ky, kx)));
  STOREF4A(ACTIVATE(m, act_min, act_max), out, dst);
}

// An empty window divides 0 by 0, as the CPU does.
__kernel void avg_pool2d(POOL_ARGS OVERFLOW_PARAM) {
  POOL_WINDOW
  float s = 0.f;
  for (int ky = ky0; ky < ky1; ++ky)
    for (int kx = kx0; kx < kx1; ++kx) s += LOADF(in, POOL_IN(ky, kx));
  const float count = (float)(max(ky1 - ky0, 0) * max(kx1 - kx0, 0));
  STOREF(ACTIVATE(s / count, act_min, act_max), out, dst);
}

__kernel void avg_pool2d_c4(POOL_ARGS OVERFLOW_PARAM) {
  POOL_WINDOW
  float4 s = (float4)(0.f);
  for (int ky = ky0; ky < ky1; ++ky)
    for (int kx = kx0; kx < kx1; ++kx) s += LOADF4A(in, POOL_IN(ky, kx));
  const float count = (float)(max(ky1 - ky0, 0) * max(kx1 - kx0, 0));
  STOREF4A(ACTIVATE(s / count, act_min, act_max), out, dst);
}

#if defined(STORAGE_INT8) || defined(STORAGE_UINT8)
// AVERAGE_POOL_2D on quantized values (OpContext::ForValues), TFLite's integer rounding: the sum
// over the window's in-bounds taps divided by their count, rounded half away from zero, then the
// clamp (act_min / act_max are the activation's quantized bounds). An empty window stores the
// clamp of 0, where TFLite's kernel leaves its output unwritten.
__kernel void avg_pool2d_int(POOL_ARGS OVERFLOW_PARAM) {
  POOL_WINDOW
  int s = 0;
  for (int ky = ky0; ky < ky1; ++ky)
    for (int kx = kx0; kx < kx1; ++kx) s += (int)in[POOL_IN(ky, kx)];
  const int count = max(ky1 - ky0, 0) * max(kx1 - kx0, 0);
  const int avg = count == 0 ? 0 : (s > 0 ? s + count / 2 : s - count / 2) / count;
  out[dst] = (T)clamp(avg, (int)act_min, (int)act_max);
}

// A window over the whole image (global pooling) on quantized values, where the window kernels
// give each channel one work-item walking every pixel alone. A group per image and block of
// PW_C channels; its PW_P lanes take every PW_P-th pixel (neighbouring work-items read
// neighbouring channels), then lane 0 sums (or takes the max of) the lanes' partials. Integer
// sums and maxima are exact in any order: avg_pool2d_int's and max_pool2d's results.
// NDRange (ceil(c / PW_C) * PW_C * PW_P, batch), local (PW_C * PW_P, 1).
#define PW_C 32
#define PW_P 8
__kernel void pool2d_int_whole(__global const T* in, __global T* out, int hw, int c, int is_max,
                               float act_min, float act_max OVERFLOW_PARAM) {
  __local int part[PW_C * PW_P];
  const int l = get_local_id(0), lc = l % PW_C, lp = l / PW_C;
  const int ch = get_group_id(0) * PW_C + lc, b = get_global_id(1);
  int s = is_max ? INT_MIN : 0;
  if (ch < c) {
    const __global T* x = in + (long)b * hw * c + ch;
    for (int p = lp; p < hw; p += PW_P) {
      const int v = (int)x[(long)p * c];
      s = is_max ? max(s, v) : s + v;
    }
  }
  part[l] = s;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lp != 0 || ch >= c) return;
  for (int k = 1; k < PW_P; ++k) {
    const int v = part[k * PW_C + lc];
    s = is_max ? max(s, v) : s + v;
  }
  const int r = is_max ? s : (s > 0 ? s + hw / 2 : s - hw / 2) / hw;
  out[(long)b * c + ch] = (T)clamp(r, (int)act_min, (int)act_max);
}
#endif
