"""Bad models: truncated and byte-flipped flatbuffers, models with inconsistent shapes, params
and weights, and resizes the delegated ops cannot take. Nothing may crash with the delegate
that does not crash without it, and the delegate may not make a refused model run."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from faults.helpers import MODEL, script

import clgpu_delegate
from clgpu_delegate.modelgen import ModelBuilder
from clgpu_delegate.runtime import make_interpreter

# Each model goes through a child process (a crash there fails a test instead of killing
# pytest) in stages: "verify" (the strict flatbuffer verifier of ai_edge_litert), "ref" (stock
# TFLite without the delegate) and "delegate". tflite_runtime 2.14 reads malformed
# flatbuffers out of bounds (it crashes, or parses different garbage each run) on its own, so
# models the strict verifier refuses only go on to the delegate stage in ai_edge_litert, where
# the interpreter must refuse them too; and a crash in "verify" or "ref" is stock TFLite's own.


def _run_batch(
    names: list[str], runtime: str, run_python: Callable, mode: str = "all"
) -> tuple[dict[str, tuple[str, str]], list[str]]:
    """Runs `names` in one child; after a crash, goes on with the next model. Returns the
    outcomes and the models that crashed the child, with the stage it died in."""
    results: dict[str, tuple[str, str]] = {}
    crashed: list[str] = []
    todo = list(names)
    while todo:
        p = run_python([script("differential.py"), runtime, mode, *todo], timeout=600)
        begun = None
        for line in p.stdout.splitlines():
            parts = line.split(" ", 3)
            if parts[0] == "BEGIN":
                begun = (parts[1], parts[2])
            elif parts[0] == "END":
                ref, got = line.split(" ", 2)[2].split("|")
                results[parts[1]] = (ref.strip(), got.strip())
                begun = None
        if p.returncode == 0:
            break
        if begun is None:
            # Died between models (heap damage from an earlier one surfacing late): the
            # models that finished keep their outcome, the rest run in a new child.
            done = [n for n in todo if n in results]
            assert done, f"exit {p.returncode} before any model\n{p.stdout}\n{p.stderr}"
            todo = todo[todo.index(done[-1]) + 1 :]
            continue
        name, stage = begun
        crashed.append(f"{name}:{stage}")
        results[name] = (f"crashed in {stage}", p.stderr[-3000:])
        todo = todo[todo.index(name) + 1 :]
    return results, crashed


def run_differential(
    models: dict[str, bytes], runtime: str, run_python: Callable, tmp_path: Path
) -> tuple[dict[str, tuple[str, str]], list[str]]:
    """{name: (stock TFLite's outcome, the delegated interpreter's)}, and the models stock
    TFLite crashes on by itself (left out). A crash with the delegate fails the test.

    The models run in one child for speed. A model whose outcomes disagree, or that crashed
    that child, runs again alone (stock TFLite may have corrupted the child's memory on an
    earlier model); a crash with the delegate alone then counts only if stock TFLite alone
    survives the model."""
    from conftest import _importable

    if not _importable("ai_edge_litert"):
        pytest.skip("the strict flatbuffer verifier (ai_edge_litert) is not installed")
    for name, model in models.items():
        (tmp_path / f"{name}.tflite").write_bytes(model)
    results, _ = _run_batch(list(models), runtime, run_python)
    runtime_crashes = []
    for name in [n for n, (ref, got) in results.items() if _anomaly(ref, got)]:
        alone, _ = _run_batch([name], runtime, run_python)
        ref, got = results[name] = alone[name]
        if ref == "crashed in verify" or ref == "crashed in ref":
            runtime_crashes.append(name)
            del results[name]
        elif ref == "crashed in delegate":
            ref_alone, _ = _run_batch([name], runtime, run_python, mode="ref")
            if ref_alone[name][0].startswith("crashed"):
                runtime_crashes.append(name)  # a CPU kernel left in place crashes by itself
                del results[name]
                continue
            raise AssertionError(
                f"model {name!r}: the process dies with the delegate, stock TFLite survives "
                f"it ({ref_alone[name][0]})\n{got}"
            )
    return results, runtime_crashes


def _anomaly(ref: str, got: str) -> bool:
    if ref.startswith("crashed"):
        return True
    if ref == "invalid":
        return got not in ("", "raised ValueError")
    if "UNSTABLE" in got:
        return False
    return "DIFFERENT" in got or (ref.startswith("raised") and not got.startswith("raised"))


# Models on which stock TFLite itself reads undefined memory (so outputs cannot be compared);
# the delegate must still leave them alone and survive.
TFLITE_UNDEFINED = {
    "transpose_repeated_axis": "TRANSPOSE with perm [0, 0, 1] reads past its input in both "
    "runtimes; the delegate refuses the permutation",
}


def _check_outcomes(results: dict[str, tuple[str, str]]) -> None:
    for name, (ref, got) in results.items():
        if "UNSTABLE" in got or name in TFLITE_UNDEFINED:
            print(f"not compared: {name}: {ref} | {got}")
            continue
        if ref == "invalid":
            # ai_edge_litert: the interpreter with the delegate refuses the model too.
            assert got in ("", "raised ValueError"), f"{name}: {ref} | {got}"
            continue
        assert "DIFFERENT" not in got, f"{name}: same model, other output: {ref} | {got}"
        if ref.startswith("raised"):
            # The delegate may not make a model valid that TFLite refuses.
            assert got.startswith("raised"), f"{name}: {ref} | {got}"


def _truncations() -> dict[str, bytes]:
    good = MODEL
    return {
        "empty": b"",
        "four_bytes": good[:4],
        "truncated_header": good[:32],
        "truncated_half": good[: len(good) // 2],
        "truncated_last_16_bytes": good[:-16],
        "garbage": bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8)),
        "wrong_identifier": good[:4] + b"XXXX" + good[8:],
        "zeroed_root_offset": b"\0\0\0\0" + good[4:],
        "root_offset_past_the_end": (len(good) + 64).to_bytes(4, "little") + good[4:],
    }


def test_invalid_flatbuffers_are_refused_without_crashing(
    runtime: str, run_python: Callable, tmp_path: Path
) -> None:
    results, crashes = run_differential(_truncations(), runtime, run_python, tmp_path)
    _check_outcomes(results)
    invalid = {name for name, (ref, _) in results.items() if ref == "invalid"}
    refused = (
        invalid | set(crashes) | {n for n, (ref, _) in results.items() if ref.startswith("raised")}
    )
    assert refused >= {
        "empty",
        "four_bytes",
        "truncated_header",
        "garbage",
        "truncated_half",
        "root_offset_past_the_end",
    }, results


def _inconsistent_models() -> dict[str, bytes]:
    """Models the builder would refuse, made by editing its records before build(): wrong
    declared shapes, invalid params, permutations and weight sizes."""
    import tflite

    def conv(edit: Callable[[ModelBuilder], None]) -> bytes:
        b = ModelBuilder(seed=5)
        x = b.input("x", (1, 7, 7, 3))
        y = b.conv2d(x, b.rand((4, 3, 3, 3)), b.rand((4,)))
        b.output(b.add(y, b.rand((4,))))
        edit(b)
        return b.build()

    def tensor(b: ModelBuilder, name: str) -> Any:
        return next(t for t in b._tensors if t.name == name)

    def first_op(b: ModelBuilder, code: str) -> Any:
        return next(o for o in b._ops if o.code == getattr(tflite.BuiltinOperator, code))

    def fields(code: str, **values: Any) -> Callable[[ModelBuilder], None]:
        return lambda b: first_op(b, code).fields.update(values)

    def shape(name: str, new: tuple[int, ...]) -> Callable[[ModelBuilder], None]:
        def edit(b: ModelBuilder) -> None:
            tensor(b, name).shape = new

        return edit

    def short_buffer(name: str, keep: int) -> Callable[[ModelBuilder], None]:
        def edit(b: ModelBuilder) -> None:
            t = tensor(b, name)
            t.data = t.data.reshape(-1)[:keep].copy()  # the declared shape stays

        return edit

    def transpose(perm: list[int]) -> bytes:
        b = ModelBuilder(seed=6)
        x = b.input("x", (2, 3, 4))
        b.output(b.transpose(x, (2, 1, 0)))
        t = tensor(b, "perm_0")
        t.data, t.shape = np.array(perm, np.int32), (len(perm),)
        return b.build()

    def add(edit: Callable[[ModelBuilder], None]) -> bytes:
        b = ModelBuilder(seed=7)
        x = b.input("x", (2, 3))
        b.output(b.add(x, b.rand((3,))))
        edit(b)
        return b.build()

    def fc(edit: Callable[[ModelBuilder], None]) -> bytes:
        b = ModelBuilder(seed=8)
        x = b.input("x", (2, 6))
        b.output(b.fully_connected(x, b.rand((4, 6)), b.rand((4,))))
        edit(b)
        return b.build()

    def depthwise(edit: Callable[[ModelBuilder], None]) -> bytes:
        b = ModelBuilder(seed=9)
        x = b.input("x", (1, 6, 6, 2))
        b.output(b.depthwise_conv2d(x, b.rand((1, 3, 3, 4)), depth_multiplier=2))
        edit(b)
        return b.build()

    return {
        "conv_stride_zero": conv(fields("CONV_2D", StrideW=0)),
        "conv_dilation_zero": conv(fields("CONV_2D", DilationHFactor=0)),
        "conv_negative_stride": conv(fields("CONV_2D", StrideH=-2)),
        "conv_huge_dilation": conv(fields("CONV_2D", DilationWFactor=1 << 30)),
        "conv_bad_padding_enum": conv(fields("CONV_2D", Padding=7)),
        "conv_bad_activation_enum": conv(fields("CONV_2D", FusedActivationFunction=42)),
        "conv_wrong_output_shape": conv(shape("conv_2d_0", (1, 2, 2, 9))),
        "conv_input_channels_mismatch": conv(shape("x", (1, 7, 7, 5))),
        "conv_input_rank_3": conv(shape("x", (7, 7, 3))),
        "conv_bias_wrong_size": conv(shape("bias_0", (3,))),
        "conv_filter_short_buffer": conv(short_buffer("filters_0", 10)),
        "conv_bias_short_buffer": conv(short_buffer("bias_0", 1)),
        "depthwise_multiplier_mismatch": depthwise(fields("DEPTHWISE_CONV_2D", DepthMultiplier=3)),
        "depthwise_stride_zero": depthwise(fields("DEPTHWISE_CONV_2D", StrideH=0)),
        "depthwise_huge_dilation": depthwise(fields("DEPTHWISE_CONV_2D", DilationHFactor=1 << 30)),
        "conv_huge_stride": conv(fields("CONV_2D", StrideW=1 << 30)),
        "fc_weights_k_mismatch": fc(shape("weights_0", (4, 5))),
        "fc_bias_wrong_size": fc(shape("bias_0", (7,))),
        "fc_weights_short_buffer": fc(short_buffer("weights_0", 3)),
        "add_not_broadcastable": add(shape("x", (2, 4))),
        "add_wrong_rank_declared": add(shape("x", (2, 1, 3))),
        "add_const_short_buffer": add(short_buffer("rhs_0", 1)),
        "transpose_repeated_axis": transpose([0, 0, 1]),
        "transpose_axis_out_of_range": transpose([0, 1, 7]),
        "transpose_negative_axis": transpose([-1, 0, 1]),
        "transpose_short_perm": transpose([1, 0]),
        "transpose_long_perm": transpose([0, 1, 2, 3]),
    }


def test_inconsistent_models_never_crash_with_the_delegate(
    runtime: str, run_python: Callable, tmp_path: Path
) -> None:
    models = _inconsistent_models()
    results, crashes = run_differential(models, runtime, run_python, tmp_path)
    _check_outcomes(results)
    assert len(results) + len(crashes) == len(models)
    print(f"{len(results)} inconsistent models checked; stock TFLite crashes on {crashes}")


def test_huge_strides_and_dilations_are_refused_like_litert(
    run_python: Callable, tmp_path: Path
) -> None:
    """LiteRT refuses strides and dilations above INT16_MAX; the delegated interpreter must
    too. (The delegate used to claim them and return numbers from an overflowed geometry.)"""
    from conftest import _importable

    if not _importable("ai_edge_litert"):
        pytest.skip("ai_edge_litert is not installed")
    names = ("conv_huge_dilation", "depthwise_huge_dilation", "conv_huge_stride")
    models = {name: _inconsistent_models()[name] for name in names}
    results, crashes = run_differential(models, "ai_edge_litert", run_python, tmp_path)
    assert not crashes, crashes
    for name, (ref, got) in results.items():
        assert ref.startswith("raised RuntimeError"), (name, ref, got)
        assert got.startswith("raised RuntimeError"), (name, ref, got)


def test_byte_flipped_models_never_crash_with_the_delegate(
    runtime: str, run_python: Callable, tmp_path: Path
) -> None:
    """Random 1-3 byte corruptions of a valid model (CLGPU_FUZZ_CASES, default 60)."""
    rng = np.random.default_rng(2024)
    models = {}
    for i in range(int(os.environ.get("CLGPU_FUZZ_CASES", "60"))):
        bad = bytearray(MODEL)
        for _ in range(int(rng.integers(1, 4))):
            bad[int(rng.integers(0, len(bad)))] = int(rng.integers(0, 256))
        models[f"flip{i}"] = bytes(bad)
    results, crashes = run_differential(models, runtime, run_python, tmp_path)
    print({k: v for k, v in results.items() if v[0] != "invalid"})
    _check_outcomes(results)
    ran = sum(1 for ref, _ in results.values() if ref == "ran")
    print(f"{len(models)} mutants: {ran} ran, stock TFLite crashed on {len(crashes)} by itself")


@pytest.mark.parametrize(
    ("shape", "words"),
    [
        ((1, 9, 8, 5), ["CONV_2D", "channels"]),  # the filter takes 3 channels
    ],
)
def test_resize_to_a_shape_the_delegated_op_cannot_take(
    shape: tuple[int, ...], words: list[str], runtime: str
) -> None:
    for delegates in (None, [clgpu_delegate.load()]):
        interp = make_interpreter(MODEL, delegates, runtime=runtime, reference=True)
        interp.allocate_tensors()
        interp.resize_tensor_input(interp.get_input_details()[0]["index"], shape)
        with pytest.raises(RuntimeError):
            interp.allocate_tensors()


def test_resize_changes_rank_under_transpose(runtime: str) -> None:
    b = ModelBuilder(seed=8)
    x = b.input("x", (2, 3, 4, 5))
    b.output(b.transpose(b.add(x, b.rand((5,))), (0, 3, 1, 2)))
    model = b.build()
    for delegates in (None, [clgpu_delegate.load()]):
        interp = make_interpreter(model, delegates, runtime=runtime, reference=True)
        interp.allocate_tensors()
        interp.resize_tensor_input(interp.get_input_details()[0]["index"], (2, 3, 5))
        with pytest.raises(RuntimeError):
            interp.allocate_tensors()
