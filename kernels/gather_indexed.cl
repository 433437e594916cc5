// A gather through run-time indices (GATHER with computed positions, EMBEDDING_LOOKUP): params
// as [outer, extent, inner], out as [outer, n_ids, inner], out[o, k, j] = params[o, ids[k], j].
// The partition checks every index on the host before the upload (TFLite's kernels fail the
// invoke on one outside [0, extent)); the clamp only keeps a read inside the buffer.
//
// gather_indexed(params, ids, out, total, n_ids, extent, inner)
//   NDRange: global (total rounded up), one output element each.
__kernel void gather_indexed(__global const T* params, __global const int* ids, __global T* out,
                             int total, int n_ids, int extent, int inner OVERFLOW_PARAM) {
  const int i = get_global_id(0);
  if (i >= total) return;
  const int j = i % inner, rest = i / inner;
  const int k = rest % n_ids, o = rest / n_ids;
  const int id = clamp(ids[k], 0, extent - 1);
  STOREF(LOADF(params, ((long)o * extent + id) * inner + j), out, i);
}
