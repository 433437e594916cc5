"""Split-K convolutions (what a GPU runs on small maps with long K) against stock TFLite CPU, in
both launch forms (runtime/launch_forms.h): the split kernel and gemm_splitk_reduce, or the split
kernel whose last split of each tile adds them (one launch), and the partition's measuring of
which to run."""

from __future__ import annotations

import gc
from typing import Any

import pytest
from parity import check_parity, compare, random_inputs, run
from test_conv2d import CASES, Conv, conv_model

import clgpu_delegate
from clgpu_delegate._native import core
from clgpu_delegate.runtime import make_interpreter

PAIRS = 12  # LaunchFormTrial::kPairs (its kSkip is 2)
EVERY = 32  # LaunchFormTrial::kEvery: invokes in the kept form between later pairs


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
    # After the first pairs, one pair after every LaunchFormTrial::kEvery invokes in the kept form
    # (the host's launch cost changes within a process), each deciding again: each block between
    # pairs runs one form, and the outputs stay the CPU's through the switches.
    d, it, ref = _split_forms("3x3_s2_nobias_relu6", 3, runtime, monkeypatch)
    skip, blocks = 2, 3
    inputs = random_inputs(ref.get_input_details(), seed=0)
    for d_in, x in zip(it.get_input_details(), inputs, strict=True):
        it.set_tensor(d_in["index"], x)
    for _ in range(skip + 2 * PAIRS + blocks * (EVERY + 2) - 1):
        it.invoke()
    compare(run(it, inputs), run(ref, inputs), 1e-4, 1e-4)  # the last pair's second invoke
    n = d.stats().fewer_launch_invokes
    # One invoke of each pair in the fewer form, and each block all or none.
    assert n - PAIRS - blocks in {EVERY * k for k in range(blocks + 1)}, n
    # The pairs the trial timed, and their mean ratio (a positive time each; PoCL runs the two
    # forms within a few times of each other).
    s = d.stats()
    assert s.launch_form_pairs == PAIRS + blocks, s.launch_form_pairs
    assert 0.2 < s.launch_form_pair_ratio < 5, s.launch_form_pair_ratio


