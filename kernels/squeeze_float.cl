// A squeeze on float tensors in one launch (src_cpp/ops/squeeze.h): the MEAN over H and W of one
// image (x seen as [reduce][channels]), then one or two dense ops on that vector (squeeze-and-
// excitation's reduce and expand), each with its clamp and folded element-wise ops. Needs
// common.cl and quant.cl (the groups' hand-over).
//
// squeeze_float(x, out, partial, counter, reduce, channels, slices, divisor,
//               w1, bias1, n1, k1, lo1, hi1, w2, bias2, n2, k2, lo2, hi2)
//   The mean's groups as squeeze_int8.cl's: group g covers lx consecutive channels (block
//   g % blocks) of one of `slices` runs of the reduced extent, its ly rows per column added by a
//   tree, and stores its column sums in partial [slices][channels] (float32); the last group to
//   count itself in *counter (quant.cl's last_to_count) adds the slices in order and divides by
//   `divisor`, then runs the dense ops on the vector in local memory: w: [n][k] in the storage
//   type, bias: n float32, output j = SQ<i>_ACT(sum_c w[j][c] v[c] + bias[j]) (the clamp
//   [lo, hi], then the op's epilogue: -DSQ<i>_EPILOGUE, _ALPHA, -DSQ<i>_POST1/2 and _C as
//   common.cl's CLGPU_ ones). The last layer's outputs are stored to out; with one layer, n2 = 0.
//   NDRange: local (lx, ly), powers of 2, lx * ly <= SQ_TILE; global (blocks * slices * lx, ly).
//   channels, k1, n1, k2, n2 at most SQ_VEC.
//   -DSQ_SOFTMAX: out is a SOFTMAX over the last layer's n values (n <= SQ_TILE), exp(sm_beta *
//   (v - max)) over their sum; one more, last argument: float sm_beta.
//   -DPACKED: w1, bias1, w2, bias2 are offsets in one buffer, the last argument (common.cl's
//   CONST_IN). -DSQ_MEAN_BOUNDED: the mean clamped to +-FLT_MAX first (an AVERAGE_POOL_2D's,
//   whose activation range TFLite applies even without an activation).
#include "quant.cl"

#ifdef SQ_SOFTMAX
#define SM_ARGS , float sm_beta
#else
#define SM_ARGS
#endif

#define SQ_TILE 256
#define SQ_VEC 2048

