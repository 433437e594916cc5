// RESIZE_NEAREST_NEIGHBOR and RESIZE_BILINEAR over NHWC. The host computes, per output
// row and column, the source indices (and bilinear fractions) in float exactly as the
// CPU kernels do, so the rounding of align_corners / half_pixel_centers matches theirs
// and no work-item divides or rounds. One work-item per output element (per 4 channels
// in the _c4 variants, for C % 4 == 0).
//
// Common arguments: in, out, h, w (input), cv (channels, in units of 4 for _c4), oh, ow.
// NDRange (ow * cv rounded up to the work-group, oh, batch): dimension 0 runs over one
// output row, consecutive channels in neighbouring work-items.

// Each product rounds before it is added, as on the CPU: a fused multiply-add keeps
// 3e38 * 1.5625 - 1.7e38 finite where the CPU's product is already +Inf.
#pragma OPENCL FP_CONTRACT OFF

#define RESIZE_ARGS \
  __global const T *in, __global T *out, int h, int w, int cv, int oh, int ow

#define RESIZE_POS                                                              \
  const int i = get_global_id(0), oy = get_global_id(1), b = get_global_id(2); \
  if (i >= ow * cv) return;                                                     \
  const int ox = i / cv, cx = i - ox * cv;                                      \
  const long dst = ((long)b * oh + oy) * ow * cv + i;

#define RESIZE_IN(y, x) ((((long)b * h + (y)) * w + (x)) * cv + cx)

// rows[oy], cols[ox]: the source row / column of each output.
__kernel void resize_nearest(RESIZE_ARGS, __global const int* rows, __global const int* cols OVERFLOW_PARAM) {
  RESIZE_POS
  STOREF(LOADF(in, RESIZE_IN(rows[oy], cols[ox])), out, dst);
}

__kernel void resize_nearest_c4(RESIZE_ARGS, __global const int* rows, __global const int* cols OVERFLOW_PARAM) {
  RESIZE_POS
  STOREF4A(LOADF4A(in, RESIZE_IN(rows[oy], cols[ox])), out, dst);
}

// rows[2 * oy], rows[2 * oy + 1]: the two source rows; fy[oy]: the weight of the second
// (it may be negative at the first row under half_pixel_centers, as on the CPU).
// Columns alike. As TFLite's CPU kernel (optimized ResizeBilinearGeneric): each corner's two
// weights multiply first, and the products add corner by corner in the order (y0, x0),
// (y0, x1), (y1, x0), (y1, x1). Near FLT_MAX the order decides: (v * 1.25) * -0.25 is -Inf
// where v * (1.25 * -0.25) is finite, and a sum may overflow in one order and not another.
#define BILINEAR_WEIGHTS                                                    \
  const int y0 = rows[2 * oy], y1 = rows[2 * oy + 1];                       \
  const int x0 = cols[2 * ox], x1 = cols[2 * ox + 1];                       \
  const float dy = fy[oy], dx = fx[ox], ry = 1.f - dy, rx = 1.f - dx;       \
  const float w00 = ry * rx, w01 = ry * dx, w10 = dy * rx, w11 = dy * dx;

__kernel void resize_bilinear(RESIZE_ARGS, __global const int* rows, __global const int* cols,
                              __global const float* fy, __global const float* fx OVERFLOW_PARAM) {
  RESIZE_POS
  BILINEAR_WEIGHTS
  const float v = LOADF(in, RESIZE_IN(y0, x0)) * w00 + LOADF(in, RESIZE_IN(y0, x1)) * w01 +
                  LOADF(in, RESIZE_IN(y1, x0)) * w10 + LOADF(in, RESIZE_IN(y1, x1)) * w11;
  STOREF(v, out, dst);
}

__kernel void resize_bilinear_c4(RESIZE_ARGS, __global const int* rows, __global const int* cols,
                                 __global const float* fy, __global const float* fx OVERFLOW_PARAM) {
  RESIZE_POS
  BILINEAR_WEIGHTS
  const float4 v = LOADF4A(in, RESIZE_IN(y0, x0)) * w00 + LOADF4A(in, RESIZE_IN(y0, x1)) * w01 +
                   LOADF4A(in, RESIZE_IN(y1, x0)) * w10 + LOADF4A(in, RESIZE_IN(y1, x1)) * w11;
  STOREF4A(v, out, dst);
}

// int8: TFLite's ResizeBilinearInteger. fy[oy], fx[ox]: the second row's / column's weight in
// 1/1024 (the first's is 1024 minus it); the sum of the four products rounded half away from
// zero to 1/2^20. T is the integer type (-DSTORAGE_INT8), cv the channels. Only in integer
// builds: half storage cannot be read directly without cl_khr_fp16.
#if defined(STORAGE_INT8) || defined(STORAGE_UINT8)
__kernel void resize_bilinear_int8(RESIZE_ARGS, __global const int* rows, __global const int* cols,
                                   __global const int* fy, __global const int* fx OVERFLOW_PARAM) {
  RESIZE_POS
  const int y0 = rows[2 * oy], y1 = rows[2 * oy + 1];
  const int x0 = cols[2 * ox], x1 = cols[2 * ox + 1];
  const long dy = fy[oy], dx = fx[ox], ry = 1024 - dy, rx = 1024 - dx;
  const long v = (long)in[RESIZE_IN(y0, x0)] * ry * rx + (long)in[RESIZE_IN(y1, x0)] * dy * rx +
                 (long)in[RESIZE_IN(y0, x1)] * ry * dx + (long)in[RESIZE_IN(y1, x1)] * dy * dx;
  out[dst] = (T)((v + (v > 0 ? (1L << 19) : -(1L << 19))) / (1L << 20));
}
#endif
