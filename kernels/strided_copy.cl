// Index maps (src_cpp/ops/strided_copy.h): out[i] = in[base + sum over the output axes d of
// c_d * stride_d], c the coordinate of i in the output dims (row-major), strides in input
// elements and possibly negative; the table axis adds table[c_d] instead. Slices, reversals,
// depth/space rearrangements, gathers and unstacking are all such maps.

// strided_copy(in, out, total, rank, base, meta, table, table_axis) — meta: int[2*rank] = the
// output dims, then each one's input stride; table_axis -1: none (table is any buffer).
// NDRange: global (total rounded up to the work-group), one output element each.
__kernel void strided_copy(__global const T* in, __global T* out, int total, int rank, int base,
                           __global const int* meta, __global const int* table, int table_axis OVERFLOW_PARAM) {
  const int i = get_global_id(0);
  if (i >= total) return;
  int rem = i, src = base;
  for (int d = rank - 1; d >= 0; --d) {
    const int n = meta[d];
    const int c = rem % n;
    rem /= n;
    src += d == table_axis ? table[c] : c * meta[rank + d];
  }
  STOREF(LOADF(in, src), out, i);
}

// strided_copy4: the same in units of 4 elements, for a map whose innermost axis has stride 1
// and whose every extent of it, stride, table entry and base are multiples of 4 (all /4 here).
__kernel void strided_copy4(__global const T* in, __global T* out, int total4, int rank, int base4,
                            __global const int* meta, __global const int* table, int table_axis OVERFLOW_PARAM) {
  const int i = get_global_id(0);
  if (i >= total4) return;
  int rem = i, src = base4;
  for (int d = rank - 1; d >= 0; --d) {
    const int n = meta[d];
    const int c = rem % n;
    rem /= n;
    src += d == table_axis ? table[c] : c * meta[rank + d];
  }
  STOREF4A(LOADF4A(in, src), out, i);
}
