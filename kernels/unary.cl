// Element-wise unary ops (activations and math), one kernel for all: the op is an argument,
// the same for every work-item, so one program serves every unary node of a model.

// The op numbers the host passes (src_cpp/ops/unary.cc keeps the same list).
#define U_RELU 0
#define U_RELU6 1
#define U_RELU_N1_TO_1 2
#define U_RELU_0_TO_1 3
#define U_LEAKY_RELU 4
#define U_HARD_SWISH 5
#define U_LOGISTIC 6
#define U_TANH 7
#define U_ELU 8
#define U_GELU 9
#define U_GELU_TANH 10
#define U_EXP 11
#define U_LOG 12
#define U_SQRT 13
#define U_RSQRT 14
#define U_SQUARE 15
#define U_ABS 16
#define U_NEG 17
#define U_SIN 18
#define U_COS 19

// Clamps written as comparisons: fmin/fmax would turn a NaN into the bound, TFLite's CPU
// kernels keep it.
static inline float clamp_keep_nan(float x, float lo, float hi) {
  return x < lo ? lo : (x > hi ? hi : x);
}

static inline float unary_op(float x, int op, float alpha) {
  switch (op) {
    case U_RELU: return x < 0.0f ? 0.0f : x;
    case U_RELU6: return clamp_keep_nan(x, 0.0f, 6.0f);
    case U_RELU_N1_TO_1: return clamp_keep_nan(x, -1.0f, 1.0f);
    case U_RELU_0_TO_1: return clamp_keep_nan(x, 0.0f, 1.0f);
    case U_LEAKY_RELU: return x > 0.0f ? x : alpha * x;
    case U_HARD_SWISH: return x * (clamp_keep_nan(x + 3.0f, 0.0f, 6.0f) * (1.0f / 6.0f));
    case U_LOGISTIC: return 1.0f / (1.0f + exp(-x));
    case U_TANH: return tanh(x);
    case U_ELU: return x < 0.0f ? expm1(x) : x;
    case U_GELU: return 0.5f * x * (1.0f + erf(x * 0.70710678118654752f));
    case U_GELU_TANH:
      return 0.5f * x * (1.0f + tanh(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    case U_EXP: return exp(x);
    case U_LOG: return log(x);
    case U_SQRT: return sqrt(x);
    case U_RSQRT: return rsqrt(x);
    case U_SQUARE: return x * x;
    case U_ABS: return fabs(x);
    case U_SIN: return sin(x);
    case U_COS: return cos(x);
    default: return -x;  // U_NEG
  }
}

// unary(x, out, n, op, alpha) — NDRange: global ceil(n / 4).
__kernel void unary(__global const T* x, __global T* out, int n, int op, float alpha OVERFLOW_PARAM) {
  const int i4 = get_global_id(0);
  if ((i4 + 1) * 4 <= n) {
    const float4 v = LOADF4(x, i4);
    STOREF4((float4)(unary_op(v.x, op, alpha), unary_op(v.y, op, alpha), unary_op(v.z, op, alpha),
                     unary_op(v.w, op, alpha)),
            out, i4);
  } else {
    for (int i = i4 * 4; i < n; ++i) STOREF(unary_op(LOADF(x, i), op, alpha), out, i);
  }
}
