"""Measured partitioning: time the CPU alone and a few delegate plans of one model on this
device, keep the fastest, and remember the choice per model and device.

    best = clgpu_delegate.plan("model.tflite", serialization_dir="~/.cache/clgpu")
    delegate = clgpu_delegate.load(**best.options)

or in one step, `clgpu_delegate.load(partitioning="measure", model="model.tflite")`. A cost
model can only estimate; this measures what the interpreter really does (including how the
CPU runs the nodes left to it), at the price of timing each candidate at load.
"""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import json
import os
import random
import statistics
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from numpy.typing import NDArray

from .runtime import InputShapes

# Partition counts tried beyond "all": keeping only the largest N partitions trades the
# small ones' launches and transfers for CPU work.
_LARGEST = (1, 2, 4)
_MARGIN = 1.02  # a delegate plan wins only when it is this much faster than the CPU
# Timed runs per turn. A run right after another candidate's is slower than one in a loop
# (XNNPACK's threads still spinning, the GPU idle since: docs/performance.md), so each
# turn opens with an untimed run and every candidate follows every other equally often.
_TURN = 5
_PLAN_FILE_LIMIT = 1 << 20  # a plan is a few KB; anything larger is not ours


@dataclass(frozen=True)
class Candidate:
    """One plan as measured: `options` are what `load()` takes for it."""

    name: str
    options: dict[str, Any]
    median_ms: float
    min_ms: float
    delegated_nodes: int
    partitions: int


@dataclass(frozen=True)
class Plan:
    """The fastest candidate, and every candidate's measurement."""

    key: str
    device: str
    winner: str
    options: dict[str, Any]
    candidates: list[Candidate] = field(default_factory=list)
    from_cache: bool = False

    def candidate(self, name: str) -> Candidate:
        return next(c for c in self.candidates if c.name == name)

    def speedup_over(self, name: str) -> float:
        """How many times faster the winner is than candidate `name` (medians)."""
        return self.candidate(name).median_ms / self.candidate(self.winner).median_ms

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> dict[str, Any]:
        """The winner, whether it was stored, and every candidate's median ms."""
        ms = {c.name: c.median_ms for c in self.candidates}
        return {"winner": self.winner, "cached": self.from_cache, "ms": ms}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Plan:
        cands = [Candidate(**c) for c in d["candidates"]]
        return cls(
            key=str(d["key"]),
            device=str(d["device"]),
            winner=str(d["winner"]),
            options=dict(d["options"]),
            candidates=cands,
            from_cache=True,
        )


def _model_bytes(model: str | os.PathLike[str] | bytes) -> bytes:
    if isinstance(model, (bytes, bytearray)):
        return bytes(model)
    path = Path(model).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"model file not found: {path}")
    return path.read_bytes()


def _plan_key(model: bytes, device: str, runtime: str, options: dict[str, Any]) -> str:
    h = hashlib.sha256()
    h.update(hashlib.sha256(model).digest())
    h.update(json.dumps([device, runtime, sorted(options.items())], default=str).encode())
    return h.hexdigest()[:32]


def _read_plan(path: Path, key: str) -> Plan | None:
    """A stored plan, or None when there is none or it is unusable (then it is re-measured)."""
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > _PLAN_FILE_LIMIT:
            return None
        p = Plan.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    names = {c.name for c in p.candidates}
    return p if p.key == key and p.winner in names else None


def _write_plan(path: Path, p: Plan) -> None:
    """Stores a plan (atomically: a reader sees the old one or the new one); a store that
    cannot be written costs a measurement at the next load, so it only warns."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.parent.mkdir(exist_ok=True)  # serialization_dir: one level, as load()'s
        path.parent.mkdir(exist_ok=True)
        tmp.write_text(json.dumps(p.to_dict(), indent=1))
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        warnings.warn(f"clgpu_delegate: could not store the plan in {path}: {e}", stacklevel=3)


def _feeds(details: list[dict[str, Any]], seed: int) -> list[NDArray[Any]]:
    from .runtime import random_inputs

    return random_inputs(details, seed)


class Timed:
    """One candidate's interpreter and its run times (bench/bench_plans.py uses it too)."""

    def __init__(self, make: Callable[[], tuple[Any, Any]]) -> None:
        self.delegate, self.interp = make()
        self.inputs = self.interp.get_input_details()
        self.outputs = self.interp.get_output_details()
        self.times: list[float] = []

    def run(self, feeds: list[NDArray[Any]]) -> float:
        for d, x in zip(self.inputs, feeds, strict=True):
            self.interp.set_tensor(d["index"], x)
        t0 = time.perf_counter()
        self.interp.invoke()
        for d in self.outputs:
            self.interp.get_tensor(d["index"])
        return (time.perf_counter() - t0) * 1e3


