// PAD / PADV2 (mode 0: the constant `value`) and MIRROR_PAD (1 REFLECT, 2 SYMMETRIC).

// pad(x, out, total, rank, meta, mode, value)
//   meta: int[3*rank] = output dims, input dims, padding before each axis.
//   NDRange: global (total), one output element each.
__kernel void pad(__global const T* x, __global T* out, int total, int rank,
                  __global const int* meta, int mode, float value OVERFLOW_PARAM) {
  const int o = get_global_id(0);
  if (o >= total) return;
  int rem = o;
  long src = 0, stride = 1;
  bool inside = true;
  for (int d = rank - 1; d >= 0; --d) {
    const int od = meta[d], n = meta[rank + d];
    int i = rem % od - meta[2 * rank + d];
    rem /= od;
    if (i < 0 || i >= n) {
      if (mode == 0) {
        inside = false;
      } else if (i < 0) {
        i = mode == 1 ? -i : -i - 1;
      } else {
        i = mode == 1 ? 2 * n - 2 - i : 2 * n - 1 - i;
      }
    }
    src += (long)i * stride;
    stride *= n;
  }
  STOREF(inside ? LOADF(x, src) : value, out, o);
}
