// A chain of data-movement ops as one gather (src_cpp/ops/index_chain.h): each output element
// walks the stages from the last op's back to the first op's input, one flat index to the next.

// gather_chain(x, out, total, meta)
//   meta: int[] = stages S, then per stage: axes r, mode, base, the pad value's bits, and per
//   axis (outermost first) its extent, input stride, offset and bound (0: none).
//   NDRange: global (total rounded up), one output element each.
__kernel void gather_chain(__global const T* x, __global T* out, int total,
                           __global const int* meta OVERFLOW_PARAM) {
  const int o = get_global_id(0);
  if (o >= total) return;
  const int stages = meta[0];
  int p = 1;
  long idx = o;
  for (int s = 0; s < stages; ++s) {
    const int r = meta[p], mode = meta[p + 1];
    long src = meta[p + 2];
    const float value = as_float(meta[p + 3]);
    p += 4;
    long rem = idx;
    for (int d = r - 1; d >= 0; --d) {
      __global const int* a = meta + p + 4 * d;
      const int dim = a[0], n = a[3];
      int i = (int)(rem % dim) - a[2];
      rem /= dim;
      if (n > 0 && (i < 0 || i >= n)) {
        if (mode == 0) {
          STOREF(value, out, o);
          return;
        }
        i = i < 0 ? (mode == 1 ? -i : -i - 1) : (mode == 1 ? 2 * n - 2 - i : 2 * n - 1 - i);
      }
      src += (long)i * a[1];
    }
    p += 4 * r;
    idx = src;
  }
  STOREF(LOADF(x, idx), out, o);
}
