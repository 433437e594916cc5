// RFFT2D of one row a block (fft_length [1, n]: a short-time Fourier transform's frames) and
// the ops that read its complex bins: CAST to float and REAL (the real parts), IMAG, and
// COMPLEX_ABS (magnitudes, hypot as std::abs of a complex). A complex value is a float2
// (real, imaginary), in float32 whatever the storage, as TFLite lays out complex64.

// rfft_rows(x, tw, out, rows, in_len, in_stride, n, bins) — NDRange: (bins rounded up, rows).
//   Row r's input starts at x + r * in_stride and has in_len values (read up to n of them: the
//   rest of an n-point frame is zeros). out[r * bins + k] = sum_j x[j] * tw[(j * k) % n], tw[m]
//   = (cos, -sin)(2 pi m / n): the forward transform's bins 0 .. n / 2. A direct sum over a
//   table of exact angles: every bin's own n products, no butterflies to round in between.
__kernel void rfft_rows(__global const T* x, __global const float2* tw, __global float2* out,
                        int rows, int in_len, int in_stride, int n, int bins OVERFLOW_PARAM) {
  const int k = get_global_id(0), r = get_global_id(1);
  if (k >= bins || r >= rows) return;
  __global const T* row = x + (long)r * in_stride;
  const int len = min(in_len, n);
  float re = 0.0f, im = 0.0f;
  int m = 0;  // (j * k) % n, stepped
  for (int j = 0; j < len; ++j) {
    const float v = LOADF(row, j);
    const float2 w = tw[m];
    re = fma(v, w.x, re);
    im = fma(v, w.y, im);
    m += k;
    if (m >= n) m -= n;
  }
  out[(long)r * bins + k] = (float2)(re, im);
}

// The complex element-wise ops, by `op`: 0 the real part (CAST, REAL), 1 the imaginary part
// (IMAG), 2 the magnitude (COMPLEX_ABS). NDRange: global (n).
__kernel void complex_part(__global const float2* z, __global T* out, int n, int op OVERFLOW_PARAM) {
  const int i = get_global_id(0);
  if (i >= n) return;
  const float2 v = z[i];
  STOREF(op == 0 ? v.x : op == 1 ? v.y : hypot(v.x, v.y), out, i);
}
