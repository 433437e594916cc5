// One work-group of several finishing what they all wrote (split-K's last split, int8 sums that
// groups add for one another). Included by quant.cl and by the float split-K GEMM
// (conv2d_implicit_gemm.cl); the guard lets a program include both.
// global_fence(): this work-item's global writes (atomics included) visible to every other
// work-group before its later ones; with -DQUANT_PTX (NVIDIA, inline PTX probed:
// src_cpp/cl/int8_dot.h) PTX's membar.gl, which guarantees it. global_load_float(p): *p as
// another group left it, read from L2 past this unit's L1 (PTX), or through a volatile pointer.
#ifndef GROUP_SYNC_CL
#define GROUP_SYNC_CL
#if defined(QUANT_PTX)
#define global_fence() asm volatile("membar.gl;")
static inline float global_load_float(__global const float* p) {
  float v;
  asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(p));
  return v;
}
#else
#define global_fence() mem_fence(CLK_GLOBAL_MEM_FENCE)
static inline float global_load_float(__global const float* p) {
  return *(volatile __global const float*)p;
}
#endif

// last_to_count(counter, groups, flag): called by every work-item of a group after its global
// writes; true in the group that is the `groups`-th to count itself in *counter, which it resets
// for the next launch. The other groups' writes are then all visible to it. `flag`: one int of
// local memory. Returns the same in every work-item of the group (barriers inside).
static inline bool last_to_count(__global int* counter, int groups, __local int* flag) {
  global_fence();
  barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
  if (get_local_id(0) == 0 && get_local_id(1) == 0) {
    *flag = atomic_inc(counter) == groups - 1;
    if (*flag) atomic_xchg(counter, 0);
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  const bool last = *flag;
  if (last) global_fence();
  return last;
}
#endif  // GROUP_SYNC_CL
