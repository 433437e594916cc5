// Kernels the cost model's calibration times on the delegate's device
// (src_cpp/delegate/calibration.cc): a small layer-sized launch, and a loop of
// multiply-adds whose rate stands for the device's arithmetic throughput.

// calibration_small0..3(in, out) — NDRange: global (4096), local (64). Kernels of the size a
// batch-1 layer's small ops have: a few thousand work-items, each reading a 3x3 window's worth of
// values written by the kernel before it (the host alternates the two buffers). A kernel that
// does next to nothing would leave out the memory latency every such layer pays. Four distinct
// kernels, launched in turn as a model's layers are: a driver may charge a launch more when the
// kernel changes than when the same one repeats (NVIDIA's OpenCL about twice:
// docs/performance.md, "What limits speed").
#define CALIBRATION_SMALL(NAME, STRIDE)                                              \
  __kernel void NAME(__global const float* in, __global float* out OVERFLOW_PARAM) { \
    const int i = get_global_id(0);                                                  \
    float s = 0.0f;                                                                  \
    for (int k = 0; k < 9; ++k) s += in[(i + k * STRIDE) & 4095];                    \
    out[i] = s * 0.1f;                                                               \
  }
CALIBRATION_SMALL(calibration_small0, 67)
CALIBRATION_SMALL(calibration_small1, 71)
CALIBRATION_SMALL(calibration_small2, 73)
CALIBRATION_SMALL(calibration_small3, 79)

// calibration_fma(a, iters) — NDRange: global (any). Four independent chains per work-item,
// so a device that issues one multiply-add per cycle per lane is not held back by latency;
// 8 * iters FLOP per work-item.
__kernel void calibration_fma(__global float* a, int iters OVERFLOW_PARAM) {
  const int i = get_global_id(0);
  float x0 = a[i], x1 = x0 + 1.0f, x2 = x0 + 2.0f, x3 = x0 + 3.0f;
  for (int j = 0; j < iters; ++j) {
    x0 = mad(x0, 0.999f, 0.5f);
    x1 = mad(x1, 0.999f, 0.5f);
    x2 = mad(x2, 0.999f, 0.5f);
    x3 = mad(x3, 0.999f, 0.5f);
  }
  a[i] = x0 + x1 + x2 + x3;
}
