// CONCATENATION (and SPLIT / SPLIT_V below: the same copy the other way round): the tensors
// seen as rows (the axes before the concatenation axis) of runs; input k's row of cols_k
// elements lands in the output row, `out_cols` wide, right after input k-1's. The fused
// activation is a clamp.
//
// concat_multi copies up to 8 inputs in one launch (small models are launch-bound: one launch
// per input cost ~5 us each). It covers a `span` of consecutive output columns starting at
// `col0`: one work-item per output element of rows x span (per 4 in concat_multi4), so short
// runs (a channel concatenation of few channels) still fill whole work-groups. Input k holds
// the span's columns [e_{k-1}, e_k) (e_{-1} = 0, e_7 = span); a slot past the last input has
// its end at span (so it is never picked) and any valid buffer. The host chains launches for
// more than 8 inputs.
#define CONCAT_MULTI_ARGS                                                                         \
  __global const T *in0, __global const T *in1, __global const T *in2, __global const T *in3,     \
      __global const T *in4, __global const T *in5, __global const T *in6, __global const T *in7, \
      int e0, int e1, int e2, int e3, int e4, int e5, int e6

// The input holding span column x: `src`, its first column `start` and its width `w`. An
// unrolled chain: each step moves to the next input once x is past the current one's end.
#define CONCAT_STEP(x, prev_end, next, next_end) \
  if ((x) >= (prev_end)) {                       \
    src = (next);                                \
    start = (prev_end);                          \
    end = (next_end);                            \
  }
#define CONCAT_PICK(x, span)     \
  __global const T* src = in0;   \
  int start = 0, end = e0;       \
  CONCAT_STEP(x, e0, in1, e1);   \
  CONCAT_STEP(x, e1, in2, e2);   \
  CONCAT_STEP(x, e2, in3, e3);   \
  CONCAT_STEP(x, e3, in4, e4);   \
  CONCAT_STEP(x, e4, in5, e5);   \
  CONCAT_STEP(x, e5, in6, e6);   \
  CONCAT_STEP(x, e6, in7, span); \
  const int w = end - start

// concat_multi(out, total, span, out_cols, col0, act_min, act_max, in0..in7, e0..e6) —
// total = rows * span. NDRange (total rounded up to the work-group).
__kernel void concat_multi(__global T* out, int total, int span, int out_cols, int col0,
                           float act_min, float act_max, CONCAT_MULTI_ARGS OVERFLOW_PARAM) {
  const int i = get_global_id(0);
  if (i >= total) return;
  const int y = i / span, x = i - y * span;
  CONCAT_PICK(x, span);
  const float v = LOADF(src, y * w + x - start);
  STOREF(ACTIVATE(v, act_min, act_max), out, (long)y * out_cols + col0 + x);
}

// concat_multi4: the same in units of 4 elements (total4 = total / 4, span4 = span / 4, the
// ends / 4, ...), for a span whose inputs, start and output rows are all multiples of 4.
__kernel void concat_multi4(__global T* out, int total4, int span4, int out_cols4, int col0_4,
                            float act_min, float act_max, CONCAT_MULTI_ARGS OVERFLOW_PARAM) {
  const int i = get_global_id(0);
  if (i >= total4) return;
  const int y = i / span4, x = i - y * span4;
  CONCAT_PICK(x, span4);
  const float4 v = LOADF4A(src, y * w + x - start);
  STOREF4A(ACTIVATE(v, act_min, act_max), out, (long)y * out_cols4 + col0_4 + x);
}

// SPLIT / SPLIT_V, the inverse, one launch per output: an output's row of `cols` elements is
// read from column `col0` of an input row `in_cols` wide. No activation (the ops have none).
// split_copy(in, out, total, cols, in_cols, col0) — total = rows * cols.
__kernel void split_copy(__global const T* in, __global T* out, int total, int cols, int in_cols,
                         int col0 OVERFLOW_PARAM) {
  const int i = get_global_id(0);
  if (i >= total) return;
  const int y = i / cols, x = i - y * cols;
  STOREF(LOADF(in, (long)y * in_cols + col0 + x), out, i);
}

// split_copy4: the same in units of 4 elements, for rows and offsets all multiples of 4.
__kernel void split_copy4(__global const T* in, __global T* out, int total4, int cols4,
                          int in_cols4, int col0_4 OVERFLOW_PARAM) {
  const int i = get_global_id(0);
  if (i >= total4) return;
  const int y = i / cols4, x = i - y * cols4;
  STOREF4A(LOADF4A(in, (long)y * in_cols4 + col0_4 + x), out, i);
}

#if defined(STORAGE_INT8) || defined(STORAGE_UINT8)
// A quantized input whose scale or zero point differs from the output's (uint8: TFLite rescales
// it in float; int8 it refuses), written over its columns after the plain copy:
// round(q * scale + bias) + out_zero, clamped to the type, with scale = in_scale / out_scale and
// bias = -in_zero * scale as TFLite computes them in float, one rounding per operation.
#pragma OPENCL FP_CONTRACT OFF
// concat_requant(in, out, total, cols, out_cols, col0, scale, bias, out_zero, qmin, qmax) —
// total = rows * cols. NDRange: global (total).
__kernel void concat_requant(__global const T* in, __global T* out, int total, int cols,
                             int out_cols, int col0, float scale, float bias, int out_zero,
                             int qmin, int qmax OVERFLOW_PARAM) {
  const int i = get_global_id(0);
  if (i >= total) return;
  const int y = i / cols, x = i - y * cols;
  const float v = (float)in[i] * scale + bias;
  out[(long)y * out_cols + col0 + x] = (T)clamp((int)round(v) + out_zero, qmin, qmax);
}
#endif