def test_split_k_forms_shared_by_delegates_of_one_plan(
    runtime: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Partitions that launch the same kernels over the same extents share their pairs and kept
    # form (runtime/launch_forms.h, FormVotes): a second delegate of the plan, made once the
    # first has decided, runs no first pairs of its own, only the kept form; another plan (other
    # splits) measures its own; and once no delegate of the plan lives, the next one starts over.
    case, splits = "3x3_c37_oc45_tiles", 4
    d, it, ref = _split_forms(case, splits, runtime, monkeypatch)
    inputs = random_inputs(ref.get_input_details(), seed=0)
    for _ in range(2 + 2 * PAIRS):
        run(it, inputs)
    assert d.stats().launch_form_pairs == PAIRS

    def second(gemm_splits: int) -> tuple[Any, Any]:
        d2 = clgpu_delegate.load(
            partitioning="all", conv_algorithm="implicit_gemm", gemm_splits=gemm_splits
        )
        it2 = make_interpreter(conv_model(CASES[case]), [d2], runtime=runtime, reference=True)
        it2.allocate_tensors()
        return d2, it2

    d2, it2 = second(splits)
    for seed in range(2 + 10):
        x = random_inputs(ref.get_input_details(), seed=seed)
        compare(run(it2, x), run(ref, x), 1e-4, 1e-4, f" (invoke {seed})")
    s2 = d2.stats()
    assert s2.launch_form_pairs == 0, s2.launch_form_pairs
    assert s2.fewer_launch_invokes in (0, 10), s2.fewer_launch_invokes
    d3, it3 = second(3)
    for _ in range(2 + 2 * PAIRS):
        run(it3, inputs)
    assert d3.stats().launch_form_pairs == PAIRS
    del it, d, it2, d2
    gc.collect()
    d4, it4 = second(splits)
    for _ in range(2 + 2 * PAIRS):
        run(it4, inputs)
    assert d4.stats().launch_form_pairs == PAIRS


def test_launch_form_trials_of_one_key_decide_together() -> None:
    # Two trials of one key in turns of 6 invokes: their pairs fill one record, so the first
    # decision comes after kPairs pairs between them, and from then on both run the same kept
    # form (the fewer launches, 1.25x faster) but in their own later pairs. Key 0: each trial
    # its own record, kPairs pairs each.
    n = 2 * (2 + 2 * PAIRS + 4 * (EVERY + 2))
    order = [(i // 6) % 2 for i in range(n)]
    fewer, shorter = [80_000] * n, [100_000] * n
    a, b = core().launch_form_trials(fewer, shorter, order, 7)
    # Each trial's first 2 invokes are skipped; then the shared record takes kPairs pairs in all.
    pairs_before_kept = [_pairs_before_block(f[2:]) for f in (a, b)]
    assert sum(pairs_before_kept) == PAIRS, (pairs_before_kept, a, b)
    _check_schedule(a[:2] + "FS" * PAIRS + a[2 + 2 * pairs_before_kept[0] :], "F")
    _check_schedule(b[:2] + "FS" * PAIRS + b[2 + 2 * pairs_before_kept[1] :], "F")
    own = core().launch_form_trials(fewer, shorter, order, 0)
    assert [_pairs_before_block(f[2:]) for f in own] == [PAIRS, PAIRS], own
    # A trial that starts after the record decided runs the kept form from its third invoke.
    late = [0] * (2 + 2 * PAIRS) + [1] * 20
    _, c = core().launch_form_trials([80_000] * len(late), [100_000] * len(late), late, 8)
    assert c == "SS" + "F" * 18, c


def _pairs_before_block(forms: str) -> int:
    """The pairs (one F and one S) at the start of `forms` before its first run of kEvery
    invokes in one form."""
    k = 0
    while len(forms) >= 2 * (k + 1) and sorted(forms[2 * k : 2 * k + 2]) == ["F", "S"]:
        if forms[2 * k + 2 : 2 * k + 2 + EVERY] in ("F" * EVERY, "S" * EVERY):
            return k + 1
        k += 1
    return k


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
    assert d.stats().launch_form_pairs == 0 and d.stats().launch_form_pair_ratio == 0
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


def _check_schedule(forms: str, kept: str) -> None:
    """`forms` as the trial runs them: two skipped invokes in the shorter form, the first pairs,
    then blocks of kEvery invokes in `kept` each followed by a pair, one invoke of each form
    in either order."""
    assert forms[:2] == "SS", forms
    first = forms[2 : 2 + 2 * PAIRS]
    pairs = [first[i : i + 2] for i in range(0, len(first), 2)]
    rest = forms[2 + 2 * PAIRS :]
    while rest:
        assert rest[:EVERY] == kept * min(EVERY, len(rest)), forms
        pairs += [rest[EVERY : EVERY + 2]] if len(rest) >= EVERY + 2 else []
        rest = rest[EVERY + 2 :]
    assert all(sorted(p) == ["F", "S"] for p in pairs), forms
    assert "FS" in pairs and "SF" in pairs


@pytest.mark.parametrize("slow", [0, 1, 2, 3])
@pytest.mark.parametrize("fewer_us, kept", [(80, "F"), (120, "S"), (101, "F"), (110, "S")])
def test_launch_form_trial_keeps_the_faster_through_slow_turns(
    fewer_us: int, kept: str, slow: int
) -> None:
    # Invokes in turns of 6 with 0-3 slow ones at each turn's start, at every offset: the trial
    # keeps the form 1.25x faster either way, a tie (1 % slower, within its 2 %) keeps the
    # fewer launches and 10 % slower does not. A fixed alternation of the forms kept the slower
    # at half these offsets with 3 slow invokes: all of one form's invokes of a turn but one were
    # slow ones.
    for offset in range(6):
        forms = core().launch_form_trial(*_slow_turns(fewer_us, slow, offset, n=140))
        _check_schedule(forms, kept)


def test_launch_form_trial_follows_a_change() -> None:
    # The host's cost per launch moves between two levels within a process: the fewer launches
    # 1.25x faster for the first pairs and 8 blocks, then 1.2x slower. The later pairs' ratios
    # push the first ones out of the window, and the shorter form is kept from then on.
    first, change, after = 2 + 2 * PAIRS, 8 * (EVERY + 2), 20 * (EVERY + 2)
    n = first + change + after
    fewer = [80_000] * (first + change) + [120_000] * after
    forms = core().launch_form_trial(fewer, [100_000] * n)
    _check_schedule(forms[: first + change], "F")
    # Switched within kWindow / 2 pairs of the change, one invoke in 34 in the fewer form after.
    assert forms[first + change + 13 * (EVERY + 2) :].count("F") <= 7, forms
    with pytest.raises(RuntimeError, match="one time per invoke"):
        core().launch_form_trial([1], [])
