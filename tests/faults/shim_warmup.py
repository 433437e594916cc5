"""Scenarios of test_cpu_warmup*.py (run by shim_scenarios.py): the device setup that cpu_warmup
runs on its own thread fails in the driver; the partitions stay on TFLite's CPU kernels."""

import os

from shim_api import (
    CL_MEM_OBJECT_ALLOCATION_FAILURE,
    arm,
    check,
    disarm,
    interpreter,
    make_delegate,
    outcome,
    stderr_into,
)
from test_cpu_warmup import HOLD, one_partition, two_partitions
from test_cpu_warmup_default import slow_on_the_cpu


def warm(model):
    d = make_delegate(partitioning="all", cpu_warmup=True)
    return d, interpreter(model, [d], num_threads=1)


def stats(d):
    s = d.stats()
    return {
        "cpu_invokes": s.cpu_invokes,
        "invokes": s.invokes,
        "warming": s.warming,
        "warmups": s.warmups,
    }


def failed_setup(model, name, err=-5):
    """`name` fails for good while the setups run; the driver recovers before the invokes, which
    stay on the CPU all the same."""
    d, it = warm(model)
    text: list[str] = []
    with stderr_into(text):
        arm(name, times=-1, err=err)
        it.allocate_tensors()
        ready = d.wait_ready(timeout=120)
        disarm()
        first = outcome(lambda: [check(it, model, exact=True, threads=1) for _ in range(3)])
    return {"ready": ready, "first": first, "stats": stats(d), "stderr": text[0][-3000:]}


def failing_mid_invoke():
    """The setup, held 100 ms, fails at its first allocation while the first invoke runs on the
    CPU (the programs are built already: another delegate keeps them)."""
    model = slow_on_the_cpu()
    keep = make_delegate(partitioning="all", cpu_warmup=False)
    interpreter(model, [keep], num_threads=1).allocate_tensors()
    os.environ[HOLD] = "100"
    text: list[str] = []
    try:
        d, it = warm(model)
        with stderr_into(text):
            arm("clCreateBuffer", times=-1, err=CL_MEM_OBJECT_ALLOCATION_FAILURE)
            it.allocate_tensors()
            first = outcome(lambda: check(it, model, exact=True, threads=1))
            d.wait_ready(timeout=120)
            disarm()
    finally:
        disarm()
        del os.environ[HOLD]
    return {"first": first, "stats": stats(d), "stderr": text[0][-3000:]}


# With no environment alive: the programs are built on the setup threads.
FRESH = {"warmup_build": lambda: failed_setup(two_partitions(), "clCreateProgramWithSource:break")}
SCENARIOS = {
    "warmup_alloc": lambda: failed_setup(
        one_partition(), "clCreateBuffer", CL_MEM_OBJECT_ALLOCATION_FAILURE
    ),
    "warmup_mid_invoke": failing_mid_invoke,
}
