// Comparisons of float operands into bools (EQUAL, NOT_EQUAL, LESS, LESS_EQUAL, GREATER,
// GREATER_EQUAL), the logical ops on bools (LOGICAL_AND, LOGICAL_OR, LOGICAL_NOT) and SELECT /
// SELECT_V2, all with NumPy-style broadcasting over up to 6 dimensions. A bool is one byte, 0 or
// 1, as TFLite stores it; a condition reads any non-zero byte as true, as TFLite's kernel does.
// Converted models compute masks and guards with them (a spectrogram's "max == 0 ? x : x / max").

// The op numbers the host passes (src_cpp/ops/compare.cc keeps the same lists).
#define C_EQUAL 0
#define C_NOT_EQUAL 1
#define C_LESS 2
#define C_LESS_EQUAL 3
#define C_GREATER 4
#define C_GREATER_EQUAL 5

#define L_AND 0
#define L_OR 1
#define L_NOT 2

// NaN compares false except in NOT_EQUAL, as C's operators and TFLite's kernels have it.
static inline uchar compare_op(float a, float b, int op) {
  switch (op) {
    case C_EQUAL: return a == b;
    case C_NOT_EQUAL: return a != b;
    case C_LESS: return a < b;
    case C_LESS_EQUAL: return a <= b;
    case C_GREATER: return a > b;
    default: return a >= b;  // C_GREATER_EQUAL
  }
}

// The offset of output element i in operand k: meta = int[rank] output dims, then each
// operand's strides (0 where it broadcasts along the axis), rank ints per operand.
static inline long operand_offset(int i, int rank, __global const int* meta, int k) {
  long at = 0;
  for (int d = rank - 1; d >= 0; --d) {
    const int dim = meta[d];
    at += (long)(i % dim) * meta[(k + 1) * rank + d];
    i /= dim;
  }
  return at;
}

// compare(a, b, out, total, rank, meta, op) — NDRange: global (total).
__kernel void compare(__global const T* a, __global const T* b, __global uchar* out, int total,
                      int rank, __global const int* meta, int op OVERFLOW_PARAM) {
  const int i = get_global_id(0);
  if (i >= total) return;
  out[i] = compare_op(LOADF(a, operand_offset(i, rank, meta, 0)),
                      LOADF(b, operand_offset(i, rank, meta, 1)), op);
}

// logical(a, b, out, total, rank, meta, op) — b and its strides unused for L_NOT.
__kernel void logical(__global const uchar* a, __global const uchar* b, __global uchar* out,
                      int total, int rank, __global const int* meta, int op OVERFLOW_PARAM) {
  const int i = get_global_id(0);
  if (i >= total) return;
  const bool x = a[operand_offset(i, rank, meta, 0)] != 0;
  if (op == L_NOT) {
    out[i] = !x;
    return;
  }
  const bool y = b[operand_offset(i, rank, meta, 1)] != 0;
  out[i] = op == L_AND ? (x && y) : (x || y);
}

// select_values(cond, x, y, out, total, rank, meta) — out = cond ? x : y, element by element.
__kernel void select_values(__global const uchar* cond, __global const T* x,
                            __global const T* y, __global T* out, int total, int rank,
                            __global const int* meta OVERFLOW_PARAM) {
  const int i = get_global_id(0);
  if (i >= total) return;
  const bool c = cond[operand_offset(i, rank, meta, 0)] != 0;
  STOREF(c ? LOADF(x, operand_offset(i, rank, meta, 1)) : LOADF(y, operand_offset(i, rank, meta, 2)),
         out, i);
}
