// An inverted-residual block on a small map in one launch: a 1x1 expand (EC -> C channels), a
// depthwise (KH x KW, depth multiplier 1) over its output and a 1x1 project (C -> OC), with the
// project's bias, residual ADD and activation. Each stage runs across the whole work-group out of
// local memory: the expand once per input pixel the group's taps read (the implicit GEMM's
// EXPAND_A repeats it at every tap), the depthwise from those, and each output summed by `lanes`
// work-items over the expanded channels. It replaces the GEMM's split kernel and its reduce with
// one launch (docs/performance.md has the figures). Needs common.cl.
//
// inverted_residual_block(in, ex_f, ex_bias, dw_f, dw_bias, pw_f, bias, out, lm, N, H, W, EC, C,
//                         OH, OW, OC, SH, SW, DH, DW, PT, PL, rows, chunk, lanes, ex_min, ex_max,
//                         dw_min, dw_max, act_min, act_max[, residual])
//   __global const T* in [N][H][W][EC] (the expand's input); ex_f [C][EC]; ex_bias (float) [C];
//   dw_f [KH][KW][C]; dw_bias (float) [C]; pw_f [OC][C]; bias (float) [OC]; __global T* out
//   [N][OH][OW][OC]; __local float* lm: max(in_pixels * EC + chunk * (IRB_WSTRIDE(EC) + KH * KW +
//   2 + in_pixels + rows * OW), rows * OW * OC * lanes) floats, 3 more with IRB_VEC, in_pixels =
//   ((rows - 1) * SH + (KH - 1) * DH + 1) * W.
//   PT, PL: the depthwise's top / left padding (taps outside the input are skipped: it pads the
//   expand's output with zeros). Clamps: each stage's own (a NaN kept, as their kernels keep it);
//   the depthwise's folded epilogue (CLGPU_DW_*) after its clamp, the project's (CLGPU_EPILOGUE,
//   CLGPU_POST<i>) and -DHAS_RESIDUAL (out = act(project + bias + residual)) as the GEMMs apply
//   them.
//   NDRange: 1-D, local IRB_WG, global N * ceil(OH / rows) * IRB_WG: a group computes `rows`
//   output rows of one image, every output channel, `chunk` expanded channels at a time.
//   rows * OW * OC * lanes <= IRB_WG * IRB_OPT (each work-item sums at most IRB_OPT outputs),
//   in_pixels * chunk <= IRB_WG * IRB_YPT (the expand's outputs per work-item); chunk a
//   multiple of 4 or C; IRB_WG a multiple of lanes.
//   -DPACKED: ex_f .. bias are offsets in one buffer, the last argument (common.cl's CONST_IN).
//   Defines: DW_KH, DW_KW (the depthwise's filter size; its loops unroll; 3 x 3 when unset, so
//   that the file builds alone); IRB_OPT, IRB_YPT (the bounds above, as small as the plan allows:
//   registers a block does not use cost it occupancy); -DIRB_VEC where EC, C and chunk are
//   multiples of 4: a chunk's weights and biases (and, with the first, the input pixels) load in
//   batches of IRB_BATCH float4s per work-item (8; 4 and 16 ran no faster) whose loads are all
//   issued before any is stored, and the expand reads float4s of local memory; IRB_PWI: the
//   project's first IRB_PWI float4 steps of weights per slot, loaded into registers with the
//   chunk's other loads rather than after the expand and depthwise (C a multiple of 4). On a small map the block's time is chains of loads, not
//   arithmetic (bench/results/irb-probe-*.md has the stages' cycles).

#ifndef IRB_WG
#define IRB_WG 256
#endif
#ifndef DW_KH
#define DW_KH 3
#endif
#ifndef DW_KW
#define DW_KW 3
#endif
#ifndef IRB_OPT
#define IRB_OPT 8
#endif
#ifndef IRB_YPT
#define IRB_YPT 4
#endif
#ifndef IRB_PWI
#define IRB_PWI 0
#endif
#ifndef IRB_BATCH
#define IRB_BATCH 8
#endif
// The expand's weight rows in local memory: EC + 1 floats apart (odd: neighbouring channels'
// rows in different banks), or with IRB_VEC a multiple of 4 whose quarter is odd (float4 reads
// of eight neighbouring rows in different banks).
#ifdef IRB_VEC
#define IRB_WSTRIDE(EC) ((EC) + (((EC) >> 2) % 2 == 0 ? 4 : 0))
#else
#define IRB_WSTRIDE(EC) ((EC) + 1)
#endif

