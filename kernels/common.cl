// Prepended to every program: the storage type of activations/weights and the
// load/store helpers, so each kernel is written once for fp32 and fp16 storage.
// Arithmetic is always float; half is storage only (vload_half is core OpenCL).

// Every kernel takes OVERFLOW_PARAM last: under fp16 storage the flag buffer of its partition
// and the word it sets when a store saturates (sat_half below; CreateKernel, cl/environment.cc,
// passes null until a partition binds its own), nothing otherwise. Helpers that store take it
// too and get it with OVERFLOW_PASS.
#ifdef STORAGE_HALF
#define OVERFLOW_PARAM , __global int *restrict clgpu_overflow, int clgpu_overflow_slot
#define OVERFLOW_PASS , clgpu_overflow, clgpu_overflow_slot
#define OVERFLOW_FLAG clgpu_overflow, clgpu_overflow_slot
#else
#define OVERFLOW_PARAM
#define OVERFLOW_PASS
#endif

// A kernel's constant buffer argument (weights, biases, stages), or with -DPACKED its byte
// offset in one buffer holding them all, `consts` (PACKED_ARG, after the kernel's other
// arguments and before OVERFLOW_PARAM; src_cpp/ops/op_helpers.h's PackBuffers): NVIDIA's driver
// charges every buffer argument of a launch, an integer far less
// (bench/results/enqueue-probe-NVIDIA_H200.md). CONST_AT, first in the kernel's body, makes the
// pointer either way.
// A kernel that reads its integers from memory (`prm`, an int array: gemm_int8.cl,
// conv2d_implicit_gemm.cl) takes each constant buffer as PRM_CONST in its signature and makes
// the pointer with PRM_AT(type, name, i) in its body: its own argument, or with -DPACKED the
// region of `consts` at the byte offset prm[i], prm itself being the region at offset 0
// (PRM_FROM_CONSTS, first in the body).
#ifdef PACKED
#define PRM_CONST(type, name)
#define PRM_AT(type, name, i) \
  __global const type* restrict name = (__global const type*)(consts + prm[i])
#define PRM_FROM_CONSTS __global const int* restrict prm = (__global const int*)consts;
#else
#define PRM_CONST(type, name) , __global const type* restrict name
#define PRM_AT(type, name, i)
#define PRM_FROM_CONSTS
#endif