#ifndef SQ1_EPILOGUE
#define SQ1_EPILOGUE 0
#endif
#ifndef SQ1_POST1
#define SQ1_POST1 0
#define SQ1_POST1_C 0
#endif
#ifndef SQ1_POST2
#define SQ1_POST2 0
#define SQ1_POST2_C 0
#endif
#ifndef SQ2_EPILOGUE
#define SQ2_EPILOGUE 0
#endif
#ifndef SQ2_POST1
#define SQ2_POST1 0
#define SQ2_POST1_C 0
#endif
#ifndef SQ2_POST2
#define SQ2_POST2 0
#define SQ2_POST2_C 0
#endif
#define SQ_EPI(i, x) EPILOGUE_OF(SQ##i##_EPILOGUE, x, SQ##i##_EPILOGUE_ALPHA)
#define SQ_ACT(i, x, lo, hi)                                                                    \
  POST_CLAMP(SQ##i##_POST2, POST_CLAMP(SQ##i##_POST1, SQ_EPI(i, CLAMP_KEEP_NAN(x, lo, hi)), \
                                       SQ##i##_POST1_C),                                      \
             SQ##i##_POST2_C)

// Dense op `layer` over the vector in (k floats) into res (n floats), on the whole group: output
// j's dot product split between partners (a power of 2) whose sums a tree adds.
#define SQ_DENSE(layer, in, k, w, bias, n, lo, hi, res, part)                                \
  {                                                                                          \
    const int lid_ = get_local_id(1) * get_local_size(0) + get_local_id(0);                  \
    const int group_ = get_local_size(0) * get_local_size(1);                                \
    int partners = 1;                                                                        \
    while ((n) > 0 && partners * 2 * (n) <= group_) partners *= 2;                           \
    for (int j0 = 0; j0 < (n); j0 += group_ / partners) {                                    \
      const int j = j0 + lid_ / partners, r = lid_ % partners;                               \
      float acc = 0.0f;                                                                      \
      if (j < (n))                                                                           \
        for (int cc = r; cc < (k); cc += partners)                                           \
          acc += LOADF(w, (long)j * (k) + cc) * in[cc];                                      \
      part[lid_] = acc;                                                                      \
      barrier(CLK_LOCAL_MEM_FENCE);                                                          \
      for (int s = partners / 2; s > 0; s /= 2) {                                            \
        if (r < s) part[lid_] += part[lid_ + s];                                             \
        barrier(CLK_LOCAL_MEM_FENCE);                                                        \
      }                                                                                      \
      if (r == 0 && j < (n)) res[j] = SQ_ACT(layer, part[lid_] + bias[j], lo, hi);           \
      barrier(CLK_LOCAL_MEM_FENCE);                                                          \
    }                                                                                        \
  }

__kernel void squeeze_float(__global const T* x, __global T* out, __global float* partial,
                            __global int* counter, int reduce, int channels, int slices,
                            float divisor, CONST_IN(T, w1), CONST_IN(float, bias1), int n1, int k1,
                            float lo1, float hi1, CONST_IN(T, w2), CONST_IN(float, bias2), int n2,
                            int k2, float lo2, float hi2 SM_ARGS PACKED_ARG OVERFLOW_PARAM) {
  CONST_AT(T, w1);
  CONST_AT(float, bias1);
  CONST_AT(T, w2);
  CONST_AT(float, bias2);
  __local float part[SQ_TILE];
  __local float vec1[SQ_VEC], vec2[SQ_VEC];
  __local int flag;
  const int lx = get_local_size(0), ly = get_local_size(1);
  const int lxi = get_local_id(0), lyi = get_local_id(1);
  const int lid = lyi * lx + lxi, group = lx * ly;
  const int blocks = (channels + lx - 1) / lx;
  const int g = get_group_id(0);
  const int block = g % blocks, slice = g / blocks;
  const int c = block * lx + lxi;
  const int run = (reduce + slices - 1) / slices;
  const int r1 = min(reduce, (slice + 1) * run);
  float sum = 0.0f;
  if (c < channels)
    for (int r = slice * run + lyi; r < r1; r += ly) sum += LOADF(x, (long)r * channels + c);
  part[lid] = sum;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = ly / 2; s > 0; s /= 2) {
    if (lyi < s) part[lid] += part[lid + s * lx];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lyi == 0 && c < channels) partial[(long)slice * channels + c] = part[lxi];
  // The groups but the last are done (a return the whole group takes).
  if (!last_to_count(counter, blocks * slices, &flag)) return;
  // Other groups' sums are read where they landed (global_take: past this unit's cache).
  for (int k = lid; k < channels; k += group) {
    float total = 0.0f;
    for (int s = 0; s < slices; ++s)
      total += as_float(global_take((__global int*)partial + (long)s * channels + k));
#ifdef SQ_MEAN_BOUNDED
    vec1[k] = CLAMP_KEEP_NAN(total / divisor, -FLT_MAX, FLT_MAX);
#else
    vec1[k] = total / divisor;
#endif
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  SQ_DENSE(1, vec1, k1, w1, bias1, n1, lo1, hi1, vec2, part);
  // With one layer the host passes n2 = 0: no pass, no barrier.
  SQ_DENSE(2, vec2, k2, w2, bias2, n2, lo2, hi2, vec1, part);
  __local float* res = n2 > 0 ? vec1 : vec2;
  const int n = n2 > 0 ? n2 : n1;
#ifdef SQ_SOFTMAX
  // The largest value, then the exps (kept in res) and their sum, each by a tree over the group.
  float mx = -INFINITY;
  for (int j = lid; j < n; j += group) mx = fmax(mx, res[j]);
  part[lid] = mx;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = group / 2; s > 0; s /= 2) {
    if (lid < s) part[lid] = fmax(part[lid], part[lid + s]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  mx = part[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  float esum = 0.0f;
  for (int j = lid; j < n; j += group) {
    const float e = exp(sm_beta * (res[j] - mx));
    res[j] = e;
    esum += e;
  }
  part[lid] = esum;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = group / 2; s > 0; s /= 2) {
    if (lid < s) part[lid] += part[lid + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float inv = 1.0f / part[0];
  for (int j = lid; j < n; j += group) STOREF(res[j] * inv, out, j);
#else
  for (int j = lid; j < n; j += group) STOREF(res[j], out, j);
#endif
}