__kernel __attribute__((reqd_work_group_size(IRB_WG, 1, 1))) void inverted_residual_block(
    __global const T* restrict in, CONST_IN(T, ex_f), CONST_IN(float, ex_bias), CONST_IN(T, dw_f),
    CONST_IN(float, dw_bias), CONST_IN(T, pw_f), CONST_IN(float, bias), __global T* restrict out,
    __local float* lm, int N, int H, int W, int EC, int C, int OH, int OW, int OC, int SH, int SW,
    int DH, int DW, int PT, int PL, int rows, int chunk, int lanes, float ex_min, float ex_max,
    float dw_min, float dw_max, float act_min,
    float act_max RESIDUAL_PARAM PACKED_ARG OVERFLOW_PARAM) {
  CONST_AT(T, ex_f);
  CONST_AT(float, ex_bias);
  CONST_AT(T, dw_f);
  CONST_AT(float, dw_bias);
  CONST_AT(T, pw_f);
  CONST_AT(float, bias);
#ifdef IRB_VEC
  // float4 reads of local memory need 16-byte alignment, which a local argument need not have
  // (NVIDIA's is 4): the plan allocates 3 floats more.
  lm += ((16 - ((uint)(size_t)lm & 15)) & 15) >> 2;
#endif
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
  const int wstride = IRB_WSTRIDE(EC);
  __local float* xs = lm;                   // [p_in][EC]: the block's input pixels
  __local float* ws = xs + p_in_max * EC;   // [chunk][wstride]: the expand's weights
  __local float* wd = ws + chunk * wstride; // [taps][chunk]: the depthwise's
  __local float* eb = wd + taps * chunk;    // [chunk]: the expand's bias
  __local float* db = eb + chunk;           // [chunk]: the depthwise's
  __local float* ys = db + chunk;           // [p_in][chunk]: the expand's outputs
  __local float* zs = ys + p_in_max * chunk;  // [p_out][chunk]: the depthwise's
  const int outputs = p_out * OC;
  const long out0 = ((long)n * OH + oh0) * OW * OC;
  // The outputs this work-item finishes (o = lid + j * IRB_WG): their bias and residual, loaded
  // first and only summed at the end, so that no work-item waits for them before it issues the
  // block's other loads.
  float fb[IRB_OPT], fr[IRB_OPT];
#pragma unroll
  for (int j = 0; j < IRB_OPT; ++j) {
    const int o = lid + j * IRB_WG, ov = o < outputs ? o : 0;  // ov: inside both buffers
    fb[j] = bias[ov % OC];
#ifdef HAS_RESIDUAL
    fr[j] = LOADF(residual, out0 + ov);
#else
    fr[j] = 0.0f;
#endif
  }
#ifndef IRB_VEC
  // The input rows the taps read, once (rows outside the image: zero, never read).
  {
    const int first = ih0 < 0 ? -ih0 * W * EC : 0;  // elements before the image's first row
    const long origin = ((long)n * H + ih0) * W * EC;
    const int rows_in = min(in_rows, H - ih0);
#pragma unroll 4
    for (int i = lid; i < rows_in * W * EC; i += IRB_WG)
      xs[i] = i < first ? 0.0f : LOADF(in, origin + i);
  }
#endif
  const bool vec_c = (C & 3) == 0;  // then chunk is a multiple of 4 or C
  // The work-item's project slots q = lid + j * IRB_WG (the first `slots` of them exist): output
  // q / lanes, channels e = 4 * s, 4 * (s + lanes), ... of each chunk (s = q % lanes, the same
  // for every j: IRB_WG is a multiple of lanes). Loops keep their loads independent across j
  // and unrolled steps, so that they can be in flight together.
  const int s = lid % lanes;
  const int slots = clamp((outputs * lanes - lid + IRB_WG - 1) / IRB_WG, 0, IRB_OPT);
  const int expands = clamp((p_in * chunk - lid + IRB_WG - 1) / IRB_WG, 0, IRB_YPT);
  int pm[IRB_OPT], poc[IRB_OPT];
  float4 acc[IRB_OPT];
#pragma unroll
  for (int j = 0; j < IRB_OPT; ++j) {
    const int o = (lid + j * IRB_WG) / lanes;
    pm[j] = j < slots ? o / OC : 0;
    poc[j] = j < slots ? o % OC : 0;
    acc[j] = (float4)(0.0f);
  }

  for (int c0 = 0; c0 < C; c0 += chunk) {
    const int cn = min(chunk, C - c0);
#if IRB_PWI > 0
    // The project's first weights of this chunk (see the project below), issued with the
    // chunk's other loads.
    float4 pwr[IRB_PWI][IRB_OPT];
#pragma unroll
    for (int it = 0; it < IRB_PWI; ++it) {
      const int e = 4 * s + it * 4 * lanes, ev = e < cn ? e : 0;  // ev: inside pw_f
#pragma unroll
      for (int j = 0; j < IRB_OPT; ++j)
        pwr[it][j] =
            j < slots && e < cn ? LOADF4(pw_f, (poc[j] * C + c0 + ev) >> 2) : (float4)(0.0f);
    }
#endif
#ifdef IRB_VEC
    // One loop of float4s over the chunk's regions (with the first chunk, the input pixels
    // before them), unrolled, so that a work-item's loads are in flight together: the input
    // pixels [p_in][EC] (rows outside the image zero), the expand's rows c0 .. c0 + cn of
    // [C][EC], the depthwise's taps [taps][C] and the two biases of those channels.
    {
      const int ec4 = EC >> 2, cn4 = cn >> 2;
      const int nx = c0 == 0 ? p_in * ec4 : 0, nw = cn * ec4, nt = taps * cn4;
      const int total = nx + nw + nt + 2 * cn4;
      const long x0 = ((long)n * H + ih0) * W * ec4;  // float4 index of the block's first row
      const int row4 = W * ec4;
      // Batches of IRB_BATCH float4s per work-item: every load of a batch issued before any
      // store, so that their latencies overlap.
      for (int i0 = lid; i0 < total; i0 += IRB_BATCH * IRB_WG) {
        float4 v[IRB_BATCH];
        int dst[IRB_BATCH];
#pragma unroll
        for (int u = 0; u < IRB_BATCH; ++u) {
          const int i = i0 + u * IRB_WG;
          // src 0: input, 1: expand weights, 2: taps, 3, 4: biases, -1: none. Both indices stay
          // inside their buffers whatever src is (at_t 0 unless src < 3, at_b 0 unless
          // src > 2): a compiler may load both before it selects.
          int k = i - nx, src = -1;
          long at_t = 0;
          int at_b = 0;
          dst[u] = -1;
          if (i >= total) {
          } else if (i < nx) {
            const int ih = ih0 + i / row4;
            dst[u] = 4 * i;
            if ((uint)ih < (uint)H) src = 0, at_t = x0 + i;
          } else if (k < nw) {
            const int r = k / ec4;
            src = 1, dst[u] = (int)(ws - lm) + r * wstride + 4 * (k - r * ec4);
            at_t = ((long)c0 * EC >> 2) + k;
          } else if ((k -= nw) < nt) {
            const int t = k / cn4, e4 = k - t * cn4;
            src = 2, dst[u] = (int)(wd - lm) + t * chunk + 4 * e4, at_t = ((t * C + c0) >> 2) + e4;
          } else {
            k -= nt;
            const int b = k >= cn4;
            src = 3 + b, k -= b * cn4;
            dst[u] = (int)((b ? db : eb) - lm) + 4 * k, at_b = (c0 >> 2) + k;
          }
          __global const T* p = src == 0 ? in : src == 1 ? ex_f : dw_f;
          __global const float* q = src == 3 ? ex_bias : dw_bias;
          v[u] = src < 0 ? (float4)(0.0f) : src < 3 ? LOADF4(p, at_t) : vload4(at_b, q);
        }
#pragma unroll
        for (int u = 0; u < IRB_BATCH; ++u)
          if (dst[u] >= 0) *(__local float4*)(lm + dst[u]) = v[u];
      }
    }
#else
    // The chunk's weights and biases, read coalesced: the expand's rows c0 .. c0 + cn of
    // [C][EC] (contiguous), the depthwise's taps of those channels.
    if ((EC & 3) == 0) {
#pragma unroll 4
      for (int i = lid; i < cn * EC / 4; i += IRB_WG) {
        const float4 v = LOADF4(ex_f, ((long)c0 * EC >> 2) + i);
        const int r = 4 * i / EC, k = 4 * i - r * EC;
        __local float* w = ws + r * wstride + k;
        w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
      }
    } else {
#pragma unroll 4
      for (int i = lid; i < cn * EC; i += IRB_WG) {
        const int r = i / EC;
        ws[r * wstride + (i - r * EC)] = LOADF(ex_f, (long)c0 * EC + i);
      }
    }
    // Branch-free and unrolled, so that a work-item's loads are in flight together: on a small
    // map the block's time is these chains of loads, not its arithmetic.
#pragma unroll 4
    for (int i = lid; i < taps * cn; i += IRB_WG) {
      const int t = i / cn, e = i - t * cn;
      wd[t * chunk + e] = LOADF(dw_f, t * C + c0 + e);
    }
    for (int e = lid; e < cn; e += IRB_WG) {
      eb[e] = ex_bias[c0 + e];
      db[e] = dw_bias[c0 + e];
    }
#endif
    barrier(CLK_LOCAL_MEM_FENCE);
    // The expand at every input pixel the group's taps reach: items i = lid + j * IRB_WG of
    // [p_in][chunk] (rows outside the image and channels past C: zero, unused).
    {
      int xb[IRB_YPT], wb[IRB_YPT];
      float y[IRB_YPT];
#pragma unroll
      for (int j = 0; j < IRB_YPT; ++j) {
        const int i = lid + j * IRB_WG;
        const int p = i / chunk, e = i - p * chunk;
        xb[j] = j < expands ? p * EC : 0;
        wb[j] = j < expands && e < cn ? e * wstride : 0;
        y[j] = 0.0f;
      }
#ifdef IRB_VEC
#pragma unroll 2
      for (int k = 0; k < EC; k += 4) {
#pragma unroll
        for (int j = 0; j < IRB_YPT; ++j)
          if (j < expands)
            y[j] += dot(*(__local const float4*)(xs + xb[j] + k),
                        *(__local const float4*)(ws + wb[j] + k));
      }
#else
#pragma unroll 4
      for (int k = 0; k < EC; ++k) {
#pragma unroll
        for (int j = 0; j < IRB_YPT; ++j)
          if (j < expands) y[j] += xs[xb[j] + k] * ws[wb[j] + k];
      }
#endif
#pragma unroll
      for (int j = 0; j < IRB_YPT; ++j) {
        if (j < expands) {
          const int i = lid + j * IRB_WG;
          const int p = i / chunk, e = i - p * chunk;
          const int ih = ih0 + p / W;
          float v = 0.0f;
          if (e < cn && (uint)ih < (uint)H) v = CLAMP_KEEP_NAN(eb[e] + y[j], ex_min, ex_max);
          ys[i] = v;
        }
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    // The depthwise at the group's output pixels.
    for (int i = lid; i < p_out * chunk; i += IRB_WG) {
      const int m = i / chunk, e = i - m * chunk;
      float v = 0.0f;
      if (e < cn) {
        const int oh = oh0 + m / OW, ow = m % OW;
        v = db[e];
#pragma unroll
        for (int kh = 0; kh < DW_KH; ++kh) {
          const int ih = oh * SH - PT + kh * DH;
          if ((uint)ih >= (uint)H) continue;
#pragma unroll
          for (int kw = 0; kw < DW_KW; ++kw) {
            const int iw = ow * SW - PL + kw * DW;
            if ((uint)iw < (uint)W)
              v += ys[((ih - ih0) * W + iw) * chunk + e] * wd[(kh * DW_KW + kw) * chunk + e];
          }
        }
        v = DW_ACTIVATE(CLAMP_KEEP_NAN(v, dw_min, dw_max));
      }
      zs[i] = v;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    // The project's products over this chunk.
    if (vec_c) {
#if IRB_PWI > 0
#pragma unroll
      for (int it = 0; it < IRB_PWI; ++it) {
        const int e = 4 * s + it * 4 * lanes;
#pragma unroll
        for (int j = 0; j < IRB_OPT; ++j)
          if (j < slots && e < cn) acc[j] += vload4(0, zs + pm[j] * chunk + e) * pwr[it][j];
      }
#endif
#pragma unroll 2
      for (int e = 4 * s + IRB_PWI * 4 * lanes; e < cn; e += 4 * lanes) {
#pragma unroll
        for (int j = 0; j < IRB_OPT; ++j)
          if (j < slots)
            acc[j] += vload4(0, zs + pm[j] * chunk + e) * LOADF4(pw_f, (poc[j] * C + c0 + e) >> 2);
      }
    } else {
#pragma unroll 2
      for (int e = s; e < cn; e += lanes) {
#pragma unroll
        for (int j = 0; j < IRB_OPT; ++j)
          if (j < slots) acc[j].x += zs[pm[j] * chunk + e] * LOADF(pw_f, poc[j] * C + c0 + e);
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }

  // Each output's lanes, summed, then its bias and residual (fin) and the activation.
  __local float* rs = lm;
#pragma unroll
  for (int j = 0; j < IRB_OPT; ++j)
    if (j < slots) rs[lid + j * IRB_WG] = (acc[j].x + acc[j].y) + (acc[j].z + acc[j].w);
  barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
  for (int j = 0; j < IRB_OPT; ++j) {
    const int o = lid + j * IRB_WG;
    if (o < outputs) {
      float v = 0.0f;
      if ((lanes & 3) == 0) {
        float4 t4 = (float4)(0.0f);
        for (int t = 0; t < lanes; t += 4) t4 += vload4(0, rs + o * lanes + t);
        v = (t4.x + t4.y) + (t4.z + t4.w);
      } else {
        for (int t = 0; t < lanes; ++t) v += rs[o * lanes + t];
      }
      // As PLUS_RESIDUAL(bias, .) summed them.
#ifdef HAS_RESIDUAL
      v += fb[j] + fr[j];
#else
      v += fb[j];
#endif
      STOREF(ACTIVATE(v, act_min, act_max), out, out0 + o);
    }
  }
}
