// A chain of depthwise-separable blocks (ds_chain.cl's: each a depthwise of depth multiplier 1
// and stride 1 keeping the map's size, then a 1x1 convolution, each with its clamp) in one launch
// of several work-groups that wait for one another between blocks. One group per image
// (ds_chain.cl) runs a block of 64 channels at one compute unit's rate; a launch per block costs
// the host an enqueue and the device a kernel's start. Here every group takes a run of the map's
// pixels in each block, reads the block's input where the others left it, and waits at a grid
// barrier (all groups resident: no more groups than compute units, ops/ds_chain.cc) before the
// next block. The activations between blocks live in two float32 buffers of `state`.
// Needs common.cl.
//
// ds_chain_grid(in, out, consts, state, NP, H, W, blocks, act_floats, pixels, lanes, lm)
//   __global const T* in [N][H][W][C0]; __global T* out [N][H][W][OC_last]; consts: ds_chain.cl's
//   (the table of DSC_FIELDS ints per block, each block's float32 constants at its byte offset:
//   dw_f [KH][KW][C], dw_bias [C], pw_bias [OC], pw_f [C][OC]).
//   __global int* state: ints [0] and [1] the barrier's count and generation (zero at first;
//   the barrier leaves the count at zero), then from float 16 two buffers of act_floats each (the
//   map at the widest inner block's channels).
//   NP: N * H * W pixels; group g takes pixels [g * pixels, (g + 1) * pixels). lanes: the 1x1's
//   work-items per output quad (a power of 2; pixels * OC / 4 * lanes <= DSG_WG where > 1).
//   __local float* lm: pixels * max C floats (the depthwise's outputs) + DSG_WG float4s + 4.
//   NDRange: 1-D, local DSG_WG, global ceil(NP / pixels) * DSG_WG. Channels in fours.
//   Defines: DSG_WG, DSG_KH, DSG_KW (every block's filter). -DQUANT_PTX: group_sync.cl's PTX
//   fences and loads past L1 (NVIDIA), which the blocks' hand-over needs: an L1 line may hold an
//   older block's values of the same buffer; without it volatile loads and OpenCL's fences,
//   which order nothing across groups on a GPU (the plan takes this form only where PTX runs, or
//   on a CPU device in tests). The barrier between blocks: group_sync.cl's grid_barrier.
#define GROUP_SYNC_GRID
#include "group_sync.cl"

#ifndef DSG_WG
#define DSG_WG 256
#endif
#ifndef DSG_KH
#define DSG_KH 3
#endif
#ifndef DSG_KW
#define DSG_KW 3
#endif
#define DSG_FIELDS 16
static inline float4 dsg_clamp(float4 x, float lo, float hi) {
  x = select(x, (float4)(lo), x < (float4)(lo));
  return select(x, (float4)(hi), x > (float4)(hi));
}

