// Layer normalization over the last axis as converters spell it (src_cpp/ops/layer_norm.cc
// recognizes the MEAN / SQUARED_DIFFERENCE / MEAN / ADD / RSQRT / MUL ... nodes), in one kernel:
// per row, mean = sum(x) / C, var = sum((x - mean)^2) / C, g = gamma / sqrt(var + eps), then the
// output in the order the graph computes it (LN_FORM):
//   0: x * g + (-mean) * g (TF's batch_normalization without beta), 1: x * g + (beta - mean * g),
//   2: (x - mean) * g, 3: (x - mean) * g + beta.
// With HAS_ADD, x = a + b (a residual ADD before the norm, folded in). Float arithmetic.
//
// layer_norm(a, b, gamma, beta, out, rows, C, eps, gamma_n, beta_n)
//   __global const T* a, b [rows][C] (b unused without HAS_ADD); __global const float* gamma
//   [gamma_n], beta [beta_n] (gamma_n, beta_n: C, or 1 for one value for every column);
//   __global T* out [rows][C]; int rows, C; float eps.
//   NDRange: 1-D, local = LN_WG (a power of 2 <= LN_LOCAL), global = rows * LN_WG: a group per row.

#ifndef LN_FORM
#define LN_FORM 0
#endif
#define LN_LOCAL 256  // largest group the host launches

#ifdef HAS_ADD
#define LN_X(i) (LOADF(a, (i)) + LOADF(b, (i)))
#else
#define LN_X(i) LOADF(a, (i))
#endif

// part[0] = the sum of every work-item's v over the group (part: LN_LOCAL floats of local
// memory). A macro, so that every barrier is in the kernel's own body: as a helper function
// called twice, PoCL 3.1 ran the barriers so that now and then one row of the output was wrong.
#define GROUP_SUM(v, part, li, n)                 \
  do {                                            \
    (part)[li] = (v);                             \
    barrier(CLK_LOCAL_MEM_FENCE);                 \
    for (int s_ = (n) >> 1; s_ > 0; s_ >>= 1) {   \
      if ((li) < s_) (part)[li] += (part)[(li) + s_]; \
      barrier(CLK_LOCAL_MEM_FENCE);               \
    }                                             \
  } while (0)

__kernel void layer_norm(__global const T* restrict a, __global const T* restrict b,
                         __global const float* restrict gamma, __global const float* restrict beta,
                         __global T* restrict out, int rows, int C, float eps, int gamma_n,
                         int beta_n OVERFLOW_PARAM) {
  __local float part[LN_LOCAL];
  const int row = get_group_id(0), li = get_local_id(0), n = get_local_size(0);
  const long base = (long)row * C;
  float s = 0.0f;
  for (int i = li; i < C; i += n) s += LN_X(base + i);
  GROUP_SUM(s, part, li, n);
  const float mean = part[0] / (float)C;
  barrier(CLK_LOCAL_MEM_FENCE);  // everyone has read it before part is reused
  float q = 0.0f;
  for (int i = li; i < C; i += n) {
    const float d = LN_X(base + i) - mean;
    q += d * d;
  }
  GROUP_SUM(q, part, li, n);
  const float r = 1.0f / sqrt(part[0] / (float)C + eps);
  for (int i = li; i < C; i += n) {
    const float x = LN_X(base + i);
    const float g = r * gamma[gamma_n == 1 ? 0 : i];
#if LN_FORM == 0
    const float y = x * g + (-mean) * g;
#elif LN_FORM == 1
    const float y = x * g + (beta[beta_n == 1 ? 0 : i] - mean * g);
#elif LN_FORM == 2
    const float y = (x - mean) * g;
#else
    const float y = (x - mean) * g + beta[beta_n == 1 ? 0 : i];
#endif
    STOREF(y, out, base + i);
  }
}

// L2_NORMALIZATION over the last axis, as TFLite's kernel: out = x / max(sqrt(sum x^2), 1e-6),
// the sum in float (a NaN norm stays NaN, as std::max keeps its first argument).
//
// l2_normalize(x, out, C)
//   __global const T* x, out [rows][C]; int C.
//   NDRange: 1-D, local = L2_WG (reqd_work_group_size), global = rows * L2_WG: a group per row.
#define L2_WG 64
__kernel __attribute__((reqd_work_group_size(L2_WG, 1, 1))) void l2_normalize(
    __global const T* x, __global T* out, int C OVERFLOW_PARAM) {
  __local float part[L2_WG];
  const int lid = get_local_id(0);
  const long base = (long)get_group_id(0) * C;
  float s = 0.0f;
  for (int i = lid; i < C; i += L2_WG) {
    const float v = LOADF(x, base + i);
    s += v * v;
  }
  part[lid] = s;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int k = L2_WG / 2; k > 0; k >>= 1) {
    if (lid < k) part[lid] += part[lid + k];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float l2 = sqrt(part[0]);
  const float norm = l2 < 1e-6f ? 1e-6f : l2;
  for (int i = lid; i < C; i += L2_WG) STOREF(LOADF(x, base + i) / norm, out, base + i);
}
