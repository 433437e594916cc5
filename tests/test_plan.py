"""Measured partitioning (`clgpu_delegate.plan`, `load(partitioning="measure")`): the
candidates, the stored plan and its reuse, and what a bad store or bad arguments do.
Which plan wins is a timing, so no test asserts it (bench/bench_plans.py measures it)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from parity import check_parity, compare, cpu_op, random_inputs, run

import clgpu_delegate
import clgpu_delegate.planning as plan_module
from clgpu_delegate.modelgen import ModelBuilder
from clgpu_delegate.runtime import make_interpreter


def two_partition_model() -> bytes:
    b = ModelBuilder(seed=31)
    x = b.input("x", (1, 10, 10, 3))
    y = b.conv2d(x, b.rand((4, 3, 3, 3)), b.rand((4,)), activation="RELU")
    y = cpu_op(b, y)  # on the CPU
    y = b.conv2d(y, b.rand((5, 3, 3, 4)), stride=2)
    b.output(b.add(y, b.rand((5,))))
    return b.build()


def _plan(model: bytes, **kw: Any) -> clgpu_delegate.Plan:
    return clgpu_delegate.plan(model, runs=2, min_seconds=0, warmup=0, **kw)


def test_plan_times_every_candidate_and_picks_the_fastest(runtime: str) -> None:
    p = _plan(two_partition_model(), runtime=runtime)
    names = [c.name for c in p.candidates]
    assert names == ["cpu", "default", "all", "all, largest 1"]
    delegating = [c for c in p.candidates if c.delegated_nodes]
    fastest = min(delegating, key=lambda c: c.median_ms)
    cpu = p.candidate("cpu")
    assert p.winner == (fastest.name if fastest.median_ms * 1.02 <= cpu.median_ms else "cpu")
    assert p.options["partitioning"] == p.candidate(p.winner).options["partitioning"]
    all_ = p.candidate("all")
    assert (all_.delegated_nodes, all_.partitions) == (3, 2)
    assert p.candidate("all, largest 1").partitions == 1
    assert p.candidate("cpu").delegated_nodes == 0
    assert p.speedup_over(p.winner) == 1.0
    assert p.speedup_over("cpu") == cpu.median_ms / p.candidate(p.winner).median_ms
    assert not p.from_cache


def test_plan_holds_a_delegate_made_before_its_candidates(
    runtime: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The context's first delegate runs slower on NVIDIA: plan() makes one of its own first and
    # keeps it through the timing, so no candidate is favoured by the order it was made in.
    events: list[str] = []
    real_held, real_load, real_time = (
        plan_module.held_delegate,
        clgpu_delegate.delegate.load,
        plan_module.time_candidates,
    )
    held: list[Any] = []

    def record_held(**options: Any) -> Any:
        events.append("held")
        held.append(real_held(**options))
        return held[-1]

    def record_load(**options: Any) -> Any:
        events.append("load")
        return real_load(**options)

    def record_time(*args: Any, **kw: Any) -> None:
        events.append("time")
        assert held and held[0].stats().prepares == 0  # alive, never given a model
        real_time(*args, **kw)

    monkeypatch.setattr(plan_module, "held_delegate", record_held)
    monkeypatch.setattr(clgpu_delegate.delegate, "load", record_load)
    monkeypatch.setattr(plan_module, "time_candidates", record_time)
    _plan(two_partition_model(), runtime=runtime)
    assert events[0] == "held" and events.count("held") == 1
    assert events.index("held") < events.index("load") < events.index("time")


def test_stored_plan_is_reused_without_measuring(
    tmp_path: Path, runtime: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = two_partition_model()
    first = _plan(model, runtime=runtime, serialization_dir=tmp_path)
    stored = list((tmp_path / "plans").glob("*.json"))
    assert len(stored) == 1

    def no_timing(*a: object, **k: object) -> None:
        raise AssertionError("a stored plan must not be measured again")

    monkeypatch.setattr(plan_module, "Timed", no_timing)
    again = _plan(model, runtime=runtime, serialization_dir=tmp_path)
    assert again.from_cache and again.winner == first.winner
    assert again.options == first.options
    # Another precision is another plan.
    monkeypatch.undo()
    other = _plan(model, runtime=runtime, serialization_dir=tmp_path, precision="fp16")
    assert not other.from_cache
    assert len(list((tmp_path / "plans").glob("*.json"))) == 2


@pytest.mark.parametrize("damage", ["garbage", "other_key", "unknown_winner", "symlink", "dir"])
def test_a_damaged_store_is_measured_again(tmp_path: Path, runtime: str, damage: str) -> None:
    model = two_partition_model()
    first = _plan(model, runtime=runtime, serialization_dir=tmp_path)
    (path,) = (tmp_path / "plans").glob("*.json")
    d = json.loads(path.read_text())
    if damage == "garbage":
        path.write_bytes(b"\x00{not json")
    elif damage == "other_key":
        path.write_text(json.dumps(d | {"key": "0" * 32}))
    elif damage == "unknown_winner":
        path.write_text(json.dumps(d | {"winner": "gpu, fast"}))
    elif damage == "symlink":
        target = tmp_path / "elsewhere.json"
        target.write_text(path.read_text())
        path.unlink()
        path.symlink_to(target)
    else:
        path.unlink()
        path.mkdir()
    if damage == "dir":
        with pytest.warns(UserWarning, match="could not store the plan"):
            again = _plan(model, runtime=runtime, serialization_dir=tmp_path)
    else:
        again = _plan(model, runtime=runtime, serialization_dir=tmp_path)
    assert not again.from_cache
    assert {c.name for c in again.candidates} == {c.name for c in first.candidates}
    assert not path.is_symlink()  # replaced by a regular file, the target untouched
    if damage == "symlink":
        assert json.loads((tmp_path / "elsewhere.json").read_text()) == d


def test_load_measure_runs_the_winner_and_matches_the_cpu(tmp_path: Path, runtime: str) -> None:
    model = two_partition_model()
    d = clgpu_delegate.load(partitioning="measure", model=model, serialization_dir=tmp_path)
    stored = json.loads(next((tmp_path / "plans").glob("*.json")).read_text())
    assert d.options["partitioning"] == stored["options"]["partitioning"]
    interp = make_interpreter(model, [d], runtime=runtime, reference=True)
    interp.allocate_tensors()
    ref = make_interpreter(model, None, runtime=runtime, reference=True)
    ref.allocate_tensors()
    x = random_inputs(ref.get_input_details(), 4)
    compare(run(interp, x), run(ref, x), 1e-4, None)


def test_partitioning_none_claims_nothing(runtime: str) -> None:
    r = check_parity(two_partition_model(), runtime, partitioning="none", expect_partitions=0)
    assert not r.delegated
    assert {d["reason"] for d in r.decisions} == {"partitioning=none", "op not supported"}


def test_bad_arguments_are_one_line_errors() -> None:
    model = two_partition_model()
    with pytest.raises(ValueError, match="needs model="):
        clgpu_delegate.load(partitioning="measure")
    with pytest.raises(ValueError, match="only used with partitioning='measure'"):
        clgpu_delegate.load(model=model)
    with pytest.raises(ValueError, match="chooses max_delegated_partitions"):
        clgpu_delegate.load(partitioning="measure", model=model, max_delegated_partitions=2)
    with pytest.raises(ValueError, match="runs must be >= 1"):
        clgpu_delegate.plan(model, runs=0)
    with pytest.raises(ValueError, match="chooses 'partitioning'"):
        clgpu_delegate.plan(model, partitioning="all")
    with pytest.raises(FileNotFoundError, match="model file not found"):
        clgpu_delegate.plan("/nonexistent/model.tflite")


def test_on_a_cpu_opencl_device_the_cpu_plan_wins(runtime: str) -> None:
    # PoCL runs our kernels on the same cores as XNNPACK, many times slower; a plan that
    # claims nothing (the default's, there) cannot win either: the CPU alone is kept.
    if clgpu_delegate.select_device("auto").type != "cpu":
        pytest.skip("needs an OpenCL device on the CPU")
    # One CPU thread: two would wait on each other at every op when the machine is busy.
    p = clgpu_delegate.plan(two_partition_model(), runtime=runtime, runs=6, warmup=1, threads=1)
    assert p.candidate("default").delegated_nodes == 0
    assert p.winner == "cpu" and p.options["partitioning"] == "none"


class _FakeTimed:
    """Records each run in a shared log: which candidate ran, in order."""

    def __init__(self, name: str, log: list[str], delegated: int) -> None:
        self.name, self.log, self.times = name, log, []
        self.delegate = type("D", (), {"delegated_nodes": lambda _s: [0] * delegated})()

    def run(self, feeds: object) -> float:
        self.log.append(self.name)
        return float(len(self.log))


@pytest.mark.parametrize("cpu_device", [False, True])
def test_every_timed_run_follows_a_run_of_its_own_candidate(cpu_device: bool) -> None:
    # A run right after another candidate's pays for the switch; timing it charges that to
    # whichever candidate a fixed order puts after the CPU.
    log: list[str] = []
    timed = [_FakeTimed(n, log, d) for n, d in (("cpu", 0), ("default", 3), ("all", 5))]
    plan_module.time_candidates(timed, [], runs=12, warmup=1, seed=0, cpu_device=cpu_device)
    for t in timed:
        assert len(t.times) == 12
        for at in t.times:  # each time is the log's length when the run ended
            assert log[int(at) - 1] == t.name and log[int(at) - 2] == t.name
    if cpu_device:  # one block each, the CPU's first
        assert log.index("default") > max(i for i, n in enumerate(log) if n == "cpu")
    else:  # turns, in more than one order
        turns = [n for i, n in enumerate(log) if i == 0 or log[i - 1] != n]
        rounds = {tuple(turns[i : i + 3]) for i in range(3, len(turns) - 2, 3)}
        assert len(rounds) > 1


@pytest.mark.parametrize("n", [2, 3, 4, 6])
def test_each_candidate_follows_each_other_equally_often(n: int) -> None:
    # The GPU's clocks fall during the CPU's turn: the candidate after it pays. Over whole
    # circuits every ordered pair of candidates is one turn switch, as often as any other.
    log: list[str] = []
    names = [f"c{i}" for i in range(n)]
    timed = [_FakeTimed(name, log, i) for i, name in enumerate(names)]
    runs = plan_module._TURN * (n - 1) * 4  # four circuits' worth of turns each
    plan_module.time_candidates(timed, [], runs=runs, warmup=1, seed=3, cpu_device=False)
    turns = [name for i, name in enumerate(log[n:]) if i == 0 or log[n + i - 1] != name]
    assert len(turns) == n * (n - 1) * 4
    switches = Counter(zip(turns, turns[1:], strict=False))
    assert set(switches) == {(a, b) for a in names for b in names if a != b}
    assert max(switches.values()) - min(switches.values()) <= 1
