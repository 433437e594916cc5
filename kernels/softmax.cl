// SOFTMAX and LOG_SOFTMAX over the last axis, in float whatever the storage: per row, the max,
// then the sum of exp(beta * (x - max)), then each output. `log_out` selects LOG_SOFTMAX:
// beta * (x - max) - log(sum). Subtracting the max keeps exp from overflowing.

// softmax_rows(x, out, rows, d, beta, log_out) — short rows: one work-item per row.
// NDRange: global (rows).
__kernel void softmax_rows(__global const T* x, __global T* out, int rows, int d, float beta,
                           int log_out OVERFLOW_PARAM) {
  const int row = get_global_id(0);
  if (row >= rows) return;
  const long base = (long)row * d;
  float m = -INFINITY;
  for (int i = 0; i < d; ++i) m = fmax(m, LOADF(x, base + i));
  float sum = 0.0f;
  for (int i = 0; i < d; ++i) sum += exp(beta * (LOADF(x, base + i) - m));
  if (log_out) {
    const float ls = log(sum);
    for (int i = 0; i < d; ++i) STOREF(beta * (LOADF(x, base + i) - m) - ls, out, base + i);
  } else {
    const float inv = 1.0f / sum;
    for (int i = 0; i < d; ++i) STOREF(exp(beta * (LOADF(x, base + i) - m)) * inv, out, base + i);
  }
}

#define SM_LOCAL 256  // largest group the host launches

// softmax_group(x, out, rows, d, beta, log_out) — long rows: one group of `local` (a power of
// 2, <= SM_LOCAL) work-items per row, strided over it, with tree reductions in local memory.
// NDRange: global (rows * local), local (local).
__kernel void softmax_group(__global const T* x, __global T* out, int rows, int d, float beta,
                            int log_out OVERFLOW_PARAM) {
  __local float part[SM_LOCAL];
  const int row = get_group_id(0), li = get_local_id(0), n = get_local_size(0);
  const long base = (long)row * d;
  float m = -INFINITY;
  for (int i = li; i < d; i += n) m = fmax(m, LOADF(x, base + i));
  part[li] = m;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = n >> 1; s > 0; s >>= 1) {
    if (li < s) part[li] = fmax(part[li], part[li + s]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  m = part[0];
  barrier(CLK_LOCAL_MEM_FENCE);  // everyone has read the max before part is reused
  float sum = 0.0f;
  for (int i = li; i < d; i += n) sum += exp(beta * (LOADF(x, base + i) - m));
  part[li] = sum;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = n >> 1; s > 0; s >>= 1) {
    if (li < s) part[li] += part[li + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  sum = part[0];
  if (log_out) {
    const float ls = log(sum);
    for (int i = li; i < d; i += n) STOREF(beta * (LOADF(x, base + i) - m) - ls, out, base + i);
  } else {
    const float inv = 1.0f / sum;
    for (int i = li; i < d; i += n) STOREF(exp(beta * (LOADF(x, base + i) - m)) * inv, out, base + i);
  }
}
