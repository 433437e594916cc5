// An int8 inverted-residual block on a small map in one launch, bit for bit with TFLite's
// integer kernels: a 1x1 expand (EC -> C channels), a depthwise (KH x KW, depth multiplier 1)
// over its output and a 1x1 project (C -> OC), each requantized as its own kernel stores it,
// and the project's folded residual ADD. As inverted_residual.cl does for floats, each stage
// runs across the whole work-group out of local memory: the expand once per input pixel the
// group's taps read (the int8 GEMM's EXPAND_A repeats it at every tap, and on the keyword
// spotters' 9-tap blocks the chain of loads that makes was past its cap: two launches per
// block), the depthwise from those bytes, and each output summed by `lanes` work-items over the
// expanded channels. Needs common.cl; includes quant.cl.
//
// inverted_residual_int8(in, out, prm, ex_b, ex_bias, ex_stage, dw_f, dw_bias, dw_stage, pw_b,
//                        pw_bias, pw_stage [, rp] [, res]), or with -DPACKED
//                        inverted_residual_int8(in, out, consts [, res])
//   __global const char* in [N][H][W][EC] (the expand's input, EC % 4 == 0); __global char* out
//   [N][OH][OW][OC]. The constant buffers as the int8 GEMMs hold them (ops/gemm_int8.h):
//   ex_b [C][EC / 4] and pw_b [OC][C / 4] (bytes packed four to an int), their biases with the
//   input's zero point folded in, dw_f [KH][KW][C] bytes, dw_bias [C] (plain), the stages int2
//   (multiplier, shift) per channel (quant.cl). C % 4 == 0.
//   prm: [0..9] with -DPACKED the byte offsets of those ten buffers in `consts` (rp last, 0
//   where absent); [10..] N, H, W, OH, OW, OC, SH, SW, DH, DW, PT, PL (the depthwise's geometry,
//   PT / PL its top / left padding: taps outside add nothing), rows, chunk, lanes; ex_up_below,
//   ex_zero, ex_lo, ex_hi (the expand's stage); dw_in_zero, dw_up_below, dw_zero, dw_lo, dw_hi;
//   up_below, out_zero, act_min, act_max (the project's). src_cpp/ops/inverted_residual_int8.cc
//   names the indices.
//   -DQUANT_RESIDUAL: res [N][OH][OW][OC] the ADD's other operand, rp its parameters
//   (quant_add); the output is the ADD's.
//   NDRange: 1-D, local IRB_WG, global N * ceil(OH / rows) * IRB_WG: a group computes `rows`
//   output rows of one image, every output channel, `chunk` expanded channels at a time
//   (a multiple of 4).
//   Defines: IRB_EC, IRB_C (EC and C: the loops over them unroll), DW_KH, DW_KW, IRB_OPT (the
//   outputs a work-item sums), IRB_YPT (the expand's groups of four outputs it computes),
//   IRB_LOCAL (the ints of local memory the plan needs).
#include "quant.cl"

#ifndef IRB_WG
#define IRB_WG 256
#endif
#ifndef DW_KH
#define DW_KH 3
#endif
#ifndef DW_KW
#define DW_KW 3
#endif
#ifndef IRB_EC
#define IRB_EC 8
#endif
#ifndef IRB_C
#define IRB_C 16
#endif
#ifndef IRB_OPT
#define IRB_OPT 8
#endif
#ifndef IRB_YPT
#define IRB_YPT 4
#endif
#ifndef IRB_LOCAL
#define IRB_LOCAL 4096
#endif
#define IRB_EC4 (IRB_EC / 4)
#define IRB_C4 (IRB_C / 4)
// The expand's weight rows in local memory, an odd number of ints apart: neighbouring channels'
// rows in different banks.
#define IRB_WSTRIDE (IRB_EC4 | 1)

#ifdef QUANT_RESIDUAL
#define RES_ARG , __global const char* restrict res
#define RP_CONST PRM_CONST(int, rp)
#else
#define RES_ARG
#define RP_CONST
#endif
#ifdef PACKED
#define IRB_CONSTS , __global const char* restrict consts
#else
#define IRB_CONSTS                                                                            \
  , __global const int* restrict prm PRM_CONST(int, ex_b) PRM_CONST(int, ex_bias)           \
        PRM_CONST(int2, ex_stage) PRM_CONST(char, dw_f) PRM_CONST(int, dw_bias)             \
            PRM_CONST(int2, dw_stage) PRM_CONST(int, pw_b) PRM_CONST(int, pw_bias)          \
                PRM_CONST(int2, pw_stage) RP_CONST
