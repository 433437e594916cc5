/* Can an invoke's launches be enqueued ahead of it, or by two host threads at once, for less
 * host time on the critical path than enqueueing them in the invoke? No delegate, no model:
 * batches of small kernels (25 distinct functions of 8 buffers each, 4096 items in groups of
 * 64), each batch opened by a 4 KiB blocking write and closed by a 4-byte read, as an invoke.
 *
 *   plain   the batch enqueued in the loop (what the delegate does now)
 *   gated   the batch enqueued behind a user event first; timed: the enqueue, then from
 *           setting the event to the batch's end
 *   gated+idle   the same, 2 ms of idle host before the event is set
 *   2 threads, 2 queues / 1 queue   two plain batches enqueued at once by two threads
 *   ahead K     a loop of invokes whose batches K host threads enqueue ahead, each behind its
 *               own user event that the invoke sets after its input write; per-invoke time
 *
 * Built and run by bench/gate_probe.py; prints one JSON object per line. */
#define _POSIX_C_SOURCE 200809L
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FUNCS 25
#define ARGS 8
#define ITEMS 4096
#define GROUP 64

static cl_context ctx;
static cl_device_id dev;
static cl_program prog;

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void check(cl_int e, const char *what) {
  if (e != CL_SUCCESS) {
    fprintf(stderr, "error: %s returned %d\n", what, e);
    exit(1);
  }
}

/* One host thread's launches: its own queue, kernel objects and buffers. */
typedef struct {
  cl_command_queue q;
  cl_kernel k[FUNCS];
  cl_mem in, out;
  float host[ITEMS];
} Lane;

static void lane_init(Lane *l) {
  cl_int e;
  l->q = clCreateCommandQueue(ctx, dev, 0, &e);
  check(e, "clCreateCommandQueue");
  l->in = clCreateBuffer(ctx, CL_MEM_READ_WRITE, ITEMS * 4, NULL, &e);
  l->out = clCreateBuffer(ctx, CL_MEM_READ_WRITE, ITEMS * 4, NULL, &e);
  check(e, "clCreateBuffer");
  for (int f = 0; f < FUNCS; ++f) {
    char name[16];
    snprintf(name, sizeof name, "k%d", f);
    l->k[f] = clCreateKernel(prog, name, &e);
    check(e, "clCreateKernel");
    for (int a = 0; a < ARGS; ++a) {
      cl_mem b = a == 0 ? l->out : a == 1 ? l->in : clCreateBuffer(ctx, CL_MEM_READ_WRITE, ITEMS * 4, NULL, &e);
      check(e, "clCreateBuffer");
      check(clSetKernelArg(l->k[f], a, sizeof b, &b), "clSetKernelArg");
    }
  }
  memset(l->host, 0, sizeof l->host);
}

