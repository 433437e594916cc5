"""Scenarios of test_faults.py (run by shim_scenarios.py): the driver fails at each stage a user
meets (creating the delegate, building the interpreter, allocate_tensors, invoke), through both
entry points, and then works again."""

import gc

from parity import check_parity
from shim_api import (
    CL_MEM_OBJECT_ALLOCATION_FAILURE,
    CL_OUT_OF_HOST_MEMORY,
    RT,
    arm,
    check,
    disarm,
    interpreter,
    make_delegate,
    ops,
    outcome,
    stderr_into,
)

from faults.helpers import MODEL


def healthy(entry: str = "load") -> str:
    """Recovery: a new interpreter with a new delegate, same process: it claims all but node 2
    (a fused TANH) and gives the reference's output. The scenario's own delegate is still alive:
    the programs it built are not built again (each build of this model costs ~0.4 s on PoCL)."""
    if entry == "load":
        return outcome(lambda: check_parity(MODEL, RT, expect_cpu={2}, seed=3))
    it = interpreter(MODEL, [make_delegate("plugin")])
    r = outcome(lambda: (it.allocate_tensors(), check(it, MODEL, seed=3)))
    return r if r != "ok" or ops(it).count("DELEGATE") == 2 else f"ops {ops(it)}"


def create_plugin():
    # The plugin library lists devices itself (its own copy of the core), so it still asks the
    # driver here although load() has listed them in the scenario before.
    arm("clGetPlatformIDs", times=-1, err=CL_OUT_OF_HOST_MEMORY)
    r = {"first": outcome(lambda: make_delegate("plugin"))}
    disarm()
    d = make_delegate("plugin")
    it = interpreter(MODEL, [d])
    r["then"] = outcome(lambda: (it.allocate_tensors(), check(it, MODEL)))
    r["then_ops"] = ops(it)
    return r


def probe_program():
    """Prepare's only OpenCL work is the probe build (cpu_warmup off): the first program."""
    d = make_delegate()
    text: list[str] = []
    made: list = []
    arm("clCreateProgramWithSource", times=1, err=CL_OUT_OF_HOST_MEMORY)
    with stderr_into(text):
        r = {"construct": outcome(lambda: made.append(interpreter(MODEL, [d])))}
    disarm()
    r.update(stderr=text[0][-3000:], delegated=d.delegated_nodes())
    r["first"] = outcome(lambda: (made[0].allocate_tensors(), check(made[0], MODEL, exact=True)))
    it = interpreter(MODEL, [d])  # the failure is not remembered: this one claims
    r["then_delegated"] = d.delegated_nodes()
    r["then"] = outcome(lambda: (it.allocate_tensors(), check(it, MODEL)))
    return r


def build(entry):
    """Every program fails to compile for real (an #error line added to the source)."""
    d = make_delegate(entry)
    text: list[str] = []
    arm("clCreateProgramWithSource:break", times=-1)
    with stderr_into(text):
        it = interpreter(MODEL, [d])
        it.allocate_tensors()
    r = {"stderr": text[0][-3000:], "ops": ops(it)}
    if entry == "load":
        r["delegated"] = d.delegated_nodes()
        r["reasons"] = {str(x["node"]): x["reason"] for x in d.decisions()}
        r["kernels_created"] = d.stats()["kernels_created"]
    # The same CPU kernels as the reference: bit-identical.
    r["first"] = outcome(lambda: [check(it, MODEL, seed, exact=True) for seed in range(2)])
    if entry == "load":
        r["invokes"] = d.stats()["invokes"]
    disarm()
    r["then"] = healthy(entry)  # the failed build is not remembered
    return r


def alloc(entry):
    d = make_delegate(entry)
    it = interpreter(MODEL, [d])
    arm("clCreateBuffer", times=-1, err=CL_MEM_OBJECT_ALLOCATION_FAILURE)
    r = {"allocate": [outcome(it.allocate_tensors) for _ in range(2)]}
    r["invoke"] = outcome(it.invoke)  # half allocated: no output is ever produced
    disarm()
    it = None  # freed before the recovery check
    gc.collect()
    r["then"] = healthy(entry)
    return r


def at_invoke(entry, name, **options):
    """`name` fails at every invoke: invoke() raises each time, never returns stale outputs."""
    d = make_delegate(entry, **options)
    it = interpreter(MODEL, [d])
    it.allocate_tensors()
    out = it.get_output_details()[0]["index"]
    arm(name, times=-1)
    r = {"invokes": []}
    for seed in range(3):
        r["invokes"].append(outcome(lambda s=seed: check(it, MODEL, s)))
        it.get_tensor(out)  # reading the (undefined) output does not crash
    if entry == "load":
        r["counted"] = d.stats()["invokes"]  # no partition counted as run
    disarm()
    r["same"] = outcome(lambda: check(it, MODEL, 0))  # once the driver recovers
    it = None  # freed before the recovery check
    gc.collect()
    r["then"] = healthy(entry)
    return r


def shared(name, **options):
    """Two interpreters on one delegate fail in turn (the queue lock is let go on the error
    path, or the second would wait forever); another delegate's interpreter in between runs."""
    bad, good = make_delegate(**options), make_delegate(**options)
    its = [interpreter(MODEL, [x]) for x in (bad, good, bad)]
    for it in its:
        it.allocate_tensors()
    r = {"rounds": []}
    for _ in range(2):
        row = []
        for i, it in enumerate(its):
            if i != 1:
                arm(name, times=-1)
            row.append(outcome(lambda it=it: check(it, MODEL, 4)))
            disarm()
        r["rounds"].append(row)
    r["good_invokes"] = good.stats()["invokes"]
    r["recovered"] = [outcome(lambda it=it: check(it, MODEL, 4)) for it in its]
    return r


READ = {"zero_copy": "off"}  # mapped outputs take no clEnqueueReadBuffer
# With no environment alive (programs built in the scenario), and create_plugin before any
# other use of the plugin, whose device listing is its own.
FRESH = {
    "create_plugin": create_plugin,
    "probe_program": probe_program,
    "build_load": lambda: build("load"),
    "build_plugin": lambda: build("plugin"),
}
SCENARIOS = {
    "alloc_load": lambda: alloc("load"),
    "alloc_plugin": lambda: alloc("plugin"),
    "invoke_load": lambda: at_invoke("load", "clEnqueueNDRangeKernel"),
    "invoke_plugin": lambda: at_invoke("plugin", "clEnqueueNDRangeKernel"),
    "read_load": lambda: at_invoke("load", "clEnqueueReadBuffer", **READ),
    "read_plugin": lambda: at_invoke("plugin", "clEnqueueReadBuffer", **READ),
    "shared_invoke": lambda: shared("clEnqueueNDRangeKernel"),
    "shared_read": lambda: shared("clEnqueueReadBuffer", **READ),
}
