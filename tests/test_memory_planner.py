"""The shared-objects memory planner (src_cpp/runtime/memory_planner.cc), which partitions use
where sub-buffers are avoided (NVIDIA's driver; CLGPU_ARENA=shared anywhere): plans are valid,
deterministic, never above the greedy plans it replaced, at the proven optimum on MobileNetV2's
blocks, quick on a few hundred tensors, and the model-level figures of delegate.memory().

Whole shared buffers cannot reach the lower bound that delegate.memory() reports (peak bytes
alive at once): on MobileNetV2 the best plan is 7/6 of it. An exact solver (an integer program,
HiGHS, run offline on the chains below at 96..224 pixels and widths 0.5..1.4, and on the
delegate's own MobileNetV2 partition) proved no plan cheaper; `shared_lower_bound_bytes` (the
sum over k of the largest k-th largest tensor alive at a step) already shows 1.15 of the peak.
"""

from __future__ import annotations

import random
from collections import defaultdict

import pytest

import clgpu_delegate
from clgpu_delegate._native import core
from clgpu_delegate.modelgen import zoo
from clgpu_delegate.runtime import make_interpreter

Usage = tuple[int, int, int]  # bytes, first step, last step (inclusive)

# (expansion, channels, repeats, stride) of MobileNetV2's inverted-residual stages: the zoo's.
MOBILENET_V2_STAGES = zoo._MOBILENET_V2
SEVEN_SIXTHS = 7 / 6


def plan(usages: list[Usage], strategy: str = "search") -> dict:
    return core().plan_shared_objects(usages, strategy)


def check_valid(usages: list[Usage], p: dict) -> None:
    """Checked here independently of the planner's own check (also asserted)."""
    spans = defaultdict(list)
    for (size, first, last), buffer in zip(usages, p["assignment"], strict=True):
        assert p["buffer_bytes"][buffer] >= size
        spans[buffer].append((first, last))
    for s in spans.values():
        s.sort()
        assert all(a[1] < b[0] for a, b in zip(s, s[1:], strict=False)), s  # none at once
    assert p["allocated_bytes"] == sum(p["buffer_bytes"])
    assert p["valid"]


def greedy(usages: list[Usage], order: list[int]) -> int:
    """The old planner's rule: each tensor in turn takes the smallest free buffer that holds it,
    else the largest free one (grown), else a new one."""
    sizes: list[int] = []
    spans: list[list[tuple[int, int]]] = []
    for i in order:
        size, first, last = usages[i]
        free = [b for b, s in enumerate(spans) if all(e < first or last < f for f, e in s)]
        fits = [b for b in free if sizes[b] >= size]
        if fits:
            b = min(fits, key=lambda b: sizes[b])
        elif free:
            b = max(free, key=lambda b: sizes[b])
        else:
            b = len(sizes)
            sizes.append(0)
            spans.append([])
        spans[b].append((first, last))
        sizes[b] = max(sizes[b], size)
    return sum(sizes)


def old_plan_bytes(usages: list[Usage]) -> int:
    """What PlanSharedObjects allocated before: the cheaper of largest first and first use."""
    by_size = sorted(range(len(usages)), key=lambda i: -usages[i][0])
    by_first = sorted(by_size, key=lambda i: usages[i][1])
    return min(greedy(usages, by_size), greedy(usages, by_first))


def random_usages(rng: random.Random) -> list[Usage]:
    n = rng.randint(1, 60)
    steps = rng.randint(1, 80)
    longest = rng.randint(0, 20)
    sizes = [rng.choice([rng.randint(1, 3), rng.randint(1, 100_000)]) for _ in range(1, 9)]
    out = []
    for _ in range(n):
        first = rng.randrange(steps)
        out.append((rng.choice(sizes), first, first + rng.randint(0, longest)))
    return out


def chain_usages(rng: random.Random, n: int) -> list[Usage]:
    """A CNN-like chain: each op's output read by the next, some kept for a skip connection."""
    out, hw = [], rng.choice([28 * 28, 56 * 56, 112 * 112])
    for step in range(n):
        if rng.random() < 0.1 and hw > 49:
            hw //= 4
        skip = rng.randint(2, 6) if rng.random() < 0.2 else 1
        out.append((hw * rng.choice([16, 24, 32, 64, 96, 144]) * 4, step, step + skip))
    return out


def mobilenet_v2_usages(resolution: int, width: float, element_bytes: int) -> list[Usage]:
    """Activation lifetimes of MobileNetV2, one op a step: the stem, then per block an expand
    1x1 (unless t=1), a depthwise 3x3 and a project 1x1, and where the shapes allow a residual
    add that also reads the block's input (kept alive across the block); then the head."""
    usages: list[list[int]] = []
    step = 0

    def produce(elements: int) -> int:
        usages.append([elements * element_bytes, step, step])
        return len(usages) - 1

    def read(i: int) -> None:
        usages[i][2] = step

    h, c = resolution // 2, max(8, int(32 * width))
    x = produce(h * h * c)
    step += 1
    for t, c_stage, repeats, stride in MOBILENET_V2_STAGES:
        c_out = max(8, int(c_stage * width))
        for r in range(repeats):
            s = stride if r == 0 else 1
            h_out = (h + s - 1) // s
            block_input, y = x, x
            if t != 1:
                read(y)
                y = produce(h * h * c * t)
                step += 1
            read(y)
            y = produce(h_out * h_out * c * t)
            step += 1
            read(y)
            x = produce(h_out * h_out * c_out)
            step += 1
            if s == 1 and c == c_out:
                read(block_input)
                read(x)
                x = produce(h_out * h_out * c_out)
                step += 1
            h, c = h_out, c_out
    for elements in (h * h * 1280, 1280, 1000):  # 1x1 conv, pooling, classifier
        read(x)
        x = produce(elements)
        step += 1
    return [tuple(u) for u in usages]


