"""Split-K convolutions (what a GPU runs on small maps with long K) against stock TFLite CPU, in
both launch forms (runtime/launch_forms.h): the split kernel and gemm_splitk_reduce, or the split
kernel whose last split of each tile adds them (one launch), and the partition's measuring of
which to run."""

from __future__ import annotations

from typing import Any

import pytest
from parity import check_parity, compare, random_inputs, run
from test_conv2d import CASES, Conv, conv_model

import clgpu_delegate
from clgpu_delegate.runtime import make_interpreter


# Split-K implicit GEMM (what a GPU runs on small maps with long K): forced on PoCL, where
# the tiles alone fill the device. Splits that do not divide K, more splits than K has tiles.
# Two forms (runtime/launch_forms.h): the split kernel and gemm_splitk_reduce, or the split kernel
# whose last split of each tile adds them (one launch; offered up to CLGPU_SPLITK_LAST_MAX splits,
# here forced with CLGPU_LAUNCH_FORM). 7 splits leave a last batch of its loads part empty.
@pytest.mark.parametrize("reduce_kernel", [False, True], ids=["in_kernel", "reduce_kernel"])
@pytest.mark.parametrize("splits", [2, 3, 7])
@pytest.mark.parametrize(
    "case",
    [
        CASES[k]
        for k in (
            "3x3_c37_oc45_tiles",
            "3x3_s2_nobias_relu6",
            "7x7_s2_stem",
            "3x5_aniso",
            "3x3_batch2_c33_oc64",
            "5x5_valid_c1",
        )
    ],
    ids=["c37_oc45", "s2_relu6", "7x7_s2", "aniso", "batch2_oc64", "c1"],
)
def test_conv2d_implicit_gemm_split_k(
    case: Conv, splits: int, reduce_kernel: bool, runtime: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLGPU_SPLITK_LAST_MAX", "64")
    monkeypatch.setenv("CLGPU_LAUNCH_FORM", "shorter" if reduce_kernel else "fewer")
    r = check_parity(
        conv_model(case),
        runtime,
        expect_delegated="all",
        conv_algorithm="implicit_gemm",
        gemm_splits=splits,
        profiling=True,
    )
    ran = {k.kernel for k in r.delegate.profile().kernels}
    want = {"conv2d_implicit_gemm_splitk", "gemm_splitk_reduce", "conv2d_implicit_gemm_splitk_last"}
    assert (ran & want) == (
        {"conv2d_implicit_gemm_splitk", "gemm_splitk_reduce"}
        if reduce_kernel
        else {"conv2d_implicit_gemm_splitk_last"}
    ), ran


def _split_forms(case: str, splits: int, runtime: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Both split-K forms offered and measured (CLGPU_LAUNCH_FORM unset): the delegate, its
    interpreter and the CPU's."""
    monkeypatch.setenv("CLGPU_SPLITK_LAST_MAX", "64")
    monkeypatch.delenv("CLGPU_LAUNCH_FORM", raising=False)
    model = conv_model(CASES[case])
    d = clgpu_delegate.load(partitioning="all", conv_algorithm="implicit_gemm", gemm_splits=splits)
    it = make_interpreter(model, [d], runtime=runtime, reference=True)
    it.allocate_tensors()
    ref = make_interpreter(model, None, runtime=runtime, reference=True)
    ref.allocate_tensors()
    return d, it, ref


def test_conv2d_split_k_forms_measured_invoke_after_invoke(
    runtime: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Both forms offered: the partition's first invokes alternate them and it keeps one
    # (runtime/launch_forms.h). The last split of a tile to count itself stores it and leaves its
    # counter at zero for the next launch: a counter left behind would store a tile early (a sum
    # of some splits) or never (an earlier invoke's output), and a switch of form must not see the
    # other form's scratch. Each invoke's fresh inputs against the CPU's.
    d, it, ref = _split_forms("3x3_batch2_c33_oc64", 5, runtime, monkeypatch)
    skip, per_form, after = 2, 8, 6  # LaunchFormTrial's kSkip and kPerForm
    for seed in range(skip + 2 * per_form + after):
        inputs = random_inputs(ref.get_input_details(), seed=seed)
        compare(run(it, inputs), run(ref, inputs), 1e-4, 1e-4, f" (invoke {seed})")
    s = d.stats()
    assert s.invokes == skip + 2 * per_form + after
    # The trial's turns, then the kept form in every later invoke.
    assert s.fewer_launch_invokes in (per_form, per_form + after), s.fewer_launch_invokes


def test_split_k_forms_measured_again(runtime: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The kept form is measured again after LaunchFormTrial::kRecheck invokes (the host's launch
    # cost can change within a process): a second trial's turns, then its form.
    d, it, ref = _split_forms("3x3_s2_nobias_relu6", 3, runtime, monkeypatch)
    skip, per_form, recheck, after = 2, 8, 2000, 4
    inputs = random_inputs(ref.get_input_details(), seed=0)
    for d_in, x in zip(it.get_input_details(), inputs, strict=True):
        it.set_tensor(d_in["index"], x)
    for _ in range(skip + 2 * per_form + recheck + 2 * per_form):
        it.invoke()
    compare(run(it, inputs), run(ref, inputs), 1e-4, 1e-4)  # the first of `after`
    for _ in range(after - 1):
        it.invoke()
    n = d.stats().fewer_launch_invokes
    assert n in (2 * per_form + f + a for f in (0, recheck) for a in (0, after)), n


def test_split_k_forms_not_offered_or_misnamed(
    runtime: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = conv_model(CASES["3x3_batch2_c33_oc64"])
    ref = make_interpreter(model, None, runtime=runtime, reference=True)
    ref.allocate_tensors()
    monkeypatch.setenv("CLGPU_SPLITK_LAST_MAX", "0")  # one form: nothing to measure
    d = clgpu_delegate.load(partitioning="all", conv_algorithm="implicit_gemm", gemm_splits=5)
    it = make_interpreter(model, [d], runtime=runtime, reference=True)
    it.allocate_tensors()
    for seed in range(20):
        inputs = random_inputs(ref.get_input_details(), seed=seed)
        compare(run(it, inputs), run(ref, inputs), 1e-4, 1e-4, f" (invoke {seed})")
    assert d.stats().fewer_launch_invokes == 0
    monkeypatch.setenv("CLGPU_SPLITK_LAST_MAX", "64")
    monkeypatch.setenv("CLGPU_LAUNCH_FORM", "fastest")
    d = clgpu_delegate.load(partitioning="all", conv_algorithm="implicit_gemm", gemm_splits=5)
    with pytest.raises((RuntimeError, ValueError), match="CLGPU_LAUNCH_FORM must be"):
        it = make_interpreter(model, [d], runtime=runtime, reference=True)
        it.allocate_tensors()
        it.invoke()
