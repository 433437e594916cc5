// A chain of batch-1 float FULLY_CONNECTED layers (a dense stack: each layer's output read by the
// next alone) in one launch of work-groups across the GPU that wait for one another between
// layers. Apart, each layer is a launch of the small-M GEMM (gemm_small_m.cl): a host enqueue and
// a kernel start for a few microseconds of weight reads. Here every group takes its share of a
// layer's output columns, reads the layer's input where the others left it, and waits at a grid
// barrier (all groups resident: no more groups than compute units, ops/dense_chain.cc) before
// the next layer. The values between layers live in two float32 buffers of `state`.
// Needs common.cl.
//
// dense_chain_grid(in, out, consts, state, layers, act_floats, lm)
//   __global const T* in [K0]; __global T* out [N_last]; consts: DCG_FIELDS ints per layer (K, N,
//   the weights' and the bias's byte offsets, lanes, and the bits of act_min, act_max and the
//   largest |weight|), each layer's float32 weights [N][K] (TFLite's layout, rows 16-byte
//   aligned) and bias [N] at their offsets.
//   __global int* state: ints [0] and [1] the barrier's count and generation (zero at first;
//   the barrier leaves the count at zero), then from float 16 two buffers of act_floats each.
//   lanes: a layer's work-items per output column (a power of 2 <= DCG_WG), striding over its
//   weight row in float4s; the group takes DCG_WG / lanes columns a pass, the groups' passes
//   interleaved over the columns.
//   __local float* lm: DCG_WG + 4 + the widest K floats (+ 4 for alignment).
//   NDRange: 1-D, local DCG_WG, global groups * DCG_WG. Every K a multiple of 4.
//   Where K * max|x| * max|w| reaches FLT_MAX a column is summed again in the order of TFLite's
//   CPU kernel (its saturation), as gemm_small_m.cl does.
//   Defines: DCG_WG, DCG_LOADS (a work-item's weight loads in flight: 8 ran 3072-wide layers
//   1.2x as fast as 4 on the H200, 16 slower). -DQUANT_PTX: group_sync.cl's PTX fences and
//   loads past L1, which the layers' hand-over needs (as ds_chain_grid.cl's).
#define GROUP_SYNC_GRID
#include "group_sync.cl"

#ifndef DCG_WG
#define DCG_WG 256
#endif
#ifndef DCG_LOADS
#define DCG_LOADS 8
#endif
#define DCG_FIELDS 8

// One column in TFLite's order for one row (Eigen's GEMV on x86): products rounded before they
// are added, in 4 lanes (k % 4) summed as (l0 + l2) + (l1 + l3).
static inline float dcg_cpu_order_dot(__local const float* x, __global const float* w, int K) {
#pragma OPENCL FP_CONTRACT OFF
  float l[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int k = 0; k < K; ++k) {
    const float p = x[k] * w[k];
    l[k & 3] = l[k & 3] + p;
  }
  return (l[0] + l[2]) + (l[1] + l[3]);
}

__kernel __attribute__((reqd_work_group_size(DCG_WG, 1, 1))) void dense_chain_grid(
    __global const T* restrict in, __global T* restrict out, __global const char* restrict consts,
    __global int* state, int layers, int act_floats, __local float* lm OVERFLOW_PARAM) {
  // float4 reads of local memory need 16-byte alignment, which a local argument need not have.
  __local float* red = lm + (((16 - ((uint)(size_t)lm & 15)) & 15) >> 2);
  __local int* amax = (__local int*)(red + DCG_WG);
  __local float4* xs = (__local float4*)(red + DCG_WG + 4);
  __global const int* tab = (__global const int*)consts;
  __global float* buf0 = (__global float*)state + 16;
  __global float* buf1 = buf0 + act_floats;
  const int lid = get_local_id(0);
  const int gid = get_group_id(0), groups = get_num_groups(0);
  for (int l = 0; l < layers; ++l) {
    __global const int* p = tab + l * DCG_FIELDS;
    const int K = p[0], N = p[1], lanes = p[4];
    const float act_min = as_float(p[5]), act_max = as_float(p[6]), w_max = as_float(p[7]);
    __global const float4* w = (__global const float4*)(consts + p[2]);
    __global const float* bias = (__global const float*)(consts + p[3]);
    __global const float* src = l % 2 ? buf0 : buf1;  // layer l - 1's output (l > 0)
    __global float* dst = l % 2 ? buf1 : buf0;
    const int k4 = K >> 2;

    // The layer's input into local memory, and its largest |x|: a float's bits order as its
    // int's where it is not negative. fmax passes a NaN by (which the sums carry anyway).
    if (lid == 0) *amax = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    float4 mx = 0.0f;
    for (int i = lid; i < k4; i += DCG_WG) {
      const float4 v = l == 0 ? LOADF4(in, i) : global_load_float4(src + 4 * i);
      xs[i] = v;
      mx = fmax(mx, fabs(v));
    }
    atomic_max(amax, as_int(fmax(fmax(mx.x, mx.y), fmax(mx.z, mx.w))));
    barrier(CLK_LOCAL_MEM_FENCE);
    const bool safe = (float)K * as_float(*amax) * w_max < FLT_MAX;

    // Passes of DCG_WG / lanes columns, lanes work-items each: a lane sums every lanes-th
    // float4 of its column's row, the lanes' sums meet in a tree. The pass count is the
    // group's alone, so every work-item reaches each barrier.
    const int cols = DCG_WG / lanes, lane = lid & (lanes - 1);
    for (int base = gid * cols; base < N; base += groups * cols) {
      const int n = base + lid / lanes;
      float acc = 0.0f;
      if (n < N) {
        __global const float4* row = w + (long)n * k4;
        // DCG_LOADS of the row's float4s loaded together: the loads in flight are what a
        // layer's time is made of where its weights come from memory rather than L2.
        int q = lane;
        for (; q + (DCG_LOADS - 1) * lanes < k4; q += DCG_LOADS * lanes) {
          float4 wv[DCG_LOADS];
#pragma unroll
          for (int u = 0; u < DCG_LOADS; ++u) wv[u] = row[q + u * lanes];
#pragma unroll
          for (int u = 0; u < DCG_LOADS; ++u) acc += dot(wv[u], xs[q + u * lanes]);
        }
        for (; q < k4; q += lanes) acc += dot(row[q], xs[q]);
      }
      red[lid] = acc;
      for (int s = lanes >> 1; s > 0; s >>= 1) {
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lane < s) red[lid] += red[lid + s];
      }
      barrier(CLK_LOCAL_MEM_FENCE);
      if (lane == 0 && n < N) {
        const float sum = safe ? red[lid]
                               : dcg_cpu_order_dot((__local const float*)xs,
                                                   (__global const float*)(w + (long)n * k4), K);
        const float v = CLAMP_KEEP_NAN(sum + bias[n], act_min, act_max);
        if (l == layers - 1)
          STOREF(v, out, n);
        else
          dst[n] = v;
      }
      // red is the next pass's.
      barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (l + 1 < layers) grid_barrier(state, groups);
  }
}
