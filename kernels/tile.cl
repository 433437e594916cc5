// TILE: out[i] = x[the same index, each coordinate modulo the input's extent].

// tile(x, out, total, rank, meta) — meta: int[2*rank] = output dims, input dims.
// NDRange: global (total), one output element each.
__kernel void tile(__global const T* x, __global T* out, int total, int rank,
                   __global const int* meta OVERFLOW_PARAM) {
  const int o = get_global_id(0);
  if (o >= total) return;
  int rem = o;
  long src = 0, stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    const int n = meta[rank + d];
    src += (long)(rem % meta[d] % n) * stride;
    rem /= meta[d];
    stride *= n;
  }
  STOREF(LOADF(x, src), out, o);
}
