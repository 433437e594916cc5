// Reductions (MEAN, SUM, REDUCE_PROD, REDUCE_MAX, REDUCE_MIN) in float, whatever the storage.
// The host builds with -DRED_OP=<n> (src_cpp/ops/reduce.cc keeps the same numbers) and views
// the input as [outer, reduce, inner] when the reduced axes are adjacent, else passes the
// kept and reduced dims and strides to reduce_general.
#define RED_SUM 0
#define RED_PROD 1
#define RED_MAX 2
#define RED_MIN 3
#define RED_POOL_MAX 4

// RED combines two values, RED_SEQ folds the next input into a running result in input order.
// They differ for MAX and MIN only, where a NaN matters as TFLite's CPU kernels treat it: their
// running result becomes a NaN input, and a NaN result is replaced by the next input. So the
// result is the MAX (MIN) of the inputs after the last NaN, or NaN when the last input is one.
// RED skips NaNs (a NaN never compares greater); the kernels handle them apart.
#if RED_OP == RED_SUM
#define RED_INIT 0.0f
#define RED(acc, v) ((acc) + (v))
#define RED_SEQ(acc, v) RED(acc, v)
#elif RED_OP == RED_PROD
#define RED_INIT 1.0f
#define RED(acc, v) ((acc) * (v))
#define RED_SEQ(acc, v) RED(acc, v)
#elif RED_OP == RED_MAX
#define RED_INIT (-INFINITY)
#define RED_EMPTY (-FLT_MAX)  // TFLite's result over an empty axis: its running value's start
#define RED(acc, v) ((v) > (acc) ? (v) : (acc))
#define RED_SEQ(acc, v) ((acc) > (v) ? (acc) : (v))
#define RED_NAN_RESETS
#elif RED_OP == RED_MIN
#define RED_INIT INFINITY
#define RED_EMPTY FLT_MAX
#define RED(acc, v) ((v) < (acc) ? (v) : (acc))
#define RED_SEQ(acc, v) ((acc) < (v) ? (acc) : (v))
#define RED_NAN_RESETS
#elif RED_OP == RED_POOL_MAX
// MAX_POOL_2D over a whole image (src_cpp/ops/pool.cc): the window kernel's arithmetic.
#define RED_INIT (-FLT_MAX)
#define RED(acc, v) fmax(acc, v)
#define RED_SEQ(acc, v) RED(acc, v)
#endif

#define RED_LOCAL 256  // largest group the host launches

// reduce_tiled(x, out, outer, reduce, inner, divisor, lx, ly, slices, act_lo, act_hi) — the [outer, reduce, inner]
// view. With slices > 1 (sums only) each group reduces one of `slices` equal runs of the reduced
// extent and writes [outer, slices, inner]; the host adds the slices up with a second launch.
// Groups of lx x ly work-items (ly a power of 2, lx * ly <= RED_LOCAL): lx consecutive inner
// columns, so reads coalesce across them, and ly rows of the reduced extent each, combined by a
// tree in local memory. Groups along dimension 0 cover (outer, inner block) pairs, so no
// dimension but 0 grows with the tensor. NDRange: global (outer * slices * ceil(inner / lx) * lx, ly),
// local (lx, ly). The result is divided by `divisor` (the count for MEAN, else 1), then clamped
// to [act_lo, act_hi] and put through the program's EPILOGUE (a pool's fused activation; a
// reduction passes infinite bounds and builds no epilogue).
__kernel void reduce_tiled(__global const T* x, __global T* out, int outer, int reduce, int inner,
                           float divisor, int lx, int ly, int slices, float act_lo, float act_hi OVERFLOW_PARAM) {
  __local float part[RED_LOCAL];
  const int lxi = get_local_id(0), lyi = get_local_id(1);
  const int blocks = (inner + lx - 1) / lx;
  const int o = get_group_id(0) / (blocks * slices);
  const int slice = get_group_id(0) / blocks % slices;
  const int ix = (get_group_id(0) % blocks) * lx + lxi;
  const int run = (reduce + slices - 1) / slices;
  const int r0 = slice * run, r1 = min(reduce, r0 + run);
  const long base = (long)o * reduce * inner + ix;
  float acc = RED_INIT;
#ifdef RED_NAN_RESETS
  // The last NaN of each column first (max over the group), then the inputs after it.
  __local int nan_at[RED_LOCAL];
  int last_nan = -1;
  if (ix < inner) {
    for (int r = lyi; r < reduce; r += ly) {
      const float v = LOADF(x, base + (long)r * inner);
      if (isnan(v)) last_nan = r;
      acc = RED(acc, v);
    }
  }
  nan_at[lyi * lx + lxi] = last_nan;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = ly >> 1; s > 0; s >>= 1) {
    if (lyi < s) nan_at[lyi * lx + lxi] = max(nan_at[lyi * lx + lxi], nan_at[(lyi + s) * lx + lxi]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const int p = nan_at[lxi];
  if (p >= 0 && ix < inner) {  // rare: again over this work-item's inputs after the NaN
    acc = RED_INIT;
    for (int r = lyi; r < reduce; r += ly)
      if (r > p) acc = RED(acc, LOADF(x, base + (long)r * inner));
  }
#else
  if (ix < inner)
    for (int r = r0 + lyi; r < r1; r += ly) acc = RED(acc, LOADF(x, base + (long)r * inner));
#endif
  part[lyi * lx + lxi] = acc;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = ly >> 1; s > 0; s >>= 1) {
    if (lyi < s) part[lyi * lx + lxi] = RED(part[lyi * lx + lxi], part[(lyi + s) * lx + lxi]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lyi == 0 && ix < inner) {
    float result = part[lxi] / divisor;
#ifdef RED_NAN_RESETS
    if (p == reduce - 1) result = NAN;
#endif
#ifdef RED_EMPTY
    if (reduce == 0) result = RED_EMPTY;
#endif
    STOREF(ACTIVATE(result, act_lo, act_hi), out, ((long)o * slices + slice) * inner + ix);
  }
}

// reduce_general(x, out, total, nk, nr, count, divisor, meta) — any set of reduced axes, one
// work-item per output. meta: int[2 * (nk + nr)] = kept dims, kept strides, reduced dims,
// reduced strides (input strides; the output is the kept dims in order). NDRange: global (total).
__kernel void reduce_general(__global const T* x, __global T* out, int total, int nk, int nr,
                             int count, float divisor, __global const int* meta OVERFLOW_PARAM) {
  const int i = get_global_id(0);
  if (i >= total) return;
  long base = 0;
  int rem = i;
  for (int d = nk - 1; d >= 0; --d) {
    const int dim = meta[d];
    base += (long)(rem % dim) * meta[nk + d];
    rem /= dim;
  }
  __global const int* rdims = meta + 2 * nk;
  float acc = RED_INIT;
  for (int r = 0; r < count; ++r) {
    long off = base;
    int q = r;
    for (int d = nr - 1; d >= 0; --d) {
      const int dim = rdims[d];
      off += (long)(q % dim) * rdims[nr + d];
      q /= dim;
    }
    acc = RED_SEQ(acc, LOADF(x, off));  // in input order, so NaNs behave as in TFLite
  }
#ifdef RED_EMPTY
  if (count == 0) acc = RED_EMPTY;
#endif
  STOREF(acc / divisor, out, i);
}
