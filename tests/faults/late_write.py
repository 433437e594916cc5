"""Child of test_faults_opencl.py: after each of N invokes whose second read-back fails (the
OpenCL shim), is the first output still written by the device once invoke() has raised?

    python late_write.py RUNTIME N       # prints "LATE <how many invokes wrote late>"
"""

import ctypes
import os
import sys
import time

import numpy as np

import clgpu_delegate
from clgpu_delegate.modelgen import ModelBuilder
from clgpu_delegate.runtime import make_interpreter

shim = ctypes.CDLL(os.environ["CLGPU_OPENCL_LIBRARY"])
shim.clgpu_shim_fail.argtypes = [ctypes.c_char_p, ctypes.c_long, ctypes.c_long, ctypes.c_int]
b = ModelBuilder(seed=0)
x = b.input("x", (1, 512, 512, 16))
y = b.add(x, b.rand((16,)))
b.output(y)  # output 0: 16 MB, read back without blocking
b.output(b.add(y, b.rand((16,))))  # output 1: its clEnqueueReadBuffer fails
d = clgpu_delegate.load(zero_copy="off", partitioning="all")
it = make_interpreter(b.build(), [d], runtime=sys.argv[1], reference=True)
it.allocate_tensors()
it.set_tensor(it.get_input_details()[0]["index"], np.ones((1, 512, 512, 16), np.float32))
it.invoke()
out0 = it.tensor(it.get_output_details()[0]["index"])
late = 0
for _ in range(int(sys.argv[2])):
    shim.clgpu_shim_fail(b"clEnqueueReadBuffer", 1, 1, -5)
    try:
        it.invoke()
        raise SystemExit("invoke did not raise")
    except RuntimeError:
        pass
    out0()[...] = -7.0  # invoke() has returned: the tensors are the caller's again
    time.sleep(0.02)
    late += not (out0() == -7.0).all()
# A good invoke drains the queue before the interpreter goes at exit: the late writes are
# counted above; this test is not meant to free memory under them (ASan would report it).
it.invoke()
print("LATE", late)