def held_delegate(**options: Any) -> Any:
    """A delegate to make before the candidates and keep until their timing is done, never
    timed itself. On NVIDIA's driver the first delegate of a process's OpenCL context ran 1-2 %
    slower than delegates made while it lived, the same plan in turns; made after one held,
    the two came out even (bench/results/first-delegate-NVIDIA_H200.md). Held, no candidate is
    that first one, so none is favoured by the order the candidates were made in."""
    from .delegate import load

    return load(**options)


def time_candidates(
    timed: list[Timed],
    feeds: list[NDArray[Any]],
    runs: int,
    warmup: int,
    seed: int,
    cpu_device: bool,
    min_seconds: float = 0.0,
) -> None:
    """At least `runs` timed runs of every candidate, appended to its `times`, and more until
    `min_seconds` have passed: a model of a few tens of microseconds needs thousands of runs
    for a median that jitter does not move.

    On a GPU, in turns of up to _TURN runs after an untimed one, in an order where each
    candidate follows each other equally often (_turn_circuit): drift (clocks, other load)
    reaches every candidate, and none runs after the CPU more often than another. On an
    OpenCL device that is the host's own cores (`cpu_device`), its worker threads keep
    spinning after a delegated run and slow whatever runs next there: each candidate runs in
    one block, those that delegate nothing first, so only a plan's own threads cost it."""
    if cpu_device:
        for t in sorted(timed, key=lambda t: bool(t.delegate and t.delegate.delegated_nodes())):
            for _ in range(warmup):
                t.run(feeds)
            end = time.perf_counter() + min_seconds / len(timed)
            while len(t.times) < runs or time.perf_counter() < end:
                t.times.append(t.run(feeds))
        return
    rng = random.Random(seed)
    for t in timed:
        for _ in range(warmup):
            t.run(feeds)
    order = list(timed)
    rng.shuffle(order)
    end = time.perf_counter() + min_seconds
    while True:
        for i in _turn_circuit(len(order), rng):
            if all(len(t.times) >= runs for t in timed) and time.perf_counter() >= end:
                return
            t = order[i]
            n = min(_TURN, runs - len(t.times)) if len(t.times) < runs else _TURN
            t.run(feeds)
            t.times += [t.run(feeds) for _ in range(n)]


def _turn_circuit(n: int, rng: random.Random) -> list[int]:
    """Turns that pass from every candidate to every other exactly once and end where the
    next circuit starts (an Eulerian circuit of the complete directed graph, its edges
    picked at random): each candidate follows each other equally often, so the cost of
    coming after a slow one (the CPU's turn, which lets the GPU's clocks fall) is shared. A
    random order per round put one candidate after the CPU twice as often as another over a
    table's 16 rounds."""
    if n < 2:
        return [0] * n
    left = {v: rng.sample([u for u in range(n) if u != v], n - 1) for v in range(n)}
    stack, circuit = [0], []
    while stack:  # Hierholzer's walk
        if left[stack[-1]]:
            stack.append(left[stack[-1]].pop())
        else:
            circuit.append(stack.pop())
    return circuit[::-1][:-1]  # closed at 0: the next circuit's first turn


