// TFLite's integer requantization, bit for bit; the host side is src_cpp/ops/quant.h (which
// also says how the two roundings were found). Included by the int8 kernels.
//
// quant_multiply(x, multiplier, shift, up): x * multiplier * 2^(shift - 31), multiplier a Q31
// value in [2^30, 2^31) or 0: a left shift by max(shift, 0) (wrapping, as the CPU kernels do),
// a rounding doubling high multiply (ties up), then a rounding right shift by max(-shift, 0)
// whose ties go up (`up`: ruy's GEMM kernels, TFLite's NEON loops) or away from zero (TFLite's
// scalar MultiplyByQuantizedMultiplier).
static inline int quant_multiply(int x, int multiplier, int shift, bool up) {
  const int left = shift > 0 ? shift : 0;
  const int right = shift > 0 ? 0 : -shift;
  const long prod = (long)(int)((uint)x << left) * (long)multiplier;
  const long high = (prod + (1L << 30)) >> 31;  // fits an int: |prod| < 2^62
  if (right == 0) return (int)high;
  if (up) return (int)((high + (1L << (right - 1))) >> right);
  const long mask = (1L << right) - 1;
  const long threshold = (mask >> 1) + (high < 0 ? 1 : 0);
  return (int)((high >> right) + ((high & mask) > threshold ? 1 : 0));
}

// Four bytes packed as one int, lane 0 lowest.
static inline int pack4(int x0, int x1, int x2, int x3) {
  return (x0 & 0xff) | (x1 & 0xff) << 8 | (x2 & 0xff) << 16 | (x3 & 0xff) << 24;
}

// An int32 accumulator of output channel `c` to the output's integer value: the channel's
// (multiplier, shift) in `ms`, then + zero point, clamped to [lo, hi] (the type's range narrowed
// by a fused activation). Channels below up_below round ties up (quant_multiply).
static inline int quant_output(int acc, int2 ms, int c, int up_below, int zero_point, int lo,
                             int hi) {
  return clamp(quant_multiply(acc, ms.x, ms.y, c < up_below) + zero_point, lo, hi);
}

