/* A counting, fault-injecting OpenCL shim: the delegate dlopens it through
   CLGPU_OPENCL_LIBRARY. Functions defined here count objects, may fail on request
   (clgpu_shim_fail), and forward to the real library; every other entry point resolves from
   libOpenCL.so.1 (a DT_NEEDED of this file) through dlsym on our handle.
   Compiled by build_opencl_shim() in tests/faults/helpers.py. */
#define CL_TARGET_OPENCL_VERSION 120
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

enum { CONTEXT, QUEUE, MEM, PROGRAM, KERNEL, EVENT, MAP, KINDS };
static atomic_long created[KINDS], released[KINDS], retained[KINDS];

static void* real(const char* name) {
  static void* lib;
  if (!lib) lib = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_LOCAL);
  void* f = lib ? dlsym(lib, name) : NULL;
  if (!f) abort();
  return f;
}
#define REAL(name) ((__typeof__(&name))real(#name))
#define COUNT(kind, obj) do { if (obj) atomic_fetch_add(&created[kind], 1); } while (0)
#define EVENT_OUT(ev, st) \
  do { if ((st) == CL_SUCCESS && (ev)) atomic_fetch_add(&created[EVENT], 1); } while (0)

/* Fault injection: after `skip` more successful calls of `name`, the next `times` calls
   (-1: all) fail with `err` without reaching the driver. Two names make the driver itself
   fail instead, so its own error (and build log) reaches the delegate:
   "clCreateProgramWithSource:break" appends an #error line to the source (the build fails
   with a real compiler log), "clCreateProgramWithBinary:corrupt" flips bytes of the binary
   (the driver refuses it). */
static char fail_name[64];
static atomic_long fail_skip, fail_times;
static cl_int fail_err;
void clgpu_shim_fail(const char* name, long skip, long times, int err) {
  fail_times = 0;  /* disarmed while the name changes */
  memset(fail_name, 0, sizeof fail_name);
  strncpy(fail_name, name ? name : "", sizeof fail_name - 1);
  fail_err = err;
  fail_skip = skip;
  fail_times = times;
}
/* CLGPU_SHIM_FAIL=NAME[,SKIP[,TIMES[,ERR]]] arms the shim as it loads, for child processes
   that never call clgpu_shim_fail (defaults: 0, -1 (for good), CL_OUT_OF_RESOURCES). */