def test_random_plans_are_valid_deterministic_and_never_worse_than_greedy() -> None:
    rng = random.Random(20240607)
    cases = [random_usages(rng) for _ in range(300)] + [chain_usages(rng, 80) for _ in range(20)]
    better = 0
    for usages in cases:
        p = plan(usages)
        check_valid(usages, p)
        assert p["lower_bound_bytes"] <= p["shared_lower_bound_bytes"] <= p["allocated_bytes"]
        old = old_plan_bytes(usages)
        assert p["allocated_bytes"] <= old
        assert p["allocated_bytes"] <= plan(usages, "greedy_by_size")["allocated_bytes"]
        assert plan(usages)["assignment"] == p["assignment"]
        better += p["allocated_bytes"] < old
    assert better >= len(cases) // 10, better  # the search does find cheaper plans


def test_edge_cases() -> None:
    assert plan([])["allocated_bytes"] == 0
    assert plan([(5, 0, 0)])["buffer_bytes"] == [5]
    # Everything alive at once: one buffer each.
    usages = [(100 + i, 0, 9) for i in range(20)]
    p = plan(usages)
    check_valid(usages, p)
    assert p["allocated_bytes"] == sum(u[0] for u in usages)
    with pytest.raises(Exception, match="strategy"):
        plan(usages, "nope")


@pytest.mark.parametrize("resolution", [96, 160, 224])
@pytest.mark.parametrize("width", [0.5, 1.0, 1.4])
@pytest.mark.parametrize("element_bytes", [2, 4])
def test_mobilenet_v2_chain_reaches_the_proven_optimum(
    resolution: int, width: float, element_bytes: int
) -> None:
    usages = mobilenet_v2_usages(resolution, width, element_bytes)
    p = plan(usages)
    check_valid(usages, p)
    lb = p["lower_bound_bytes"]
    # Proven optimal (module docstring); greedy by size was 1.217.
    assert p["allocated_bytes"] * 6 == lb * 7, p["allocated_bytes"] / lb
    assert plan(usages, "greedy_by_size")["allocated_bytes"] > 1.2 * lb
    assert p["shared_lower_bound_bytes"] == pytest.approx(1.15 * lb, rel=1e-9)


@pytest.mark.parametrize("kind", ["chain", "random"])
def test_planning_300_tensors(kind: str) -> None:
    # Large partitions: the search's budget counts work, not time, so the plan is the same on
    # every run and machine (its speed, ~1-2.5 ms on 2 cores, is a measurement, not a test).
    rng = random.Random(7)
    if kind == "chain":
        usages = chain_usages(rng, 300)
    else:
        usages = []
        for _ in range(300):
            first = rng.randrange(300)
            usages.append((rng.randint(1, 100_000), first, first + rng.randint(0, 20)))
    p = plan(usages)
    check_valid(usages, p)
    assert plan(usages) == p
    assert p["allocated_bytes"] <= plan(usages, "greedy_by_size")["allocated_bytes"]


def test_model_plan_without_sub_buffers(runtime: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLGPU_ARENA", "shared")  # the shared-objects path, as on NVIDIA
    model = zoo.build("mobilenet_v2")
    for precision in ("fp32", "fp16"):
        d = clgpu_delegate.load(partitioning="all", precision=precision)
        interp = make_interpreter(model, [d], runtime=runtime)
        interp.allocate_tensors()
        m = d.memory()
        assert max(p.buffers for p in m.partitions) > 1, m  # shared buffers, no arena
        ratio = m.allocated_bytes / m.lower_bound_bytes
        # 7/6 is the optimum of its main partition (1.217 before this planner).
        assert ratio <= SEVEN_SIXTHS + 1e-6, m
        del interp


def test_unknown_arena_is_a_clear_error(runtime: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLGPU_ARENA", "bogus")
    d = clgpu_delegate.load(partitioning="all")
    with pytest.raises(RuntimeError, match="CLGPU_ARENA must be subbuffers, svm or shared"):
        interp = make_interpreter(zoo.build("lenet5"), [d], runtime=runtime)
        interp.allocate_tensors()


@pytest.mark.parametrize("policy", ["1,1", "3,5"])
def test_flush_policy_from_the_environment(
    policy: str, runtime: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # CLGPU_FLUSH (bench/ab_options.py's knob) changes when the queue is flushed, not what runs.
    import numpy as np

    model = zoo.build("mobilenet_v2")
    monkeypatch.setenv("CLGPU_FLUSH", policy)
    d = clgpu_delegate.load(partitioning="all", cpu_warmup=False)
    got = make_interpreter(model, [d], runtime=runtime)
    ref = make_interpreter(model, None, runtime=runtime, reference=True)
    x = np.random.default_rng(1).standard_normal((1, 224, 224, 3)).astype(np.float32)
    outs = []
    for it in (got, ref):
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        outs.append(it.get_tensor(it.get_output_details()[0]["index"]))
    assert len(d.delegated_nodes()) == 66
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("policy", ["0,4", "2", "x,y", "2,0", "2,16x", "2,16,1"])
def test_bad_flush_policy_is_a_clear_error(
    policy: str, runtime: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLGPU_FLUSH", policy)
    d = clgpu_delegate.load(partitioning="all", cpu_warmup=False)
    with pytest.raises(RuntimeError, match="CLGPU_FLUSH must be FIRST,EVERY"):
        make_interpreter(zoo.build("lenet5"), [d], runtime=runtime).allocate_tensors()
