"""Child of test_faults_models.py: each model NAME.tflite of the working directory through the
strict verifier, stock TFLite and the delegate; one "END NAME REF | GOT" line per model, and a
"BEGIN NAME STAGE" line before each stage so that the parent knows where a crash happened.

    python differential.py RUNTIME MODE NAME...     # MODE: all, ref (no delegate), delegate
"""

import sys

import numpy as np

import clgpu_delegate
from clgpu_delegate.runtime import interpreter_module, make_interpreter

runtime, mode, names = sys.argv[1], sys.argv[2], sys.argv[3:]
strict = interpreter_module("ai_edge_litert")


def attempt(model, delegate):
    try:
        # verify=False: the model as a user's own Interpreter gets it, not make_interpreter's check.
        it = make_interpreter(
            model, [delegate] if delegate else None, runtime=runtime, reference=True, verify=False
        )
        it.allocate_tensors()
        for d in it.get_input_details():
            it.set_tensor(d["index"], np.ones(d["shape"], d["dtype"]))
        it.invoke()
        return "ran", [it.get_tensor(d["index"]).copy() for d in it.get_output_details()]
    except Exception as e:
        return "raised " + type(e).__name__, None


def same(a_out, b_out):
    return all(
        a.shape == b.shape and np.allclose(a, b, rtol=1e-4, atol=1e-4, equal_nan=True)
        for a, b in zip(a_out, b_out, strict=False)
    )


for name in names:
    with open(name + ".tflite", "rb") as f:
        model = f.read()
    print("BEGIN", name, "verify", flush=True)
    try:
        strict.Interpreter(model_content=model)
        valid = True
    except Exception as e:
        valid = "not a valid Flatbuffer" not in str(e)
    if not valid:
        outcome = "invalid |"
        if runtime == "ai_edge_litert" and mode != "ref":
            print("BEGIN", name, "delegate", flush=True)
            outcome += " " + attempt(model, clgpu_delegate.load())[0]
        print("END", name, outcome, flush=True)
        continue
    # The delegate first: stock TFLite's own out-of-bounds writes on a bad model (seen:
    # CONV_2D with stride 2**30 in tflite_runtime 2.14) must not be blamed on the delegate.
    got, got_out, note = "", None, ""
    if mode != "ref":
        print("BEGIN", name, "delegate", flush=True)
        got, got_out = attempt(model, clgpu_delegate.load())
    ref, ref_out = "", None
    if mode != "delegate":
        print("BEGIN", name, "ref", flush=True)
        ref, ref_out = attempt(model, None)
        again, again_out = attempt(model, None)
        if again != ref or (ref_out is not None and not same(ref_out, again_out)):
            note += " UNSTABLE"  # stock TFLite reads undefined memory on this model
    if ref_out is not None and got_out is not None:
        note += " same" if same(ref_out, got_out) else " DIFFERENT"
    print("END", name, ref, "|", got + note, flush=True)
