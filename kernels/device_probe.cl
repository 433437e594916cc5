// The first program a delegate builds before it claims anything: a device that cannot
// compile common.cl's storage type and load/store helpers keeps the model on the CPU.

// device_probe(x, n) — NDRange: global (n).
__kernel void device_probe(__global T* x, int n OVERFLOW_PARAM) {
  const int i = get_global_id(0);
  if (i < n) STOREF(LOADF(x, i) + 1.0f, x, i);
}