def plan(
    model: str | os.PathLike[str] | bytes,
    *,
    runs: int = 30,
    min_seconds: float = 0.25,
    warmup: int = 3,
    runtime: str | None = None,
    threads: int | None = None,
    serialization_dir: str | os.PathLike[str] | None = None,
    refresh: bool = False,
    seed: int = 0,
    input_shapes: InputShapes | None = None,
    **options: Any,
) -> Plan:
    """Times the CPU alone, the default (cost) plan, `partitioning="all"` and "all" keeping
    only the largest 1, 2 or 4 partitions, in balanced turns of a few runs; returns the fastest
    (the CPU unless a plan that delegates something is at least 2 % faster).

    With `serialization_dir` the result is stored there (`plans/`), keyed by the model's
    bytes, the device and driver, the runtime and `options`; a later call returns it
    without measuring (`refresh=True` measures again). `options` are `load()`'s, applied
    to every candidate (precision, device, ...); `partitioning` and
    `max_delegated_partitions` are what the candidates vary. `threads`: the interpreter's
    CPU threads, as you will run it (default: every core). Each candidate runs at least
    `runs` times, and all of them together at least `min_seconds`. `input_shapes`: as
    `run_benchmark()`'s, for a model with dynamic input dimensions.
    """
    from .delegate import load
    from .devices import select_device
    from .runtime import allocate, available_runtimes, make_interpreter

    if runs < 1 or warmup < 0 or not min_seconds >= 0:
        raise ValueError(
            f"runs must be >= 1, warmup and min_seconds >= 0 (got runs={runs}, warmup={warmup}, "
            f"min_seconds={min_seconds})"
        )
    for k in ("partitioning", "max_delegated_partitions"):
        if k in options:
            raise ValueError(f"plan() chooses {k!r} itself; do not pass it")
    data = _model_bytes(model)
    if threads is None:  # as `clgpu-delegate bench`: the CPU at its best, all cores
        threads = os.cpu_count() or 1
    dev = select_device(options.get("device", "auto"))
    device = f"{dev.name} | {dev.driver_version}"
    rt = runtime or os.environ.get("CLGPU_RUNTIME") or (available_runtimes() or ["?"])[0]
    shaped = {"input_shapes": sorted(input_shapes.items())} if input_shapes else {}
    key = _plan_key(data, device, rt, options | {"threads": threads} | shaped)
    store = None
    if serialization_dir is not None:
        store = Path(serialization_dir).expanduser() / "plans" / f"{key}.json"
        if not refresh and (cached := _read_plan(store, key)) is not None:
            return cached

    common = dict(options)
    if serialization_dir is not None:  # the candidates share its program binaries too
        common["serialization_dir"] = os.path.expanduser(serialization_dir)

    def maker(opts: dict[str, Any] | None) -> Callable[[], tuple[Any, Any]]:
        def make() -> tuple[Any, Any]:
            d = load(**common, **opts) if opts is not None else None
            it = make_interpreter(data, [d] if d else None, runtime=rt, num_threads=threads)
            allocate(it, input_shapes)
            if d is not None:  # cpu_warmup: time the device, not the CPU kernels of its warm-up
                d.wait_ready()
            return d, it

        return make

    held = held_delegate(**common)  # until the candidates are freed
    named: dict[str, tuple[dict[str, Any], Timed]] = {
        "cpu": ({"partitioning": "none"}, Timed(maker(None))),
        "default": ({"partitioning": "cost"}, Timed(maker({"partitioning": "cost"}))),
        "all": ({"partitioning": "all"}, Timed(maker({"partitioning": "all"}))),
    }
    n_all = len(named["all"][1].delegate.partitions())
    for n in _LARGEST:
        if n < n_all:
            o = {"partitioning": "all", "max_delegated_partitions": n}
            named[f"all, largest {n}"] = (o, Timed(maker(o)))

    feeds = _feeds(named["cpu"][1].inputs, seed)
    timed = [t for _, t in named.values()]
    time_candidates(timed, feeds, runs, warmup, seed, dev.type == "cpu", min_seconds)

    cands = []
    for name, (opts, t) in named.items():
        d = t.delegate
        cands.append(
            Candidate(
                name=name,
                options=opts,
                median_ms=statistics.median(t.times),
                min_ms=min(t.times),
                delegated_nodes=len(d.delegated_nodes()) if d else 0,
                partitions=len(d.partitions()) if d else 0,
            )
        )
    # Free the candidates now: their devices' queues (and, on a CPU device, its busy worker
    # threads) must not outlive the measurement and slow what the caller runs next.
    for t in timed:
        t.interp = None
    timed.clear()
    named.clear()
    del held
    gc.collect()
    # A delegate plan that claims nothing is the CPU plan; one must beat the CPU by a margin
    # larger than run-to-run noise to be worth a device.
    cpu = cands[0]
    best = min((c for c in cands if c.delegated_nodes), key=lambda c: c.median_ms, default=cpu)
    if best.median_ms * _MARGIN > cpu.median_ms:
        best = cpu
    result = Plan(
        key=key,
        device=device,
        winner=best.name,
        options=common | best.options,
        candidates=cands,
    )
    if store is not None:
        _write_plan(store, result)
    return result


# plan() in a process of its own: its candidates' interpreters, thread pools and device
# queues must not color what the caller measures next (bench's RSS growth read 0.06 MB
# after them, against 70 MB for the same rows without).
_CHILD = """
import json, sys
from clgpu_delegate.planning import plan
args = json.loads(sys.argv[2])
shapes = {k: tuple(v) for k, v in args.pop("input_shapes").items()} or None
with open(sys.argv[1], "rb") as f:
    p = plan(f.read(), input_shapes=shapes, **args)
print(json.dumps(p.to_dict()))
"""


def plan_in_child(model: bytes, input_shapes: InputShapes | None = None, **kwargs: Any) -> Plan:
    """plan(model, **kwargs) run in a fresh Python process; its one-line error as ValueError."""
    import subprocess
    import sys
    import tempfile

    args = {**kwargs, "input_shapes": dict(input_shapes or {})}
    # This package, not whatever `clgpu_delegate` the child's working directory holds (a
    # source tree has no built extension).
    root = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    with tempfile.NamedTemporaryFile(suffix=".tflite") as f:
        f.write(model)
        f.flush()
        out = subprocess.run(
            [sys.executable, "-c", _CHILD, f.name, json.dumps(args, default=str)],
            capture_output=True,
            text=True,
            check=False,
            env=env,
        )
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or [f"exit code {out.returncode}"])[-1]
        raise ValueError(f"partitioning measure: timing the plans failed: {last}")
    d = json.loads(out.stdout.strip().splitlines()[-1])
    return dataclasses.replace(Plan.from_dict(d), from_cache=bool(d.get("from_cache")))
