// Element-wise binary ops (ADD, SUB, MUL, DIV, MAXIMUM, MINIMUM, SQUARED_DIFFERENCE, POW, PRELU):
// same-shape operands 4 elements per work-item, and NumPy-style broadcasting over up to 8
// dimensions. The op is an argument, the same for every work-item, so one program serves every
// binary node of a model.

// The op numbers the host passes (src_cpp/ops/binary.cc keeps the same list).
#define B_ADD 0
#define B_SUB 1
#define B_MUL 2
#define B_DIV 3
#define B_MAXIMUM 4
#define B_MINIMUM 5
#define B_SQUARED_DIFFERENCE 6
#define B_POW 7
#define B_PRELU 8

static inline float binary_op(float a, float b, int op) {
  switch (op) {
    case B_ADD: return a + b;
    case B_SUB: return a - b;
    case B_MUL: return a * b;
    case B_DIV: return a / b;
    // TFLite's reference kernels compare, so the NaN handling matches theirs, not fmax's.
    case B_MAXIMUM: return a > b ? a : b;
    case B_MINIMUM: return a < b ? a : b;
    case B_SQUARED_DIFFERENCE: return (a - b) * (a - b);
    case B_POW: return pow(a, b);
    default: return a >= 0.0f ? a : a * b;  // B_PRELU: b is alpha
  }
}

// binary_same(a, b, out, n, op, act_min, act_max) — NDRange: global ceil(n / 4).
__kernel void binary_same(__global const T* a, __global const T* b, __global T* out, int n,
                          int op, float act_min, float act_max OVERFLOW_PARAM) {
  const int i4 = get_global_id(0);
  if ((i4 + 1) * 4 <= n) {
    const float4 x = LOADF4(a, i4), y = LOADF4(b, i4);
    const float4 v = op == B_ADD ? x + y
                                 : (float4)(binary_op(x.x, y.x, op), binary_op(x.y, y.y, op),
                                            binary_op(x.z, y.z, op), binary_op(x.w, y.w, op));
    STOREF4(ACTIVATE(v, act_min, act_max), out, i4);
  } else {
    for (int i = i4 * 4; i < n; ++i)
      STOREF(ACTIVATE(binary_op(LOADF(a, i), LOADF(b, i), op), act_min, act_max), out, i);
  }
}

// binary_broadcast(a, b, out, total, rank, meta, op, act_min, act_max)
//   meta: int[3*rank] = output dims, then a's strides, then b's strides (0 where
//   that input broadcasts along the axis). NDRange: global (total).
__kernel void binary_broadcast(__global const T* a, __global const T* b, __global T* out,
                               int total, int rank, __global const int* meta, int op,
                               float act_min, float act_max OVERFLOW_PARAM) {
  const int i = get_global_id(0);
  if (i >= total) return;
  int rem = i;
  long ia = 0, ib = 0;
  for (int d = rank - 1; d >= 0; --d) {
    const int dim = meta[d];
    const int x = rem % dim;
    rem /= dim;
    ia += (long)x * meta[rank + d];
    ib += (long)x * meta[2 * rank + d];
  }
  STOREF(ACTIVATE(binary_op(LOADF(a, ia), LOADF(b, ib), op), act_min, act_max), out, i);
}