/* n launches on l's queue; the first waits on `gate` when given. Flushes as the delegate does. */
static void launches(Lane *l, int n, cl_event gate, cl_command_queue q) {
  size_t g = ITEMS, loc = GROUP;
  for (int i = 0; i < n; ++i) {
    check(clEnqueueNDRangeKernel(q, l->k[i % FUNCS], 1, NULL, &g, &loc, (i == 0 && gate) ? 1 : 0,
                                 (i == 0 && gate) ? &gate : NULL, NULL),
          "clEnqueueNDRangeKernel");
    if (i == 1 || i % 16 == 15) clFlush(q);
  }
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static double median(double *v, int n) {
  qsort(v, n, sizeof *v, cmp);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void emit(const char *kase, int n, const char *what, double us) {
  printf("{\"case\": \"%s\", \"launches\": %d, \"what\": \"%s\", \"us\": %.2f, \"us_per_launch\": %.3f}\n",
         kase, n, what, us, us / n);
  fflush(stdout);
}

/* One invoke as the delegate runs it: blocking input write, the launches, blocking read. */
static void invoke_plain(Lane *l, int n) {
  check(clEnqueueWriteBuffer(l->q, l->in, CL_TRUE, 0, ITEMS * 4, l->host, 0, NULL, NULL), "write");
  launches(l, n, NULL, l->q);
  float r;
  check(clEnqueueReadBuffer(l->q, l->out, CL_TRUE, 0, 4, &r, 0, NULL, NULL), "read");
}

static void case_plain(Lane *l, int n, int reps) {
  double *t = calloc(reps, sizeof *t);
  for (int w = 0; w < 3; ++w) invoke_plain(l, n);
  for (int r = 0; r < reps; ++r) {
    double t0 = now_us();
    invoke_plain(l, n);
    t[r] = now_us() - t0;
  }
  emit("plain", n, "invoke", median(t, reps));
  free(t);
}

static void case_gated(Lane *l, int n, int reps, int idle_us) {
  double *te = calloc(reps, sizeof *te), *tr = calloc(reps, sizeof *tr);
  cl_int e;
  for (int r = -3; r < reps; ++r) {
    cl_event u = clCreateUserEvent(ctx, &e);
    check(e, "clCreateUserEvent");
    double t0 = now_us();
    launches(l, n, u, l->q);
    float out;
    cl_event done;
    check(clEnqueueReadBuffer(l->q, l->out, CL_FALSE, 0, 4, &out, 0, NULL, &done), "read");
    clFlush(l->q);
    double t1 = now_us();
    if (idle_us) {
      double until = t1 + idle_us;
      while (now_us() < until) {
      }
    }
    double t2 = now_us();
    check(clSetUserEventStatus(u, CL_COMPLETE), "clSetUserEventStatus");
    check(clWaitForEvents(1, &done), "clWaitForEvents");
    double t3 = now_us();
    clReleaseEvent(done);
    clReleaseEvent(u);
    if (r >= 0) {
      te[r] = t1 - t0;
      tr[r] = t3 - t2;
    }
  }
  const char *name = idle_us ? "gated+idle" : "gated";
  emit(name, n, "enqueue behind the event", median(te, reps));
  emit(name, n, "event set to batch end", median(tr, reps));
  free(te);
  free(tr);
}

typedef struct {
  Lane *l;
  cl_command_queue q;
  int n;
  atomic_int *go;
  double us;
} Job;

static void *job_run(void *p) {
  Job *j = p;
  while (!atomic_load(j->go)) {
  }
  double t0 = now_us();
  launches(j->l, j->n, NULL, j->q);
  clFinish(j->q);
  j->us = now_us() - t0;
  return NULL;
}

static void case_two(Lane *a, Lane *b, int n, int reps, int one_queue) {
  double *t = calloc(reps, sizeof *t);
  for (int r = -2; r < reps; ++r) {
    atomic_int go = 0;
    Job ja = {a, a->q, n, &go, 0}, jb = {b, one_queue ? a->q : b->q, n, &go, 0};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, job_run, &ja);
    pthread_create(&tb, NULL, job_run, &jb);
    double t0 = now_us();
    atomic_store(&go, 1);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    if (r >= 0) t[r] = now_us() - t0;
  }
  emit(one_queue ? "2 threads, 1 queue" : "2 threads, 2 queues", 2 * n, "both batches", median(t, reps));
  free(t);
}

/* The pipeline: invoke i's batch is enqueued ahead by thread i % K on its lane's queue, behind
 * user event gate[i]; the invoke writes its input (blocking, on its own queue), sets the gate
 * and waits for the batch's closing read. A thread enqueues batch i + K once invoke i has set
 * gate i (at most one batch waiting per thread). */
#define MAXK 4
typedef struct {
  Lane *lanes;
  int k, n, invokes;
  cl_event *gate, *done;
  atomic_int *ready; /* batch i enqueued */
  atomic_int released; /* highest gate set + 1 */
  float sink[MAXK];
} Pipe;

typedef struct {
  Pipe *p;
  int t;
} PipeArg;

static void *pipe_thread(void *arg) {
  PipeArg *a = arg;
  Pipe *p = a->p;
  Lane *l = &p->lanes[a->t];
  for (int i = a->t; i < p->invokes; i += p->k) {
    while (atomic_load(&p->released) < i - p->k + 1) {
    }
    launches(l, p->n, p->gate[i], l->q);
    check(clEnqueueReadBuffer(l->q, l->out, CL_FALSE, 0, 4, &p->sink[a->t], 0, NULL, &p->done[i]), "read");
    clFlush(l->q);
    atomic_store(&p->ready[i], 1);
  }
  return NULL;
}

static void case_ahead(Lane *lanes, cl_command_queue wq, int k, int n, int invokes) {
  Pipe p = {lanes, k, n, invokes, calloc(invokes, sizeof(cl_event)), calloc(invokes, sizeof(cl_event)),
            calloc(invokes, sizeof(atomic_int)), 0, {0}};
  cl_int e;
  for (int i = 0; i < invokes; ++i) {
    p.gate[i] = clCreateUserEvent(ctx, &e);
    check(e, "clCreateUserEvent");
  }
  pthread_t th[MAXK];
  PipeArg args[MAXK];
  for (int t = 0; t < k; ++t) {
    args[t] = (PipeArg){&p, t};
    pthread_create(&th[t], NULL, pipe_thread, &args[t]);
  }
  double *t = calloc(invokes, sizeof *t), *wait_ready = calloc(invokes, sizeof *t);
  for (int i = 0; i < invokes; ++i) {
    double t0 = now_us();
    check(clEnqueueWriteBuffer(wq, lanes[i % k].in, CL_TRUE, 0, ITEMS * 4, lanes[i % k].host, 0, NULL, NULL), "write");
    double t1 = now_us();
    while (!atomic_load(&p.ready[i])) {
    }
    wait_ready[i] = now_us() - t1;
    check(clSetUserEventStatus(p.gate[i], CL_COMPLETE), "clSetUserEventStatus");
    atomic_store(&p.released, i + 1);
    check(clWaitForEvents(1, &p.done[i]), "clWaitForEvents");
    t[i] = now_us() - t0;
  }
  for (int x = 0; x < k; ++x) pthread_join(th[x], NULL);
  char name[32];
  snprintf(name, sizeof name, "ahead %d", k);
  int skip = invokes / 5;
  emit(name, n, "invoke", median(t + skip, invokes - skip));
  emit(name, n, "invoke waiting for its batch", median(wait_ready + skip, invokes - skip));
  for (int i = 0; i < invokes; ++i) {
    clReleaseEvent(p.gate[i]);
    clReleaseEvent(p.done[i]);
  }
  free(p.gate);
  free(p.done);
  free((void *)p.ready);
  free(t);
  free(wait_ready);
}

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 50;
  cl_platform_id plats[16];
  cl_uint np = 0;
  check(clGetPlatformIDs(16, plats, &np), "clGetPlatformIDs");
  int found = 0;
  for (cl_uint i = 0; i < np && !found; ++i)
    found = clGetDeviceIDs(plats[i], CL_DEVICE_TYPE_GPU, 1, &dev, NULL) == CL_SUCCESS;
  for (cl_uint i = 0; i < np && !found; ++i)
    found = clGetDeviceIDs(plats[i], CL_DEVICE_TYPE_ALL, 1, &dev, NULL) == CL_SUCCESS;
  if (!found) {
    fprintf(stderr, "error: no OpenCL device\n");
    return 1;
  }
  char name[256], driver[64];
  clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof name, name, NULL);
  clGetDeviceInfo(dev, CL_DRIVER_VERSION, sizeof driver, driver, NULL);
  printf("{\"device\": \"%s\", \"driver\": \"%s\"}\n", name, driver);
  cl_int e;
  ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &e);
  check(e, "clCreateContext");
  static char src[FUNCS * 400];
  char *s = src;
  for (int f = 0; f < FUNCS; ++f)
    s += sprintf(s,
                 "__kernel void k%d(__global float* a0, __global const float* a1, __global const float* a2,"
                 " __global const float* a3, __global const float* a4, __global const float* a5,"
                 " __global const float* a6, __global const float* a7) { int g = get_global_id(0);"
                 " a0[g] = a1[g] + a2[g] + a3[g] + a4[g] + a5[g] + a6[g] + a7[g] + %d; }\n",
                 f, f);
  const char *sp = src;
  prog = clCreateProgramWithSource(ctx, 1, &sp, NULL, &e);
  check(e, "clCreateProgramWithSource");
  check(clBuildProgram(prog, 1, &dev, "", NULL, NULL), "clBuildProgram");
  static Lane lanes[MAXK];
  for (int i = 0; i < MAXK; ++i) lane_init(&lanes[i]);
  cl_command_queue wq = clCreateCommandQueue(ctx, dev, 0, &e);
  check(e, "clCreateCommandQueue");
  int sizes[] = {25, 100, 300};
  for (int si = 0; si < 3; ++si) {
    int n = sizes[si];
    for (int round = 0; round < 2; ++round) {
      case_plain(&lanes[0], n, reps);
      case_gated(&lanes[0], n, reps, 0);
      case_gated(&lanes[0], n, reps, 2000);
      case_two(&lanes[0], &lanes[1], n, reps, 0);
      case_two(&lanes[0], &lanes[1], n, reps, 1);
      for (int k = 1; k <= 3; ++k) case_ahead(lanes, wq, k, n, reps * 2);
    }
  }
  return 0;
}
