// One work-group of several finishing what they all wrote (split-K's last split, int8 sums that
// groups add for one another), and all of them meeting between stages (ds_chain_grid.cl).
// Included by quant.cl, by the float split-K GEMM (conv2d_implicit_gemm.cl) and by
// ds_chain_grid.cl; the guard lets a program include it twice.
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
#ifdef GROUP_SYNC_GRID
static inline float4 global_load_float4(__global const float* p) {
  float4 v;
  asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "l"(p));
  return v;
}
#endif
#else
#define global_fence() mem_fence(CLK_GLOBAL_MEM_FENCE)
static inline float global_load_float(__global const float* p) {
  return *(volatile __global const float*)p;
}
#ifdef GROUP_SYNC_GRID
static inline float4 global_load_float4(__global const float* p) {
  volatile __global const float* v = (volatile __global const float*)p;
  return (float4)(v[0], v[1], v[2], v[3]);
}
#endif
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
// -DGROUP_SYNC_GRID (defined by the programs that use them, so that the others' sources stay as
// they were): global_load_float4(p), four floats as another group left them, and grid_barrier.
#ifdef GROUP_SYNC_GRID
// Polls of grid_barrier's wait before it gives up, about a second (a group that never arrives:
// a device running fewer of them at once than it reports units), so that a wrong plan ends the
// launch instead of hanging it. The waits its callers plan are microseconds.
#define GRID_SPIN_LIMIT (1 << 20)

// grid_barrier(sync, groups): every one of the launch's `groups` work-groups waits here until all
// have arrived, each group's global writes before it visible to every group after it. Sound only
// where all groups are resident at once (no more than the compute units) and with QUANT_PTX on a
// GPU. sync: two ints in global memory, zero before the first launch (a count, which the barrier
// leaves at zero, and a generation). The generation is read before this group counts itself, so
// the last group's step past it cannot be missed. Called by every work-item of every group.
static inline void grid_barrier(__global int* sync, int groups) {
  barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
  if (get_local_id(0) == 0 && get_local_id(1) == 0) {
    global_fence();
    const int gen = atomic_add(&sync[1], 0);
    global_fence();
    if (atomic_inc(&sync[0]) == groups - 1) {
      atomic_xchg(&sync[0], 0);
      global_fence();
      atomic_inc(&sync[1]);
    } else {
      for (int k = 0; k < GRID_SPIN_LIMIT && atomic_add(&sync[1], 0) == gen; ++k) {
      }
    }
    global_fence();
  }
  barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
}
#endif  // GROUP_SYNC_GRID
#endif  // GROUP_SYNC_CL