#ifdef PACKED
#define CONST_IN(type, name) int name##_at
#define CONST_AT(type, name) \
  __global const type* restrict name = (__global const type*)(consts + name##_at)
#define PACKED_ARG , __global const char* restrict consts
#else
#define CONST_IN(type, name) __global const type* restrict name
#define CONST_AT(type, name)
#define PACKED_ARG
#endif

#if defined(STORAGE_INT8) || defined(STORAGE_UINT8)
// Quantized values (OpContext::ForValues) in kernels that only move, compare or average them:
// loads are exact floats, stores round half away from zero (TFLite's integer rounding) and
// saturate to the type.
#ifdef STORAGE_INT8
#define T char
#define STORAGE_CONVERT(v) convert_char_sat(round(v))
#define STORAGE_CONVERT4(v) convert_char4_sat(round(v))
#define T4_ char4
#else
#define T uchar
#define STORAGE_CONVERT(v) convert_uchar_sat(round(v))
#define STORAGE_CONVERT4(v) convert_uchar4_sat(round(v))
#define T4_ uchar4
#endif
#define LOADF(p, i) convert_float((p)[(i)])
#define STOREF(v, p, i) ((p)[(i)] = STORAGE_CONVERT(v))
#define LOADF4(p, i4) convert_float4(vload4((i4), (p)))
#define STOREF4(v, p, i4) vstore4(STORAGE_CONVERT4(v), (i4), (p))
#define LOADF4A(p, i4) convert_float4(((__global const T4_*)(p))[(i4)])
#define STOREF4A(v, p, i4) (((__global T4_*)(p))[(i4)] = STORAGE_CONVERT4(v))
#elif defined(STORAGE_HALF)
#define T half
#define LOADF(p, i) vload_half((i), (p))
// A finite value past the half range is stored as +-65504, not Inf (vstore_half's rounding):
// its sign then survives a later product with zero (Inf * 0 is NaN). Inf and NaN stay: the
// bound a * 0 + 65504 is NaN for them, and a comparison with NaN is false.
// Such a store also sets word `slot` of `flag` to 1, where the host gave a flag buffer (the
// partition reads it after each invoke: runtime/partition_overflow.cc): only the rare
// saturating path stores, so an in-range store costs the comparison it made before.
static inline float sat_half(float v, __global int* flag, int slot) {
  const float a = fabs(v);
  const int over = isgreater(a, a * 0.0f + 65504.0f);
  if (over && flag) flag[slot] = 1;
  return over ? copysign(65504.0f, v) : v;
}
static inline float4 sat_half4(float4 v, __global int* flag, int slot) {
  const float4 a = fabs(v);
  const int4 over = isgreater(a, a * 0.0f + 65504.0f);
  if (any(over) && flag) flag[slot] = 1;
  return select(v, copysign((float4)(65504.0f), v), over);
}
#define STOREF(v, p, i) vstore_half(sat_half((v), OVERFLOW_FLAG), (i), (p))
#define LOADF4(p, i4) vload_half4((i4), (p))
#define STOREF4(v, p, i4) vstore_half4(sat_half4((v), OVERFLOW_FLAG), (i4), (p))
#define LOADF4A(p, i4) vloada_half4((i4), (p))
#define STOREF4A(v, p, i4) vstorea_half4(sat_half4((v), OVERFLOW_FLAG), (i4), (p))
#else
#define T float
#define LOADF(p, i) ((p)[(i)])
#define STOREF(v, p, i) ((p)[(i)] = (v))
#define LOADF4(p, i4) vload4((i4), (p))
#define STOREF4(v, p, i4) vstore4((v), (i4), (p))
// Aligned variants (p + 4 * i4 a multiple of 4 elements from an aligned base): vload4 promises
// only element alignment, so a compiler may not make it one 16-byte access.
#define LOADF4A(p, i4) (((__global const float4*)(p))[(i4)])
#define STOREF4A(v, p, i4) (((__global float4*)(p))[(i4)] = (v))
#endif

// Fused activations are clamps: NONE [-FLT_MAX, FLT_MAX], RELU [0, FLT_MAX], RELU6 [0, 6],
// RELU_N1_TO_1 [-1, 1], the bounds TFLite's CPU kernels use. The host passes them. Written as
// comparisons, scalar or vector: fmin/fmax would turn a NaN into a bound, the CPU keeps it.
#define CLAMP_KEEP_NAN(x, lo, hi) ((x) < (lo) ? (lo) : (x) > (hi) ? (hi) : (x))

// An element-wise op folded into the producing kernel's store (AttachEpilogue): the host builds
// with -DCLGPU_EPILOGUE=<n> (and -DCLGPU_EPILOGUE_ALPHA=<a> for LEAKY_RELU); it applies after the
// clamp, to a scalar or a vector. src_cpp/fusion/attach.h keeps the same numbers. EPILOGUE_OF(n, v,
// a) is op n for a kernel that applies several (squeeze_float.cl).
#define EPILOGUE_K0(v, a) (v)                               // none
#define EPILOGUE_K1(v, a) ((v) / (1.0f + exp(-(v))))        // swish: a LOGISTIC and a MUL
#define EPILOGUE_K2(v, a) ((v) * (clamp((v) + 3.0f, 0.0f, 6.0f) * (1.0f / 6.0f)))  // HARD_SWISH
#define EPILOGUE_K3(v, a) (1.0f / (1.0f + exp(-(v))))       // LOGISTIC
#define EPILOGUE_K4(v, a) tanh(v)                           // TANH
#define EPILOGUE_K5(v, a) (0.5f * (v) * (1.0f + erf((v) * 0.70710678118654752f)))  // GELU
#define EPILOGUE_K6(v, a) /* GELU, tanh approximation */ \
  (0.5f * (v) * (1.0f + tanh(0.7978845608028654f * ((v) + 0.044715f * (v) * (v) * (v)))))
#define EPILOGUE_K7(v, a) ((v) < 0.0f ? expm1(v) : (v))    // ELU
#define EPILOGUE_K8(v, a) ((v) > 0.0f ? (v) : (v) * (a))   // LEAKY_RELU
#define EPILOGUE_K9(v, a) (v)                               // post clamps alone
#define EPILOGUE_OF_(n, v, a) EPILOGUE_K##n(v, a)
#define EPILOGUE_OF(n, v, a) EPILOGUE_OF_(n, v, a)
#ifdef CLGPU_EPILOGUE
#define EPILOGUE(v) EPILOGUE_OF(CLGPU_EPILOGUE, v, CLGPU_EPILOGUE_ALPHA)
#else
#define EPILOGUE(v) (v)
#endif

// Then up to two nodes of the value and a constant scalar (PostClamp): -DCLGPU_POST<i>=1 max(v, c),
// 2 min(v, c), 3 max(c, v), 4 min(c, v), 5 v * c, 6 v + c, 7 v - c, 8 v / c; -DCLGPU_POST<i>_C=c.
// Comparisons in the node's operand order, as binary.cl's MAXIMUM / MINIMUM (a NaN as TFLite).
#define POST_CLAMP_0(v, c) (v)
#define POST_CLAMP_1(v, c) ((v) > (c) ? (v) : (c))
#define POST_CLAMP_2(v, c) ((v) < (c) ? (v) : (c))
#define POST_CLAMP_3(v, c) ((c) > (v) ? (c) : (v))
#define POST_CLAMP_4(v, c) ((c) < (v) ? (c) : (v))
#define POST_CLAMP_5(v, c) ((v) * (c))
#define POST_CLAMP_6(v, c) ((v) + (c))
#define POST_CLAMP_7(v, c) ((v) - (c))
#define POST_CLAMP_8(v, c) ((v) / (c))
#define POST_CLAMP_(k, v, c) POST_CLAMP_##k(v, c)
#define POST_CLAMP(k, v, c) POST_CLAMP_(k, v, c)
#ifdef CLGPU_POST1
#define POST1(v) POST_CLAMP(CLGPU_POST1, v, CLGPU_POST1_C)
#else
#define POST1(v) (v)
#endif
#ifdef CLGPU_POST2
#define POST2(v) POST_CLAMP(CLGPU_POST2, v, CLGPU_POST2_C)
#else
#define POST2(v) (v)
#endif

#define ACTIVATE(x, lo, hi) POST2(POST1(EPILOGUE(CLAMP_KEEP_NAN(x, lo, hi))))

// A PRELU of slope a after the activation (CHANNEL_SLOPES, fusion/prelu.cc: a slope per channel,
// which the kernel loads): v < 0 ? v * a : v, a NaN kept, as TFLite's x >= 0 ? x : x * a.
static inline float prelu_at(float v, float a) { return v < 0.0f ? v * a : v; }
static inline float4 prelu_at4(float4 v, float4 a) { return select(v, v * a, v < 0.0f); }
// A convolution's or GEMM's stores with CHANNEL_SLOPES: one more argument after the residual,
// __global const T* slopes [OC] (SLOPES_PARAM), and SLOPED(v, c) the PRELU of channel c's slope
// (SLOPED4: four channels from c, c a multiple of 4).
#ifdef CHANNEL_SLOPES
#define SLOPES_PARAM , __global const T* restrict slopes
#define SLOPES_PASS , slopes
#define SLOPED(v, c) prelu_at((v), LOADF(slopes, (c)))
#define SLOPED4(v, c) prelu_at4((v), LOADF4(slopes, (c) >> 2))
#else
#define SLOPES_PARAM
#define SLOPES_PASS
#define SLOPED(v, c) (v)
#define SLOPED4(v, c) (v)
#endif

// A depthwise's own folded epilogue inside the kernel it is folded into (FloatDepthwiseA::
// epilogue): EPILOGUE and the post clamps above under the names CLGPU_DW_EPILOGUE(_ALPHA) and
// CLGPU_DW_POST<i>(_C), applied after its clamp.
#ifdef CLGPU_DW_EPILOGUE
#define DW_EPILOGUE(v) EPILOGUE_OF(CLGPU_DW_EPILOGUE, v, CLGPU_DW_EPILOGUE_ALPHA)
#else
#define DW_EPILOGUE(v) (v)
#endif
#ifdef CLGPU_DW_POST1
#define DW_POST1(v) POST_CLAMP(CLGPU_DW_POST1, v, CLGPU_DW_POST1_C)
#else
#define DW_POST1(v) (v)
#endif
#ifdef CLGPU_DW_POST2
#define DW_POST2(v) POST_CLAMP(CLGPU_DW_POST2, v, CLGPU_DW_POST2_C)
#else
#define DW_POST2(v) (v)
#endif
#define DW_ACTIVATE(v) DW_POST2(DW_POST1(DW_EPILOGUE(v)))

// A residual ADD folded into a convolution's output (the host builds with -DHAS_RESIDUAL): the
// kernel takes one more argument, its last, the ADD's other operand laid out like the output, and
// stores act(value + residual) where it stored act(value); the activation is then the ADD's.
// Helpers that store take RESIDUAL_PARAM too and get it with RESIDUAL_PASS.
#ifdef HAS_RESIDUAL
#define RESIDUAL_PARAM , __global const T* restrict residual
#define RESIDUAL_PASS , residual
#define PLUS_RESIDUAL(v, i) ((v) + LOADF(residual, (i)))
#define PLUS_RESIDUAL4(v, i4) ((v) + LOADF4(residual, (i4)))
#else
#define RESIDUAL_PARAM
#define RESIDUAL_PASS
#define PLUS_RESIDUAL(v, i) (v)
#define PLUS_RESIDUAL4(v, i4) (v)
#endif

// One output (n, oh, ow, oc) of a convolution computed directly from the input and the OHWI
// filter [OC][KH][KW][C] (stride 1, dilation 1, padding PT / PL): the Winograd kernels' fallback.
static inline float conv_direct_output(__global const T* restrict in,
                                       __global const T* restrict filter, int n, int oh, int ow,
                                       int oc, int in_h, int in_w, int in_c, int k_h, int k_w,
                                       int pad_t, int pad_l) {
  // (Lower-case names: kernels take KH, KW, PT, PL, ... as -D defines.)
  float acc = 0.0f;
  for (int ky = 0; ky < k_h; ++ky) {
    const int ih = oh - pad_t + ky;
    for (int kx = 0; kx < k_w; ++kx) {
      const int iw = ow - pad_l + kx;
      if ((uint)ih >= (uint)in_h || (uint)iw >= (uint)in_w) continue;
      const int ib = ((n * in_h + ih) * in_w + iw) * in_c, fb = ((oc * k_h + ky) * k_w + kx) * in_c;
      for (int c = 0; c < in_c; ++c) acc += LOADF(in, ib + c) * LOADF(filter, fb + c);
    }
  }
  return acc;
}

// What a Winograd tile store needs for its direct fallback: the input, the OHWI filter and the
// geometry (kernel parameters, passed on as they are).
#define WINO_DIRECT_PARAM                                                                      \
  , __global const T *restrict wd_in, __global const T *restrict wd_filter, int wd_h, int wd_w, \
      int wd_c, int wd_kh, int wd_kw, int wd_pt, int wd_pl
#define WINO_DIRECT_PASS , wd_in, wd_filter, wd_h, wd_w, wd_c, wd_kh, wd_kw, wd_pt, wd_pl

// The TS x TS outputs y of one Winograd tile with corner (oh0, ow0), output channel oc: bias,
// residual, clamp, channel slope, and the store of those inside the OH x OW output (a tile
// may overhang it).
// Conditions, not breaks: a loop with an early exit is not unrolled (TS is a literal at the
// call sites, so these loops unroll and y stays in registers).
// A tile whose y is not all finite is computed directly instead: the transforms spread one
// NaN or Inf input over the whole tile (Inf - Inf), and overflow on finite inputs near
// FLT_MAX (their coefficients reach 100x), where the CPU's direct sums give each output its own.
static inline void store_winograd_tile(const float* y, const int TS, float bv,
                                       __global T* restrict out, int n, int oh0, int ow0, int OH,
                                       int OW, int OC, int oc, float act_min,
                                       float act_max WINO_DIRECT_PARAM
                                           RESIDUAL_PARAM SLOPES_PARAM OVERFLOW_PARAM) {
  int finite = 1;
#pragma unroll
  for (int k = 0; k < TS * TS; ++k) finite &= isfinite(y[k]);
  if (finite) {
#pragma unroll
    for (int i = 0; i < TS; ++i) {
      const int oh = oh0 + i;
#pragma unroll
      for (int j = 0; j < TS; ++j) {
        const int ow = ow0 + j;
        if (oh < OH && ow < OW) {
          const int o = ((n * OH + oh) * OW + ow) * OC + oc;
          STOREF(SLOPED(ACTIVATE(PLUS_RESIDUAL(y[TS * i + j] + bv, o), act_min, act_max), oc), out,
                 o);
        }
      }
    }
    return;
  }
  for (int k = 0; k < TS * TS; ++k) {
    const int oh = oh0 + k / TS, ow = ow0 + k % TS;
    if (oh >= OH || ow >= OW) continue;
    const int o = ((n * OH + oh) * OW + ow) * OC + oc;
    const float v = conv_direct_output(wd_in, wd_filter, n, oh, ow, oc, wd_h, wd_w, wd_c, wd_kh,
                                       wd_kw, wd_pt, wd_pl);
    STOREF(SLOPED(ACTIVATE(PLUS_RESIDUAL(v + bv, o), act_min, act_max), oc), out, o);
  }
}
