"""Child of the shim tests (test_faults_opencl.py, test_faults.py, test_cpu_warmup*.py): runs
scenarios against the OpenCL shim (loaded by the delegate through CLGPU_OPENCL_LIBRARY), one line
of JSON per scenario.

    python shim_scenarios.py RUNTIME [SCENARIO...]     # no scenario: all, in this order

Prints "PLAN name...", then "BEGIN name" and "RESULT name {json}" for each scenario, so the parent
(faults/helpers.py ShimResults) can tell which one a crash happened in and go on after it.
"""

import gc
import json
import sys

import shim_stages
import shim_warmup
from shim_api import (
    CL_BUILD_PROGRAM_FAILURE,
    CL_MEM_OBJECT_ALLOCATION_FAILURE,
    CL_OUT_OF_HOST_MEMORY,
    arm,
    check,
    disarm,
    interpreter,
    live,
    make_delegate,
    outcome,
)

from faults.helpers import two_output_model

MODEL = two_output_model()


def invoke(it):
    check(it, MODEL, seed=9)


def interp(**options):
    d = make_delegate(**options)
    return d, interpreter(MODEL, [d])


def at_load(name, err):
    arm(name, times=-1, err=err)
    first = outcome(lambda: interp())
    disarm()
    d, it = interp()
    return {"first": first, "then": outcome(lambda: (it.allocate_tensors(), invoke(it)))}


def at_allocate(name, err, times=1, **options):
    d, it = interp(**options)
    arm(name, times=times, err=err)
    first = outcome(lambda: (it.allocate_tensors(), invoke(it)))
    disarm()
    r = {"first": first, "then": outcome(lambda: (it.allocate_tensors(), invoke(it)))}
    r["arenas"] = sorted({p["arena"] for p in d.memory()["partitions"]})
    return r


def at_invoke(name, skip=0, delete=False, **options):
    d, it = interp(**options)
    r = {"warm": outcome(lambda: (it.allocate_tensors(), invoke(it)))}
    arm(name, skip=skip, times=1)
    r["first"] = outcome(lambda: invoke(it))
    disarm()
    if delete:  # drop the interpreter right after the failure: nothing may still write to it
        del it
        gc.collect()
        d, it = interp(**options)
        it.allocate_tensors()
    r["then"] = outcome(lambda: invoke(it))
    r["again"] = outcome(lambda: invoke(it))
    return r


def build():
    arm("clBuildProgram", times=-1, err=CL_BUILD_PROGRAM_FAILURE)
    d, it = interp()  # the previous scenarios' environment is gone: programs are built again
    r = {
        "delegated": d.delegated_nodes(),
        "first": outcome(lambda: (it.allocate_tensors(), invoke(it))),
    }
    disarm()
    d2, it2 = interp()
    r["then"] = outcome(lambda: (it2.allocate_tensors(), invoke(it2)))
    r["then_delegated"] = d2.delegated_nodes()
    return r


# First, with no OpenCL environment alive: the device listing (cached once it succeeds), the
# context, the programs built in the scenario.
FRESH = {
    "platforms": lambda: at_load("clGetPlatformIDs", CL_OUT_OF_HOST_MEMORY),
    **shim_stages.FRESH,
    "context": lambda: at_load("clCreateContext", -5),
    "build": build,
    **shim_warmup.FRESH,
}
SCENARIOS = {
    **FRESH,
    "queue": lambda: at_load("clCreateCommandQueue", -5),
    "buffer": lambda: at_allocate("clCreateBuffer", CL_MEM_OBJECT_ALLOCATION_FAILURE, times=-1),
    "sub_buffer": lambda: at_allocate("clCreateSubBuffer", CL_MEM_OBJECT_ALLOCATION_FAILURE),
    "kernel": lambda: at_allocate("clCreateKernel", -5),
    "write": lambda: at_invoke("clEnqueueWriteBuffer", zero_copy="off"),
    "kernel_enqueue": lambda: at_invoke("clEnqueueNDRangeKernel", skip=1),
    "flush": lambda: at_invoke("clFlush"),
    "second_read": lambda: at_invoke("clEnqueueReadBuffer", skip=1, zero_copy="off"),
    "second_read_then_delete": lambda: at_invoke(
        "clEnqueueReadBuffer", skip=1, delete=True, zero_copy="off"
    ),
    "second_output_map": lambda: at_invoke("clEnqueueMapBuffer", skip=2, zero_copy="on"),
    "unmap": lambda: at_invoke("clEnqueueUnmapMemObject", skip=1, zero_copy="on"),
    "finish": lambda: at_invoke("clFinish"),
    # Ops in chunks (tensors larger than the lowered largest allocation): box copies.
    "box_copy": lambda: at_invoke(
        "clEnqueueCopyBuffer", skip=2, zero_copy="off", max_alloc_bytes=256
    ),
    "box_copy_rect": lambda: at_invoke(
        "clEnqueueCopyBufferRect", skip=2, zero_copy="off", max_alloc_bytes=256
    ),
    **shim_stages.SCENARIOS,
    **shim_warmup.SCENARIOS,
}

names = sys.argv[2:] or list(SCENARIOS)
print("PLAN", *names, flush=True)
keeper = None
for name in names:
    if name not in FRESH and keeper is None:
        # The later scenarios share one environment, kept by this delegate: each would build
        # its programs again otherwise (~0.3 s a scenario on PoCL).
        keeper = make_delegate()
    built = keeper.stats()["programs_built"] if keeper else 0
    print("BEGIN", name, flush=True)
    before = live()
    result = SCENARIOS[name]()
    gc.collect()
    now = live()
    # The programs the scenario built stay in the kept environment's cache; nothing else of the
    # scenario may survive it.
    now["programs"] -= keeper.stats()["programs_built"] - built if keeper else 0
    result["leaked"] = {k: v - before[k] for k, v in now.items() if v != before[k]}
    print("RESULT", name, json.dumps(result), flush=True)
