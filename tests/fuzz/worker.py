"""Child process of the mutation fuzzer (tests/fuzz/run.py): reads "MODE PATH" lines on stdin and
runs each model, MODE "all" (the delegated interpreter, then stock TFLite twice), "cpu" (stock
TFLite alone), "delegate" (the delegated interpreter alone), "none" (the delegate loaded with
partitioning="none": stock TFLite's kernels in the delegated run's surroundings), or
"xnnpack" / "cpu_reference_kernels" (one of the second references alone). Before each
stage it prints "BEGIN STAGE", so that the parent knows where a crash happened; after a model,
"RESULT {json}".

    python worker.py RUNTIME

Inputs are seeded N(0, 1) values (CLGPU_FUZZ_FILL=ones: ones); CLGPU_FUZZ_PRESERVE=1 gives
every tensor memory of its own (no arena reuse); CLGPU_FUZZ_PLAIN=1 leaves out
the OpenCL warm-up and the memory cap (stock TFLite alone in a bare process). Memory is capped
(RLIMIT_AS, 8 GiB; not under AddressSanitizer, whose shadow needs more address space and which gets
max_allocation_size_mb from the parent instead): a mutated shape may ask for any size, and the
machine is shared.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import sys
from typing import Any

import numpy as np

MAX_INPUT_ELEMENTS = 1 << 24  # larger inputs are not filled (allocate_tensors still runs)


def _limit_memory() -> None:
    if "libasan" in os.environ.get("LD_PRELOAD", "") or os.environ.get("CLGPU_FUZZ_NO_RLIMIT"):
        return
    cap = 8 << 30
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def _attempt(
    runtime: str,
    model: bytes,
    delegated: bool,
    ref_kernels: bool = False,
    xnnpack: bool = False,
    **options: str,
) -> tuple[str, list[np.ndarray], int]:
    """(outcome, outputs, delegated node count). ref_kernels: stock TFLite's reference kernels
    (BUILTIN_REF) instead of its optimized builtin ones; xnnpack: the runtime's default CPU path
    (its XNNPACK delegate)."""
    import clgpu_delegate
    from clgpu_delegate.runtime import interpreter_module, make_interpreter

    claimed = 0
    # A copy per interpreter: TFLite's kernels write into a model's bytes where a tensor they
    # write also holds data in the model, and the next interpreter would read those values.
    model = bytes(bytearray(model))
    try:
        delegate = clgpu_delegate.load(**options) if delegated else None
        if ref_kernels:
            mod = interpreter_module(runtime)
            it = mod.Interpreter(
                model_content=model,
                experimental_op_resolver_type=mod.OpResolverType.BUILTIN_REF,
            )
        else:
            it = make_interpreter(
                model,
                [delegate] if delegate else None,
                runtime=runtime,
                reference=not xnnpack,
                preserve_all_tensors=bool(os.environ.get("CLGPU_FUZZ_PRESERVE")),
            )
        if delegate is not None:
            claimed = sum(d["delegated"] for d in delegate.decisions())
        it.allocate_tensors()
        details = it.get_input_details()
        if any(np.prod(d["shape"], dtype=np.int64) > MAX_INPUT_ELEMENTS for d in details):
            return "allocated (inputs too large to fill)", [], claimed
        rng = np.random.default_rng(7)
        ones = os.environ.get("CLGPU_FUZZ_FILL") == "ones"
        for d in details:
            shape = tuple(int(s) for s in d["shape"])
            if ones:
                x = np.ones(shape, d["dtype"])
            elif np.dtype(d["dtype"]).kind == "f":
                x = rng.standard_normal(shape).astype(d["dtype"])
            else:
                x = rng.integers(-3, 4, size=shape).astype(d["dtype"])
            it.set_tensor(d["index"], x)
        it.invoke()
        outs = [np.array(it.get_tensor(d["index"])) for d in it.get_output_details()]
        return "ran", outs, claimed
    except Exception as e:  # noqa: BLE001 - every refusal is an outcome to compare
        return f"raised {type(e).__name__}: {str(e)[:300]}", [], claimed


def compare(got: list[np.ndarray], ref: list[np.ndarray]) -> str:
    """ "same", or what differs. Values past 1e30 or not finite are "extreme" on both sides
    alike (sums and products of mutated weights overflow in an order-dependent way); NaN must
    meet NaN."""
    if len(got) != len(ref):
        return f"DIFFERENT: {len(got)} outputs vs {len(ref)}"
    for i, (g, r) in enumerate(zip(got, ref, strict=True)):
        if g.shape != r.shape or g.dtype != r.dtype:
            return f"DIFFERENT: output {i} {g.dtype}{g.shape} vs {r.dtype}{r.shape}"
        if g.dtype.kind != "f":
            if not np.array_equal(g, r):
                return f"DIFFERENT: output {i} (integers)"
            continue
        g64, r64 = g.astype(np.float64), r.astype(np.float64)
        with np.errstate(all="ignore"):
            ext_g = ~np.isfinite(g64) | (np.abs(g64) >= 1e30)
            ext_r = ~np.isfinite(r64) | (np.abs(r64) >= 1e30)
            bad = (ext_g != ext_r) | (np.isnan(g64) != np.isnan(r64))
            quiet = ~ext_g & ~ext_r
            peak = float(np.abs(r64[quiet]).max()) if quiet.any() else 1.0
            bad |= quiet & (np.abs(g64 - r64) > 1e-3 * np.abs(r64) + 1e-3 * max(peak, 1.0))
        if bad.any():
            k = int(np.flatnonzero(bad.ravel())[0])
            return (
                f"DIFFERENT: output {i}: {int(bad.sum())} of {bad.size} elements, first "
                f"[{k}] delegate {g.ravel()[k]!r} cpu {r.ravel()[k]!r}"
            )
    return "same"


def _strict_verifier() -> Any:
    from clgpu_delegate.runtime import interpreter_module

    try:
        return interpreter_module("ai_edge_litert")
    except ImportError:
        return None


def run_one(runtime: str, mode: str, model: bytes, strict: Any) -> dict[str, Any]:
    result: dict[str, Any] = {}
    print("BEGIN verify", flush=True)
    valid = True
    if strict is not None:
        try:
            strict.Interpreter(model_content=model)
        except Exception as e:  # noqa: BLE001
            valid = "not a valid Flatbuffer" not in str(e)
    result["valid"] = valid
    if not valid and runtime == "tflite_runtime":
        return result  # tflite_runtime 2.14 reads unverified flatbuffers out of bounds alone
    if mode in ("all", "delegate"):
        print("BEGIN delegate", flush=True)
        result["delegate"], got, result["claimed"] = _attempt(runtime, model, True)
    if mode in ("xnnpack", "cpu_reference_kernels"):  # a second reference alone (attribution)
        print(f"BEGIN {mode}", flush=True)
        kw = {"ref_kernels": True} if mode == "cpu_reference_kernels" else {"xnnpack": True}
        result[mode], _, _ = _attempt(runtime, model, False, **kw)
    if mode == "none":  # the delegate loaded, every node on the CPU (crash attribution)
        print("BEGIN none", flush=True)
        result["none"], _, _ = _attempt(runtime, model, True, partitioning="none")
    if mode in ("all", "cpu"):
        print("BEGIN cpu", flush=True)
        result["cpu"], ref, _ = _attempt(runtime, model, False)
        print("BEGIN cpu_again", flush=True)
        again, ref2, _ = _attempt(runtime, model, False)
        result["cpu_stable"] = again == result["cpu"] and compare(ref2, ref) == "same"
        if result["cpu"] == "ran":
            digest = hashlib.sha1()
            for r in ref:
                digest.update(r.tobytes())
            result["cpu_digest"] = digest.hexdigest()
    if mode == "all" and result["cpu"] == "ran" and result["delegate"] == "ran":
        result["compare"] = compare(got, ref)
        # Stock TFLite's own CPU paths disagree where sums overflow near FLT_MAX (whether an
        # accumulator meets +Inf and -Inf, giving NaN, depends on its order): its reference
        # kernels and its default XNNPACK path are second references then, and matching one of
        # them is no mismatch. Not where nothing was delegated: the CPU differs from itself there
        # (run.py counts it unstable), and XNNPACK crashes on some such graphs by itself.
        for stage, kw in (("cpu_reference_kernels", {"ref_kernels": True}), ("xnnpack", {})):
            if result["compare"] == "same" or not result.get("claimed"):
                break
            print(f"BEGIN {stage}", flush=True)
            status, ref3, _ = _attempt(runtime, model, False, xnnpack=not kw, **kw)
            if status == "ran" and compare(ref3, ref) != "same" and compare(got, ref3) == "same":
                result["compare"] = "same"
                result["cpu_kernels_disagree"] = stage
    return result


def main() -> None:
    runtime = sys.argv[1]
    if not os.environ.get("CLGPU_FUZZ_PLAIN"):  # plain: stock TFLite in a bare process
        _limit_memory()
        import clgpu_delegate

        # Keeps the OpenCL context (and its built programs) for the process: each mutant's
        # delegate would otherwise create and drop it.
        clgpu_delegate.warm_up()
    strict = _strict_verifier()
    for line in sys.stdin:
        mode, path = line.rstrip("\n").split(" ", 1)
        with open(path, "rb") as f:
            model = f.read()
        print("RESULT " + json.dumps(run_one(runtime, mode, model, strict)), flush=True)


if __name__ == "__main__":
    main()
