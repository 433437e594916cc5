"""Child of test_faults_opencl.py: runs the named scenarios against the OpenCL shim (loaded by
the delegate through CLGPU_OPENCL_LIBRARY), one line of JSON per scenario.

    python shim_scenarios.py RUNTIME KIND,KIND,... SCENARIO...

KIND: the shim's counters in its order; the working directory holds model.tflite, input.npy
and the reference outputs expected0.npy, expected1.npy.
"""

import ctypes
import gc
import json
import os
import sys

import numpy as np

import clgpu_delegate
from clgpu_delegate.runtime import make_interpreter

RT, KINDS, names = sys.argv[1], sys.argv[2].split(","), sys.argv[3:]
shim = ctypes.CDLL(os.environ["CLGPU_OPENCL_LIBRARY"])
shim.clgpu_shim_fail.argtypes = [ctypes.c_char_p, ctypes.c_long, ctypes.c_long, ctypes.c_int]
with open("model.tflite", "rb") as f:
    MODEL = f.read()
X = np.load("input.npy")
EXPECTED = [np.load("expected0.npy"), np.load("expected1.npy")]


def arm(name, skip=0, times=1, err=-5):  # -5 CL_OUT_OF_RESOURCES
    shim.clgpu_shim_fail(name.encode(), skip, times, err)


def disarm():
    shim.clgpu_shim_fail(b"", 0, 0, 0)


def outcome(f):
    try:
        f()
        return "ok"
    except Exception as e:
        return "raised " + type(e).__name__ + ": " + str(e)[:400]


def invoke(it):
    it.set_tensor(it.get_input_details()[0]["index"], X)
    it.invoke()
    outs = [it.get_tensor(d["index"]) for d in it.get_output_details()]
    for got, want in zip(outs, EXPECTED, strict=False):
        if not np.allclose(got, want, rtol=1e-4, atol=1e-5):
            raise AssertionError("WRONG OUTPUT")


def interp(**options):
    d = clgpu_delegate.load(**options)
    return d, make_interpreter(MODEL, [d], runtime=RT, reference=True)


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


def at_invoke(name, skip=0, err=-5, delete=False, **options):
    d, it = interp(**options)
    r = {"warm": outcome(lambda: (it.allocate_tensors(), invoke(it)))}
    arm(name, skip=skip, times=1, err=err)
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
    arm("clBuildProgram", times=-1, err=-11)  # CL_BUILD_PROGRAM_FAILURE
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


SCENARIOS = {
    "platforms": lambda: at_load("clGetPlatformIDs", -6),  # CL_OUT_OF_HOST_MEMORY
    "context": lambda: at_load("clCreateContext", -5),
    "queue": lambda: at_load("clCreateCommandQueue", -5),
    "build": build,
    "buffer": lambda: at_allocate("clCreateBuffer", -4, times=-1),
    "sub_buffer": lambda: at_allocate("clCreateSubBuffer", -4),
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
}


def live():
    a = (ctypes.c_long * (2 * len(KINDS)))()
    shim.clgpu_shim_counts(a)
    return {k: a[i] - a[len(KINDS) + i] for i, k in enumerate(KINDS)}


for name in names:
    print("BEGIN", name, flush=True)
    before = live()
    result = SCENARIOS[name]()
    gc.collect()
    # Nothing of the scenario may survive it.
    result["leaked"] = {k: v - before[k] for k, v in live().items() if v != before[k]}
    print("RESULT", name, json.dumps(result), flush=True)
