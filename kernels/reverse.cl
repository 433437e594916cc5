// REVERSE_V2: the input read back to front along the flagged axes, elements copied
// (any storage type). meta = int[rank] output dims, then int[rank] flags (1: reversed).
// NDRange: global (total).
__kernel void reverse_axes(__global const T* x, __global T* out, int total, int rank,
                           __global const int* meta OVERFLOW_PARAM) {
  const int i = get_global_id(0);
  if (i >= total) return;
  int rem = i, stride = 1;
  long at = 0;
  for (int d = rank - 1; d >= 0; --d) {
    const int dim = meta[d];
    const int c = rem % dim;
    rem /= dim;
    at += (long)(meta[rank + d] ? dim - 1 - c : c) * stride;
    stride *= dim;
  }
  STOREF(LOADF(x, at), out, i);
}
