// ADD: same-shape elementwise (4 elements per work-item) and NumPy-style
// broadcasting over up to 8 dimensions.

// add_same(a, b, out, n, act_min, act_max) — NDRange: global ceil(n / 4).
__kernel void add_same(__global const T* a, __global const T* b, __global T* out, int n,
                       float act_min, float act_max) {
  const int i4 = get_global_id(0);
  if ((i4 + 1) * 4 <= n) {
    const float4 v = LOADF4(a, i4) + LOADF4(b, i4);
    STOREF4(fmin(fmax(v, (float4)act_min), (float4)act_max), out, i4);
  } else {
    for (int i = i4 * 4; i < n; ++i)
      STOREF(ACTIVATE(LOADF(a, i) + LOADF(b, i), act_min, act_max), out, i);
  }
}

// add_broadcast(a, b, out, total, rank, meta, act_min, act_max)
//   meta: int[3*rank] = output dims, then a's strides, then b's strides (0 where
//   that input broadcasts along the axis). NDRange: global (total).
__kernel void add_broadcast(__global const T* a, __global const T* b, __global T* out, int total,
                            int rank, __global const int* meta, float act_min, float act_max) {
  const int i = get_global_id(0);
  if (i >= total) return;
  int rem = i;
  long ia = 0, ib = 0;
  for (int d = rank - 1; d >= 0; --d) {
    const int dim = meta[d];
    const int x = rem % dim;
    rem /= dim;
    ia += (long)x * meta[rank + d];
    ib += (long)x * meta[2 * rank + d];
  }
  STOREF(ACTIVATE(LOADF(a, ia) + LOADF(b, ib), act_min, act_max), out, i);
}