__attribute__((constructor)) static void arm_from_env(void) {
  const char* env = getenv("CLGPU_SHIM_FAIL");
  if (!env || !*env) return;
  char name[64] = {0};
  strncpy(name, env, sizeof name - 1);
  long v[3] = {0, -1, CL_OUT_OF_RESOURCES};
  char* p = name;
  for (int i = 0; i < 3 && (p = strchr(p, ',')); ++i) {
    *p++ = '\0';
    v[i] = strtol(p, NULL, 10);
  }
  clgpu_shim_fail(name, v[0], v[1], (int)v[2]);
}
static int should_fail(const char* name) {
  if (!fail_name[0] || strcmp(name, fail_name) != 0 || fail_times == 0) return 0;
  if (atomic_fetch_sub(&fail_skip, 1) > 0) return 0;
  if (fail_times > 0) atomic_fetch_sub(&fail_times, 1);
  return 1;
}
#define FAIL_STATUS(name) do { if (should_fail(#name)) return fail_err; } while (0)
#define FAIL_OBJECT(name, e) \
  do { if (should_fail(#name)) { if (e) *(e) = fail_err; return NULL; } } while (0)

/* Of created[], the references taken by clRetain* rather than new objects. */
void clgpu_shim_retains(long* out) {
  for (int i = 0; i < KINDS; ++i) out[i] = retained[i];
}
void clgpu_shim_counts(long* out) {  /* created[0..KINDS), then released[0..KINDS) */
  for (int i = 0; i < KINDS; ++i) { out[i] = created[i]; out[KINDS + i] = released[i]; }
}

#define RETAIN_RELEASE(kind, type, retain, release)                              \
  CL_API_ENTRY cl_int CL_API_CALL retain(type o) {                               \
    cl_int st = REAL(retain)(o);                                                 \
    if (st == CL_SUCCESS) atomic_fetch_add(&created[kind], 1);                   \
    if (st == CL_SUCCESS) atomic_fetch_add(&retained[kind], 1);                  \
    return st;                                                                   \
  }                                                                              \
  CL_API_ENTRY cl_int CL_API_CALL release(type o) {                              \
    cl_int st = REAL(release)(o);                                                \
    if (st == CL_SUCCESS) atomic_fetch_add(&released[kind], 1);                  \
    return st;                                                                   \
  }
RETAIN_RELEASE(CONTEXT, cl_context, clRetainContext, clReleaseContext)
RETAIN_RELEASE(QUEUE, cl_command_queue, clRetainCommandQueue, clReleaseCommandQueue)
RETAIN_RELEASE(MEM, cl_mem, clRetainMemObject, clReleaseMemObject)
RETAIN_RELEASE(PROGRAM, cl_program, clRetainProgram, clReleaseProgram)
RETAIN_RELEASE(KERNEL, cl_kernel, clRetainKernel, clReleaseKernel)
RETAIN_RELEASE(EVENT, cl_event, clRetainEvent, clReleaseEvent)

CL_API_ENTRY cl_context CL_API_CALL clCreateContext(
    const cl_context_properties* p, cl_uint n, const cl_device_id* d,
    void(CL_CALLBACK* cb)(const char*, const void*, size_t, void*), void* u, cl_int* e) {
  FAIL_OBJECT(clCreateContext, e);
  cl_context c = REAL(clCreateContext)(p, n, d, cb, u, e); COUNT(CONTEXT, c); return c;
}
CL_API_ENTRY cl_command_queue CL_API_CALL clCreateCommandQueue(
    cl_context c, cl_device_id d, cl_command_queue_properties p, cl_int* e) {
  FAIL_OBJECT(clCreateCommandQueue, e);
  cl_command_queue q = REAL(clCreateCommandQueue)(c, d, p, e); COUNT(QUEUE, q); return q;
}
CL_API_ENTRY cl_mem CL_API_CALL clCreateBuffer(cl_context c, cl_mem_flags f, size_t s,
                                               void* h, cl_int* e) {
  FAIL_OBJECT(clCreateBuffer, e);
  cl_mem m = REAL(clCreateBuffer)(c, f, s, h, e); COUNT(MEM, m); return m;
}
CL_API_ENTRY cl_mem CL_API_CALL clCreateSubBuffer(cl_mem b, cl_mem_flags f,
                                                  cl_buffer_create_type t, const void* i,
                                                  cl_int* e) {
  FAIL_OBJECT(clCreateSubBuffer, e);
  cl_mem m = REAL(clCreateSubBuffer)(b, f, t, i, e); COUNT(MEM, m); return m;
}
CL_API_ENTRY cl_program CL_API_CALL clCreateProgramWithSource(cl_context c, cl_uint n,
                                                              const char** s, const size_t* l,
                                                              cl_int* e) {
  FAIL_OBJECT(clCreateProgramWithSource, e);
  if (should_fail("clCreateProgramWithSource:break") && n < 64) {
    /* One more string: a real compile error, with the driver's own build log. */
    static const char* broken = "\n#error \"clgpu shim: injected build failure\"\n";
    const char* strings[65];
    size_t lengths[65];
    for (cl_uint i = 0; i < n; ++i) {
      strings[i] = s[i];
      lengths[i] = l ? l[i] : 0;
    }
    strings[n] = broken;
    lengths[n] = 0;
    cl_program p = REAL(clCreateProgramWithSource)(c, n + 1, strings, lengths, e);
    COUNT(PROGRAM, p); return p;
  }
  cl_program p = REAL(clCreateProgramWithSource)(c, n, s, l, e); COUNT(PROGRAM, p); return p;
}
CL_API_ENTRY cl_program CL_API_CALL clCreateProgramWithBinary(
    cl_context c, cl_uint n, const cl_device_id* d, const size_t* l, const unsigned char** b,
    cl_int* st, cl_int* e) {
  FAIL_OBJECT(clCreateProgramWithBinary, e);
  if (should_fail("clCreateProgramWithBinary:corrupt") && n == 1 && l && b && l[0]) {
    /* A binary that passed the delegate's own checks, damaged on its way to the driver. */
    unsigned char* bad = malloc(l[0]);
    if (!bad) abort();
    memcpy(bad, b[0], l[0]);
    for (size_t i = 0; i < l[0]; i += 7) bad[i] ^= 0x5a;
    const unsigned char* bads[1] = {bad};
    cl_program p = REAL(clCreateProgramWithBinary)(c, n, d, l, bads, st, e);
    free(bad);  /* the driver keeps its own copy */
    COUNT(PROGRAM, p); return p;
  }
  cl_program p = REAL(clCreateProgramWithBinary)(c, n, d, l, b, st, e);
  COUNT(PROGRAM, p); return p;
}
CL_API_ENTRY cl_kernel CL_API_CALL clCreateKernel(cl_program p, const char* n, cl_int* e) {
  FAIL_OBJECT(clCreateKernel, e);
  cl_kernel k = REAL(clCreateKernel)(p, n, e); COUNT(KERNEL, k); return k;
}
/* A smaller device (CLGPU_SHIM_LOCAL_MEM=BYTES): the device reports that much local memory, and
   a launch of a kernel that uses more (its own __local arrays and the __local arguments set, as
   CL_KERNEL_LOCAL_MEM_SIZE counts them) fails as a driver of such a GPU fails it. */
static cl_ulong local_limit(void) {
  const char* v = getenv("CLGPU_SHIM_LOCAL_MEM");
  return v && *v ? (cl_ulong)strtoull(v, NULL, 10) : 0;
}
/* And CLGPU_SHIM_MAX_GROUP=N: the device's largest work-group (Mali's is 256 to 1024); a launch
   with a larger local size fails with CL_INVALID_WORK_GROUP_SIZE. */
static size_t group_limit(void) {
  const char* v = getenv("CLGPU_SHIM_MAX_GROUP");
  return v && *v ? (size_t)strtoull(v, NULL, 10) : 0;
}
static int over_group_limit(cl_uint dim, const size_t* l) {
  const size_t limit = group_limit();
  if (!limit || !l) return 0;
  size_t items = 1;
  for (cl_uint i = 0; i < dim; ++i) items *= l[i];
  return items > limit;
}
static int over_local_limit(cl_command_queue q, cl_kernel k) {
  const cl_ulong limit = local_limit();
  if (!limit) return 0;
  cl_device_id d = NULL;
  cl_ulong used = 0;
  if (REAL(clGetCommandQueueInfo)(q, CL_QUEUE_DEVICE, sizeof d, &d, NULL) != CL_SUCCESS ||
      REAL(clGetKernelWorkGroupInfo)(k, d, CL_KERNEL_LOCAL_MEM_SIZE, sizeof used, &used, NULL) !=
          CL_SUCCESS)
    return 0;
  return used > limit;
}
CL_API_ENTRY cl_int CL_API_CALL clEnqueueNDRangeKernel(
    cl_command_queue q, cl_kernel k, cl_uint dim, const size_t* o, const size_t* g,
    const size_t* l, cl_uint n, const cl_event* w, cl_event* ev) {
  FAIL_STATUS(clEnqueueNDRangeKernel);
  if (over_local_limit(q, k)) return CL_OUT_OF_RESOURCES;
  if (over_group_limit(dim, l)) return CL_INVALID_WORK_GROUP_SIZE;
  cl_int st = REAL(clEnqueueNDRangeKernel)(q, k, dim, o, g, l, n, w, ev); EVENT_OUT(ev, st);
  return st;
}
CL_API_ENTRY cl_int CL_API_CALL clEnqueueReadBuffer(
    cl_command_queue q, cl_mem m, cl_bool b, size_t o, size_t s, void* p, cl_uint n,
    const cl_event* w, cl_event* ev) {
  FAIL_STATUS(clEnqueueReadBuffer);
  cl_int st = REAL(clEnqueueReadBuffer)(q, m, b, o, s, p, n, w, ev); EVENT_OUT(ev, st);
  return st;
}
CL_API_ENTRY cl_int CL_API_CALL clEnqueueWriteBuffer(
    cl_command_queue q, cl_mem m, cl_bool b, size_t o, size_t s, const void* p, cl_uint n,
    const cl_event* w, cl_event* ev) {
  FAIL_STATUS(clEnqueueWriteBuffer);
  cl_int st = REAL(clEnqueueWriteBuffer)(q, m, b, o, s, p, n, w, ev); EVENT_OUT(ev, st);
  return st;
}
CL_API_ENTRY cl_int CL_API_CALL clEnqueueCopyBuffer(
    cl_command_queue q, cl_mem a, cl_mem b, size_t ao, size_t bo, size_t s, cl_uint n,
    const cl_event* w, cl_event* ev) {
  FAIL_STATUS(clEnqueueCopyBuffer);
  cl_int st = REAL(clEnqueueCopyBuffer)(q, a, b, ao, bo, s, n, w, ev); EVENT_OUT(ev, st);
  return st;
}
CL_API_ENTRY cl_int CL_API_CALL clEnqueueCopyBufferRect(
    cl_command_queue q, cl_mem a, cl_mem b, const size_t* ao, const size_t* bo, const size_t* r,
    size_t arp, size_t asp, size_t brp, size_t bsp, cl_uint n, const cl_event* w, cl_event* ev) {
  FAIL_STATUS(clEnqueueCopyBufferRect);
  cl_int st = REAL(clEnqueueCopyBufferRect)(q, a, b, ao, bo, r, arp, asp, brp, bsp, n, w, ev);
  EVENT_OUT(ev, st);
  return st;
}
CL_API_ENTRY cl_int CL_API_CALL clEnqueueFillBuffer(
    cl_command_queue q, cl_mem m, const void* p, size_t ps, size_t o, size_t s, cl_uint n,
    const cl_event* w, cl_event* ev) {
  cl_int st = REAL(clEnqueueFillBuffer)(q, m, p, ps, o, s, n, w, ev); EVENT_OUT(ev, st);
  return st;
}
CL_API_ENTRY cl_int CL_API_CALL clEnqueueMarkerWithWaitList(cl_command_queue q, cl_uint n,
                                                            const cl_event* w, cl_event* ev) {
  cl_int st = REAL(clEnqueueMarkerWithWaitList)(q, n, w, ev); EVENT_OUT(ev, st); return st;
}
CL_API_ENTRY void* CL_API_CALL clEnqueueMapBuffer(
    cl_command_queue q, cl_mem m, cl_bool b, cl_map_flags f, size_t o, size_t s, cl_uint n,
    const cl_event* w, cl_event* ev, cl_int* e) {
  FAIL_OBJECT(clEnqueueMapBuffer, e);
  cl_int st = CL_SUCCESS;
  void* p = REAL(clEnqueueMapBuffer)(q, m, b, f, o, s, n, w, ev, &st);
  if (e) *e = st;
  EVENT_OUT(ev, st);
  if (st == CL_SUCCESS) atomic_fetch_add(&created[MAP], 1);
  return p;
}
CL_API_ENTRY cl_int CL_API_CALL clEnqueueUnmapMemObject(
    cl_command_queue q, cl_mem m, void* p, cl_uint n, const cl_event* w, cl_event* ev) {
  FAIL_STATUS(clEnqueueUnmapMemObject);
  cl_int st = REAL(clEnqueueUnmapMemObject)(q, m, p, n, w, ev); EVENT_OUT(ev, st);
  if (st == CL_SUCCESS) atomic_fetch_add(&released[MAP], 1);
  return st;
}
CL_API_ENTRY cl_int CL_API_CALL clBuildProgram(cl_program p, cl_uint n, const cl_device_id* d,
                                               const char* o,
                                               void(CL_CALLBACK* cb)(cl_program, void*),
                                               void* u) {
  FAIL_STATUS(clBuildProgram);
  return REAL(clBuildProgram)(p, n, d, o, cb, u);
}
CL_API_ENTRY cl_int CL_API_CALL clFinish(cl_command_queue q) {
  FAIL_STATUS(clFinish);
  return REAL(clFinish)(q);
}
CL_API_ENTRY cl_int CL_API_CALL clFlush(cl_command_queue q) {
  FAIL_STATUS(clFlush);
  return REAL(clFlush)(q);
}
CL_API_ENTRY cl_int CL_API_CALL clGetPlatformIDs(cl_uint n, cl_platform_id* p, cl_uint* np) {
  FAIL_STATUS(clGetPlatformIDs);
  return REAL(clGetPlatformIDs)(n, p, np);
}
/* A driver's odd answer, for a child that sets CLGPU_SHIM_CLOCK_MHZ=N: the device's highest
   clock reads N (Intel's CPU runtime answers 0). With CLGPU_SHIM_LOCAL_MEM, its local memory. */
CL_API_ENTRY cl_int CL_API_CALL clGetDeviceInfo(cl_device_id d, cl_device_info w, size_t n,
                                                void* v, size_t* r) {
  FAIL_STATUS(clGetDeviceInfo);
  cl_int st = REAL(clGetDeviceInfo)(d, w, n, v, r);
  const char* clock = getenv("CLGPU_SHIM_CLOCK_MHZ");
  if (st == CL_SUCCESS && w == CL_DEVICE_MAX_CLOCK_FREQUENCY && clock && *clock && v &&
      n >= sizeof(cl_uint))
    *(cl_uint*)v = (cl_uint)strtoul(clock, NULL, 10);
  if (st == CL_SUCCESS && w == CL_DEVICE_LOCAL_MEM_SIZE && local_limit() && v &&
      n >= sizeof(cl_ulong))
    *(cl_ulong*)v = local_limit();
  if (st == CL_SUCCESS && w == CL_DEVICE_MAX_WORK_GROUP_SIZE && group_limit() && v &&
      n >= sizeof(size_t))
    *(size_t*)v = group_limit();
  return st;
}
