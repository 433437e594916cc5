// CONCATENATION (and SPLIT / SPLIT_V below: the same copy the other way round), one launch
// per input: the tensors seen as rows (the axes before the concatenation axis) of runs;
// an input's row of `cols` elements lands at column `col0` of an output row `out_cols`
// wide. The fused activation is a clamp. One work-item per
// element over the flattened input (per 4 in concat_copy4), so short runs (a channel
// concatenation of few channels) still fill whole work-groups.

// concat_copy(in, out, total, cols, out_cols, col0, act_min, act_max) — total = rows * cols.
// NDRange (total rounded up to the work-group).
__kernel void concat_copy(__global const T* in, __global T* out, int total, int cols, int out_cols,
                          int col0, float act_min, float act_max) {
  const int i = get_global_id(0);
  if (i >= total) return;
  const int y = i / cols, x = i - y * cols;
  STOREF(ACTIVATE(LOADF(in, i), act_min, act_max), out, (long)y * out_cols + col0 + x);
}

// concat_copy4: the same in units of 4 elements (total4 = total / 4, cols4 = cols / 4, ...),
// for rows and offsets that are all multiples of 4.
__kernel void concat_copy4(__global const T* in, __global T* out, int total4, int cols4,
                           int out_cols4, int col0_4, float act_min, float act_max) {
  const int i = get_global_id(0);
  if (i >= total4) return;
  const int y = i / cols4, x = i - y * cols4;
  const float4 v = LOADF4A(in, i);
  STOREF4A(fmin(fmax(v, (float4)act_min), (float4)act_max), out, (long)y * out_cols4 + col0_4 + x);
}

// SPLIT / SPLIT_V, the inverse, one launch per output: an output's row of `cols` elements is
// read from column `col0` of an input row `in_cols` wide. No activation (the ops have none).
// split_copy(in, out, total, cols, in_cols, col0) — total = rows * cols.
__kernel void split_copy(__global const T* in, __global T* out, int total, int cols, int in_cols,
                         int col0) {
  const int i = get_global_id(0);
  if (i >= total) return;
  const int y = i / cols, x = i - y * cols;
  STOREF(LOADF(in, (long)y * in_cols + col0 + x), out, i);
}

// split_copy4: the same in units of 4 elements, for rows and offsets all multiples of 4.
__kernel void split_copy4(__global const T* in, __global T* out, int total4, int cols4,
                          int in_cols4, int col0_4) {
  const int i = get_global_id(0);
  if (i >= total4) return;
  const int y = i / cols4, x = i - y * cols4;
  STOREF4A(LOADF4A(in, (long)y * in_cols4 + col0_4 + x), out, i);
}
