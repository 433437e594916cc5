// TRANSPOSE of any rank up to 8, one work-item per output element (general path;
// transpose_tiled.cl handles the 2-D-like cases through local memory).
//
// transpose_nd(in, out, total, rank, meta) — meta: int[2*rank] = output dims, then
//   for each output axis the input stride of the axis it reads. NDRange: global (total).
__kernel void transpose_nd(__global const T* in, __global T* out, int total, int rank,
                           __global const int* meta OVERFLOW_PARAM) {
  const int i = get_global_id(0);
  if (i >= total) return;
  int rem = i;
  long src = 0;
  for (int d = rank - 1; d >= 0; --d) {
    const int dim = meta[d];
    src += (long)(rem % dim) * meta[rank + d];
    rem /= dim;
  }
  STOREF(LOADF(in, src), out, i);
}
