// CONCATENATION, one launch per input: the tensors seen as rows (the axes before the
// concatenation axis) of runs; an input's row of `cols` elements lands at column `col0`
// of an output row `out_cols` wide. The fused activation is a clamp.

// concat_copy(in, out, rows, cols, out_cols, col0, act_min, act_max) — NDRange (cols, rows).
__kernel void concat_copy(__global const T* in, __global T* out, int rows, int cols, int out_cols,
                          int col0, float act_min, float act_max) {
  const int x = get_global_id(0), y = get_global_id(1);
  if (x >= cols || y >= rows) return;
  const float v = LOADF(in, (long)y * cols + x);
  STOREF(ACTIVATE(v, act_min, act_max), out, (long)y * out_cols + col0 + x);
}

// concat_copy4: the same in units of 4 elements (cols4 = cols / 4, ...), for rows and
// offsets that are all multiples of 4. NDRange (cols4, rows).
__kernel void concat_copy4(__global const T* in, __global T* out, int rows, int cols4,
                           int out_cols4, int col0_4, float act_min, float act_max) {
  const int x = get_global_id(0), y = get_global_id(1);
  if (x >= cols4 || y >= rows) return;
  const float4 v = LOADF4A(in, (long)y * cols4 + x);
  STOREF4A(fmin(fmax(v, (float4)act_min), (float4)act_max), out, (long)y * out_cols4 + col0_4 + x);
}