// The largest `m` of a work-group's `group` work-items (a power of 2; `lid` each one's flat
// index), through `part` [group]; every work-item gets it. `part` is free again after the
// caller's next barrier.
static inline int group_max_int(__local int* part, int m, int lid, int group) {
  part[lid] = m;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = group / 2; s > 0; s /= 2) {
    if (lid < s) part[lid] = max(part[lid], part[lid + s]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  return part[0];
}

// 1 / d rounded to nearest (d > 0 and normal), whatever the precision of the device's division:
// a Newton step makes y faithful, the residual 1 - d * y is then exact in one fma, and it tells
// on which side of each neighbouring midpoint 1 / d lies (a reciprocal is never a tie).
static inline float recip_rn(float d) {
  float y = 1.0f / d;
  y = fma(fma(-d, y, 1.0f), y, y);
  const float r = fma(-d, y, 1.0f);
  const float up = nextafter(y, INFINITY), dn = nextafter(y, 0.0f);
  if (r > d * (up - y) * 0.5f) return up;
  if (-r > d * (y - dn) * 0.5f) return dn;
  return y;
}

// quant_add(qa, qb, p, up): TFLite's int8 ADD / SUB of the integers qa and qb (kernels/
// binary_int8.cl has p's layout): each offset operand shifted left by p[2] and rescaled by its own
// multiplier to a common scale, the two added (subtracted if p[12]), the sum rescaled to the
// output, + its zero point, clamped to [p[10], p[11]].
static inline int quant_add(int qa, int qb, __global const int* p, bool up) {
  const int left = p[2];
  const int sa = quant_multiply((qa + p[0]) * (1 << left), p[3], p[4], up);
  const int sb = quant_multiply((qb + p[1]) * (1 << left), p[5], p[6], up);
  const int sum = p[12] ? sa - sb : sa + sb;
  return clamp(quant_multiply(sum, p[7], p[8], up) + p[9], p[10], p[11]);
}

// Sums that work-groups add into global memory for one of them, the last, to read
// (group_sync.cl: global_fence, last_to_count): global_add(p, v): *p += v atomically;
// global_take(p): *p, read where the others' additions landed, left zero for the next launch (no
// one else touches it any more). OpenCL 1.2's atomics return the old value, and NVIDIA's driver
// then waits for each one: with -DQUANT_PTX (NVIDIA, inline PTX probed: src_cpp/cl/int8_dot.h)
// PTX's reduction, which returns nothing, and an L2 load.
#include "group_sync.cl"
#if defined(QUANT_PTX)
static inline void global_add(__global int* p, int v) {
  asm volatile("red.global.add.s32 [%0], %1;" : : "l"(p), "r"(v));
}
static inline int global_take(__global int* p) {
  int v;
  asm volatile("ld.global.cg.s32 %0, [%1];" : "=r"(v) : "l"(p));
  asm volatile("st.global.s32 [%0], %1;" : : "l"(p), "r"(0));
  return v;
}
#else
static inline void global_add(__global int* p, int v) { atomic_add(p, v); }
static inline int global_take(__global int* p) { return atomic_xchg(p, 0); }
#endif

// quant_store(v, stage, channels, c): the output byte of requantized integer v of channel c. With
// -DQUANT_TABLE an element-wise chain folded into the op (src_cpp/fusion/attach.h) maps it through
// its 256 results, stored after the `channels` (multiplier, shift) pairs of the stage buffer, by
// v's low byte; with -DQUANT_TABLE_CHANNELS too, through channel c's 256 (a PRELU of a slope per
// channel), from c * 256 on.
#if defined(QUANT_TABLE) && defined(QUANT_TABLE_CHANNELS)
#define quant_store(v, stage, channels, c) \
  (((__global const char*)((stage) + (channels)))[((c) << 8) + (uchar)(v)])
#elif defined(QUANT_TABLE)
#define quant_store(v, stage, channels, c) \
  (((__global const char*)((stage) + (channels)))[(uchar)(v)])
#else
#define quant_store(v, stage, channels, c) ((char)(v))
#endif

// An element-wise kernel's store through a folded chain's table (src_cpp/fusion/attach.h):
// QUANT_TABLE_PARAM, one more argument, uchar table [256] (or [C][256] with
// -DQUANT_TABLE_CHANNELS); QUANT_TABLED(v, c): integer v of channel c through it (c unused
// without channels), else v itself, as QT.
#ifdef QUANT_TABLE
#define QUANT_TABLE_PARAM , __global const uchar *restrict table
#ifdef QUANT_TABLE_CHANNELS
#define QUANT_TABLED(v, c) ((QT)table[((c) << 8) + (uchar)(v)])
#else
#define QUANT_TABLED(v, c) ((QT)table[(uchar)(v)])
#endif
#else
#define QUANT_TABLE_PARAM
#define QUANT_TABLED(v, c) ((QT)(v))
#endif

// The quantized storage types: QT is the element type of the int8 kernels' activations (int8 by
// default, uint8 with -DQUANT_UINT8), QMIN / QMAX its range.
#ifdef QUANT_UINT8
#define QT uchar
#define QT4 uchar4
#define convert_QT4 convert_uchar4
#define QMIN 0
#define QMAX 255
#else
#define QT char
#define QT4 char4
#define convert_QT4 convert_char4
#define QMIN -128
#define QMAX 127
#endif

// TFLite's QUANTIZE of a float (quantize.cl's kernels, and a QUANTIZE folded into the float op
// before it: fusion/requantize.cc). Each rounding is TFLite's: no expression below multiplies and
// adds (a contraction would fuse it), the remainders go through explicit fma.

// round-half-away-from-zero of the exact quotient a / s (s > 0), as TFLite's scalar code gets
// from a double division: an estimate, then the exact sign of a - (m + 0.5) * s through fma
// decides each neighbouring boundary (no double precision needed). Saturates beyond 2^22.
static inline float div_round_away(float a, float s, float inv) {
  const float mag = fabs(a);
  const float k = floor(fmin(mag * inv, 4194304.0f));
  float r = k;
  if (fma(-(k + 0.5f), s, mag) >= 0.0f) r = k + 1.0f;
  if (k >= 1.0f && fma(-(k - 0.5f), s, mag) < 0.0f) r = k - 1.0f;
  return a < 0.0f ? -r : r;
}

// clamp(round(v / scale) + zero_point, qmin, qmax) for element i: below vec_below
// rint(v * inv_scale) (ties to even, the NEON loop), else the rounding of div_round_away.
static inline QT quantize_one(float v, int i, float scale, float inv_scale, int zero_point,
                              int qmin, int qmax, int vec_below) {
#ifdef QUANT_SATURATING_CVT
  // Arm's conversions saturate and take NaN to 0.
  if (isnan(v)) return (QT)clamp(zero_point, qmin, qmax);
#else
  // x86's conversion (TFLite's cast of the rounded quotient) gives INT_MIN for NaN and for
  // anything beyond int32, which the clamp then takes to qmin, whatever the sign.
  if (!(fabs(v) * inv_scale < 2147483520.0f)) return (QT)qmin;
#endif
  const float q = i < vec_below ? rint(v * inv_scale) : div_round_away(v, scale, inv_scale);
  // Saturate in float first: the conversion of an out-of-range float is undefined.
  const float c = clamp(q + (float)zero_point, (float)qmin, (float)qmax);
  return (QT)(int)c;
}

// dot4(a, b, acc): acc + the dot product of the four signed 8-bit lanes of a and b (lane 0 in the
// low byte, as four consecutive chars load as an int). The host picks the instruction per device
// (src_cpp/cl/int8_dot.h); the integer result is the same on every path.
#if defined(QUANT_DOT_DP4A)
static inline int dot4(int a, int b, int acc) {
  int d;
  asm("dp4a.s32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(acc));
  return d;
}
#elif defined(QUANT_DOT_KHR)
static inline int dot4(int a, int b, int acc) {
  return acc + dot_4x8packed_ss_int((uint)a, (uint)b);
}
#else
static inline int dot4(int a, int b, int acc) {
  const char4 x = as_char4(a), y = as_char4(b);
  return acc + (int)x.s0 * y.s0 + (int)x.s1 * y.s1 + (int)x.s2 * y.s2 + (int)x.s3 * y.s3;
}
#endif
