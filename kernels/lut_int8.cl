// Element-wise int8 / uint8 ops as a table of the 256 input integers (src_cpp/ops/lut_int8.cc
// computes it with the CPU kernels' arithmetic): out[i] = table[(uchar)x[i]].
//
// lut_int8(x, table, out, n) — NDRange: global (>= ceil(n / 4)), four elements each.
__kernel void lut_int8(__global const uchar* x, __global const uchar* table, __global uchar* out,
                       int n OVERFLOW_PARAM) {
  const int i = get_global_id(0) * 4;
  if (i + 4 <= n) {
    const uchar4 v = vload4(0, x + i);
    vstore4((uchar4)(table[v.s0], table[v.s1], table[v.s2], table[v.s3]), 0, out + i);
    return;
  }
  for (int j = i; j < n; ++j) out[j] = table[x[j]];
}
