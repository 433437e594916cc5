// Conversions between the float32 tensors TFLite hands us and the device's
// storage type, for partition inputs and outputs under fp16 storage.

// to_storage(src, dst, n) — NDRange: global (n).
__kernel void to_storage(__global const float* src, __global T* dst, int n) {
  const int i = get_global_id(0);
  if (i < n) STOREF(src[i], dst, i);
}

// from_storage(src, dst, n) — NDRange: global (n).
__kernel void from_storage(__global const T* src, __global float* dst, int n) {
  const int i = get_global_id(0);
  if (i < n) dst[i] = LOADF(src, i);
}
