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
from clgpu_delegate._native import core
from clgpu_delegate.runtime import make_interpreter

PAIRS = 12  # LaunchFormTrial::kPairs (its kSkip is 2)


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
    # Both forms offered: the partition's first invokes run them in pairs and it keeps one
    # (runtime/launch_forms.h). The last split of a tile to count itself stores it and leaves its
    # counter at zero for the next launch: a counter left behind would store a tile early (a sum
    # of some splits) or never (an earlier invoke's output), and a switch of form must not see the
    # other form's scratch. Each invoke's fresh inputs against the CPU's.
    d, it, ref = _split_forms("3x3_batch2_c33_oc64", 5, runtime, monkeypatch)
    skip, per_form, after = 2, PAIRS, 6
    for seed in range(skip + 2 * per_form + after):
        inputs = random_inputs(ref.get_input_details(), seed=seed)
        compare(run(it, inputs), run(ref, inputs), 1e-4, 1e-4, f" (invoke {seed})")
    s = d.stats()
    assert s.invokes == skip + 2 * per_form + after
    # The trial's pairs, then the kept form in every later invoke.
    assert s.fewer_launch_invokes in (per_form, per_form + after), s.fewer_launch_invokes


def test_split_k_forms_measured_again(runtime: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The kept form is measured again after LaunchFormTrial::kRecheck invokes (the host's launch
    # cost can change within a process): a second trial's pairs, then its form.
    d, it, ref = _split_forms("3x3_s2_nobias_relu6", 3, runtime, monkeypatch)
    skip, per_form, recheck, after = 2, PAIRS, 2000, 4
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


def _slow_turns(fewer_us: int, slow: int, offset: int, n: int = 80) -> list[list[int]]:
    """Per invoke, its time in each form (ns; the shorter form 100 us): after 3 warm-up invokes,
    the first `slow` of every 6 are slower by 200 us (what ran before them: another model's
    turn, the CPU's threads), starting `offset` invokes in."""
    extra = [200_000 if i >= 3 and (i - 3 - offset) % 6 < slow else 0 for i in range(n)]
    return [[fewer_us * 1000 + e for e in extra], [100_000 + e for e in extra]]


@pytest.mark.parametrize("slow", [0, 1, 2, 3])
@pytest.mark.parametrize("fewer_us, kept", [(80, "F"), (120, "S"), (99, "S")])
def test_launch_form_trial_keeps_the_faster_through_slow_turns(
    fewer_us: int, kept: str, slow: int
) -> None:
    # Invokes in turns of 6 with 0-3 slow ones at each turn's start, at every offset: the trial
    # keeps the form 1.25x faster either way, and a tie (1 %, under its 2 %) keeps the shorter
    # form. A fixed alternation of the forms kept the slower at half these offsets with 3 slow
    # invokes: all of one form's invokes of a turn but one were slow ones.
    for offset in range(6):
        forms = core().launch_form_trial(*_slow_turns(fewer_us, slow, offset))
        trial = forms[2 : 2 + 2 * PAIRS]
        assert forms[:2] == "SS" and forms[2 + 2 * PAIRS :] == kept * (80 - 2 - 2 * PAIRS), forms
        # One invoke of each form in every pair, in either order.
        assert all(sorted(trial[i : i + 2]) == ["F", "S"] for i in range(0, len(trial), 2)), trial
        assert "FS" in trial and "SF" in trial


def test_launch_form_trial_measures_again() -> None:
    # After LaunchFormTrial::kRecheck invokes in the kept form, pairs again: the host's cost per
    # launch moved (the fewer launches now slower), and the other form is kept from then on.
    recheck, first = 2000, 2 + 2 * PAIRS
    n = first + recheck + 2 * PAIRS + 10
    fewer = [80_000] * (first + recheck) + [120_000] * (2 * PAIRS + 10)
    forms = core().launch_form_trial(fewer, [100_000] * n)
    assert forms[first : first + recheck] == "F" * recheck
    assert forms[first + recheck : -10].count("F") == PAIRS and forms[-10:] == "S" * 10
    with pytest.raises(RuntimeError, match="one time per invoke"):
        core().launch_form_trial([1], [])