__kernel __attribute__((reqd_work_group_size(DSG_WG, 1, 1))) void ds_chain_grid(
    __global const T* restrict in, __global T* restrict out, __global const char* restrict consts,
    __global int* state, int NP, int H, int W, int blocks, int act_floats, int pixels, int lanes,
    __local float* lm OVERFLOW_PARAM) {
  // float4 reads of local memory need 16-byte alignment, which a local argument need not have.
  __local float4* zs = (__local float4*)(lm + (((16 - ((uint)(size_t)lm & 15)) & 15) >> 2));
  __global const int* tab = (__global const int*)consts;
  __global float* buf0 = (__global float*)state + 16;
  __global float* buf1 = buf0 + act_floats;
  const int lid = get_local_id(0);
  const int groups = get_num_groups(0);
  const int p0 = get_group_id(0) * pixels;
  const int np = min(pixels, NP - p0);
  const int HW = H * W;
  int cmax = 0;
  for (int b = 0; b < blocks; ++b) cmax = max(cmax, tab[b * DSG_FIELDS]);
  __local float4* rs = zs + pixels * (cmax >> 2);  // the 1x1's lanes' sums
  for (int b = 0; b < blocks; ++b) {
    __global const int* p = tab + b * DSG_FIELDS;
    const int C = p[0], OC = p[1], DH = p[2], DW = p[3], PT = p[4], PL = p[5];
    const float dw_min = as_float(p[12]), dw_max = as_float(p[13]);
    const float pw_min = as_float(p[14]), pw_max = as_float(p[15]);
    const int c4 = C >> 2, oc4 = OC >> 2;
    __global const float4* kdw = (__global const float4*)(consts + p[6]);  // [KH][KW][C]
    __global const float4* kdb = kdw + DSG_KH * DSG_KW * c4;
    __global const float4* kpb = kdb + c4;
    __global const float4* kpw = kpb + oc4;  // [C][OC]
    __global const float* src = b % 2 ? buf0 : buf1;  // block b - 1's output (b > 0)
    __global float* dst = b % 2 ? buf1 : buf0;

    // The depthwise at the group's pixels, a channel quad per work-item, into local memory.
    for (int i = lid; i < np * c4; i += DSG_WG) {
      const int q = i % c4, gp = p0 + i / c4;
      const int n = gp / HW, h = (gp / W) % H, w = gp % W;
      float4 acc = kdb[q];
#pragma unroll
      for (int kh = 0; kh < DSG_KH; ++kh) {
        const int ih = h - PT + kh * DH;
#pragma unroll
        for (int kw = 0; kw < DSG_KW; ++kw) {
          const int iw = w - PL + kw * DW;
          if (ih >= 0 && ih < H && iw >= 0 && iw < W) {
            const long at = ((long)(n * H + ih) * W + iw) * c4 + q;
            const float4 x = b == 0 ? LOADF4(in, at) : global_load_float4(src + 4 * at);
            acc = fma(x, kdw[(kh * DSG_KW + kw) * c4 + q], acc);
          }
        }
      }
      zs[i] = dsg_clamp(acc, dw_min, dw_max);
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    // The 1x1: work-item (pixel, output quad, lane) sums its lane's share of the channels; with
    // one lane it stores the output itself, else the lanes' sums meet in local memory.
    const int outs = np * oc4, work = outs * lanes;
    for (int i = lid; i < work; i += DSG_WG) {
      const int l = i % lanes, o = i / lanes;
      const int q = o % oc4, pix = o / oc4;
      float4 acc = 0.0f;
      // Unrolled: the weights of several quads in flight together (each a load from L2).
#pragma unroll 4
      for (int k = l; k < c4; k += lanes) {
        const float4 x = zs[pix * c4 + k];
        const int wr = 4 * k * oc4 + q;
        acc = fma((float4)(x.s0), kpw[wr], acc);
        acc = fma((float4)(x.s1), kpw[wr + oc4], acc);
        acc = fma((float4)(x.s2), kpw[wr + 2 * oc4], acc);
        acc = fma((float4)(x.s3), kpw[wr + 3 * oc4], acc);
      }
      if (lanes > 1) {
        rs[i] = acc;
      } else {
        const float4 v = dsg_clamp(acc + kpb[q], pw_min, pw_max);
        const long at = (long)(p0 + pix) * oc4 + q;
        if (b == blocks - 1)
          STOREF4(v, out, at);
        else
          vstore4(v, at, dst);
      }
    }
    // Unconditional: PoCL ran this loop's first pass past its bound behind a barrier inside the
    // branch.
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lanes > 1) {
      for (int o = lid; o < outs; o += DSG_WG) {
        float4 acc = kpb[o % oc4];
        for (int l = 0; l < lanes; ++l) acc += rs[o * lanes + l];
        const float4 v = dsg_clamp(acc, pw_min, pw_max);
        const long at = (long)p0 * oc4 + o;
        if (b == blocks - 1)
          STOREF4(v, out, at);
        else
          vstore4(v, at, dst);
      }
    }
    if (b + 1 < blocks) grid_barrier((__global int*)state, groups);
  }
}
