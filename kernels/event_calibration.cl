// A kernel of adjustable length for measuring what an OpenCL profiling event adds to
// the time it reports (runtime/profiler.cc): `iters` dependent multiply-adds per item.

// event_calibration(a, iters) — NDRange: global (any).
__kernel void event_calibration(__global float* a, int iters OVERFLOW_PARAM) {
  const int i = get_global_id(0);
  float x = a[i];
  for (int j = 0; j < iters; ++j) x = x * 0.999f + 0.5f;
  a[i] = x;
}