#endif

__kernel __attribute__((reqd_work_group_size(IRB_WG, 1, 1))) void inverted_residual_int8(
    __global const char* restrict in,
    __global char* restrict out IRB_CONSTS RES_ARG OVERFLOW_PARAM) {
  PRM_FROM_CONSTS
  PRM_AT(int, ex_b, 0);
  PRM_AT(int, ex_bias, 1);
  PRM_AT(int2, ex_stage, 2);
  PRM_AT(char, dw_f, 3);
  PRM_AT(int, dw_bias, 4);
  PRM_AT(int2, dw_stage, 5);
  PRM_AT(int, pw_b, 6);
  PRM_AT(int, pw_bias, 7);
  PRM_AT(int2, pw_stage, 8);
#ifdef QUANT_RESIDUAL
  PRM_AT(int, rp, 9);
#endif
  const int H = prm[11], W = prm[12], OH = prm[13], OW = prm[14], OC = prm[15];
  const int SH = prm[16], SW = prm[17], DH = prm[18], DW = prm[19], PT = prm[20], PL = prm[21];
  const int rows = prm[22], chunk = prm[23], lanes = prm[24];
  const int ex_up_below = prm[25], ex_zero = prm[26], ex_lo = prm[27], ex_hi = prm[28];
  const int dw_in_zero = prm[29], dw_up_below = prm[30], dw_zero = prm[31], dw_lo = prm[32];
  const int dw_hi = prm[33], up_below = prm[34], out_zero = prm[35], act_min = prm[36];
  const int act_max = prm[37];
  __local int lm[IRB_LOCAL];
  const int lid = get_local_id(0);
  const int blocks = (OH + rows - 1) / rows;
  const int n = get_group_id(0) / blocks;
  const int oh0 = (get_group_id(0) % blocks) * rows;
  const int nrows = min(rows, OH - oh0);
  const int p_out = nrows * OW;
  const int ih0 = oh0 * SH - PT;  // the first input row the taps may read
  const int in_rows = (nrows - 1) * SH + (DW_KH - 1) * DH + 1;
  const int p_in = in_rows * W;
  const int p_in_max = ((rows - 1) * SH + (DW_KH - 1) * DH + 1) * W;
  const int taps = DW_KH * DW_KW;
  const int chunk4 = chunk >> 2;
  // Ints of local memory, channels packed four to an int where they are bytes.
  __local int* xs = lm;                          // [p_in][EC / 4]: the block's input pixels
  __local int* ws = xs + p_in_max * IRB_EC4;     // [chunk][IRB_WSTRIDE]: the expand's weights
  __local int* wd = ws + chunk * IRB_WSTRIDE;    // [taps][chunk / 4]: the depthwise's
  __local int* eb = wd + taps * chunk4;          // [chunk]: the expand's bias
  __local int* db = eb + chunk;                  // [chunk]: the depthwise's
  __local int* es = db + chunk;                  // [chunk][2]: the expand's stage
  __local int* ds = es + 2 * chunk;              // [chunk][2]: the depthwise's
  __local int* ys = ds + 2 * chunk;              // [p_in][chunk / 4]: the expand's outputs
  __local int* zs = ys + p_in_max * chunk4;      // [p_out][chunk / 4]: the depthwise's
  const int outputs = p_out * OC;
  const long out0 = ((long)n * OH + oh0) * OW * OC;
  // The outputs this work-item finishes (o = lid + j * IRB_WG): their bias, stage and residual
  // byte, loaded first and used at the end, so that no work-item waits on them later.
  int fb[IRB_OPT], fr[IRB_OPT];
  int2 fs[IRB_OPT];
#pragma unroll
  for (int j = 0; j < IRB_OPT; ++j) {
    const int o = lid + j * IRB_WG, ov = o < outputs ? o : 0;  // ov: inside every buffer
    fb[j] = pw_bias[ov % OC];
    fs[j] = pw_stage[ov % OC];
#ifdef QUANT_RESIDUAL
    fr[j] = res[out0 + ov];
#else
    fr[j] = 0;
#endif
  }
  // The input rows the taps read, once (rows outside the image: zero, never read).
  {
    const int first = ih0 < 0 ? -ih0 * W * IRB_EC4 : 0;  // ints before the image's first row
    const long origin = ((long)n * H + ih0) * W * IRB_EC4;
    const int rows_in = min(in_rows, H - ih0);
    __global const int* in4 = (__global const int*)in;
#pragma unroll 4
    for (int i = lid; i < rows_in * W * IRB_EC4; i += IRB_WG)
      xs[i] = i < first ? 0 : in4[origin + i];
  }
  // The work-item's project slots q = lid + j * IRB_WG (the first `slots` of them exist): output
  // q / lanes, channel groups s, s + lanes, ... of each chunk (s = q % lanes, the same for
  // every j: IRB_WG is a multiple of lanes).
  const int s = lid % lanes;
  const int slots = clamp((outputs * lanes - lid + IRB_WG - 1) / IRB_WG, 0, IRB_OPT);
  const int expands = clamp((p_in * chunk4 - lid + IRB_WG - 1) / IRB_WG, 0, IRB_YPT);
  int pm[IRB_OPT], poc[IRB_OPT], acc[IRB_OPT];
#pragma unroll
  for (int j = 0; j < IRB_OPT; ++j) {
    const int o = (lid + j * IRB_WG) / lanes;
    pm[j] = j < slots ? o / OC : 0;
    poc[j] = j < slots ? o % OC : 0;
    acc[j] = 0;
  }

  for (int c0 = 0; c0 < IRB_C; c0 += chunk) {
    const int cn = min(chunk, IRB_C - c0), cn4 = cn >> 2;
    // The chunk's constants, coalesced and branch-free so that a work-item's loads are in
    // flight together: the expand's rows c0 .. c0 + cn, the depthwise's taps of those channels,
    // the two biases and stages.
#pragma unroll 4
    for (int i = lid; i < cn * IRB_EC4; i += IRB_WG) {
      const int r = i / IRB_EC4;
      ws[r * IRB_WSTRIDE + (i - r * IRB_EC4)] = ex_b[c0 * IRB_EC4 + i];
    }
#pragma unroll 4
    for (int i = lid; i < taps * cn4; i += IRB_WG) {
      const int t = i / cn4, e = i - t * cn4;
      wd[t * chunk4 + e] = ((__global const int*)dw_f)[t * IRB_C4 + (c0 >> 2) + e];
    }
    for (int e = lid; e < cn; e += IRB_WG) {
      eb[e] = ex_bias[c0 + e];
      db[e] = dw_bias[c0 + e];
      vstore2(ex_stage[c0 + e], e, es);
      vstore2(dw_stage[c0 + e], e, ds);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    // The expand at every input pixel the group's taps reach, four channels per item
    // i = lid + j * IRB_WG of [p_in][chunk / 4], as its own GEMM stores them (pixels outside
    // the image: never read).
    {
      int xb[IRB_YPT], wb[IRB_YPT];
      int4 y[IRB_YPT];
#pragma unroll
      for (int j = 0; j < IRB_YPT; ++j) {
        const int i = lid + j * IRB_WG;
        const int p = i / chunk4, e4 = i - p * chunk4;
        xb[j] = j < expands ? p * IRB_EC4 : 0;
        wb[j] = j < expands && e4 < cn4 ? 4 * e4 * IRB_WSTRIDE : 0;
        y[j] = j < expands && e4 < cn4 ? vload4(e4, eb) : (int4)(0);
      }
#pragma unroll
      for (int k = 0; k < IRB_EC4; ++k) {
#pragma unroll
        for (int j = 0; j < IRB_YPT; ++j) {
          if (j < expands) {
            const int xv = xs[xb[j] + k];
            const __local int* w = ws + wb[j] + k;
            y[j].x = dot4(xv, w[0], y[j].x);
            y[j].y = dot4(xv, w[IRB_WSTRIDE], y[j].y);
            y[j].z = dot4(xv, w[2 * IRB_WSTRIDE], y[j].z);
            y[j].w = dot4(xv, w[3 * IRB_WSTRIDE], y[j].w);
          }
        }
      }
#pragma unroll
      for (int j = 0; j < IRB_YPT; ++j) {
        if (j < expands) {
          const int i = lid + j * IRB_WG;
          const int p = i / chunk4, e4 = i - p * chunk4, e = 4 * e4, c = c0 + e;
          int v = 0;
          if (e4 < cn4)
            v = pack4(
                quant_output(y[j].x, vload2(e, es), c, ex_up_below, ex_zero, ex_lo, ex_hi),
                quant_output(y[j].y, vload2(e + 1, es), c + 1, ex_up_below, ex_zero, ex_lo, ex_hi),
                quant_output(y[j].z, vload2(e + 2, es), c + 2, ex_up_below, ex_zero, ex_lo, ex_hi),
                quant_output(y[j].w, vload2(e + 3, es), c + 3, ex_up_below, ex_zero, ex_lo,
                             ex_hi));
          ys[i] = v;
        }
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    // The depthwise at the group's output pixels, four channels per item: int32 sums of
    // (x - in_zero) * filter plus the bias, requantized (taps outside add nothing).
    for (int i = lid; i < p_out * chunk4; i += IRB_WG) {
      const int m = i / chunk4, e4 = i - m * chunk4;
      int v = 0;
      if (e4 < cn4) {
        const int oh = oh0 + m / OW, ow = m % OW;
        int4 a = vload4(e4, db);
#pragma unroll
        for (int kh = 0; kh < DW_KH; ++kh) {
          const int ih = oh * SH - PT + kh * DH;
          if ((uint)ih >= (uint)H) continue;
#pragma unroll
          for (int kw = 0; kw < DW_KW; ++kw) {
            const int iw = ow * SW - PL + kw * DW;
            if ((uint)iw < (uint)W) {
              const int x = ys[((ih - ih0) * W + iw) * chunk4 + e4];
              const int w = wd[(kh * DW_KW + kw) * chunk4 + e4];
              a += (convert_int4(as_char4(x)) - dw_in_zero) * convert_int4(as_char4(w));
            }
          }
        }
        const int e = 4 * e4, c = c0 + e;
        v = pack4(quant_output(a.x, vload2(e, ds), c, dw_up_below, dw_zero, dw_lo, dw_hi),
                      quant_output(a.y, vload2(e + 1, ds), c + 1, dw_up_below, dw_zero, dw_lo,
                                   dw_hi),
                      quant_output(a.z, vload2(e + 2, ds), c + 2, dw_up_below, dw_zero, dw_lo,
                                   dw_hi),
                      quant_output(a.w, vload2(e + 3, ds), c + 3, dw_up_below, dw_zero, dw_lo,
                                   dw_hi));
      }
      zs[i] = v;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    // The project's products over this chunk: groups of four channels e4 = s, s + lanes, ...
#pragma unroll 2
    for (int e4 = s; e4 < cn4; e4 += lanes) {
#pragma unroll
      for (int j = 0; j < IRB_OPT; ++j)
        if (j < slots)
          acc[j] = dot4(zs[pm[j] * chunk4 + e4], pw_b[poc[j] * IRB_C4 + (c0 >> 2) + e4], acc[j]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }

  // Each output's lanes, summed (integers: any order is exact), then its bias and stage and
  // the residual ADD.
  __local int* rs = lm;
#pragma unroll
  for (int j = 0; j < IRB_OPT; ++j)
    if (j < slots) rs[lid + j * IRB_WG] = acc[j];
  barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
  for (int j = 0; j < IRB_OPT; ++j) {
    const int o = lid + j * IRB_WG;
    if (o < outputs) {
      int v = fb[j];
      for (int t = 0; t < lanes; ++t) v += rs[o * lanes + t];
      v = quant_output(v, fs[j], o % OC, up_below, out_zero, act_min, act_max);
#ifdef QUANT_RESIDUAL
      v = quant_add(v, fr[j], rp, false);
#endif
      out[out0 + o] = (char)v;
    }
  }
}
