// Conversions between the float32 tensors TFLite hands us and the device's
// storage type, for partition inputs and outputs under fp16 storage. `offset` is
// the position of element 0 in the storage buffer: a tensor larger than one buffer
// is converted through a float32 staging buffer a range at a time. And CAST's int32 -> float
// (ops/cast.cc), which stores into the same storage type.

// to_storage(src, dst, n, offset) — NDRange: global (n).
__kernel void to_storage(__global const float* src, __global T* dst, int n, long offset OVERFLOW_PARAM) {
  const int i = get_global_id(0);
  if (i < n) STOREF(src[i], dst, offset + i);
}

// from_storage(src, dst, n, offset) — NDRange: global (n).
__kernel void from_storage(__global const T* src, __global float* dst, int n, long offset OVERFLOW_PARAM) {
  const int i = get_global_id(0);
  if (i < n) dst[i] = LOADF(src, offset + i);
}

// cast_int32(src, dst, n): CAST of int32 values to float storage, rounded to nearest as the CPU
// kernel's static_cast — NDRange: global (n).
__kernel void cast_int32(__global const int* src, __global T* dst, int n OVERFLOW_PARAM) {
  const int i = get_global_id(0);
  if (i < n) STOREF(convert_float(src[i]), dst, i);
}
