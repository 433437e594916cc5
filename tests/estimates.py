"""The cost model's estimate as `decisions()` words it, read back by the cost-model tests
(test_cost_model.py: the device side and the decisions; test_cpu_costs.py: the CPU side)."""

from __future__ import annotations

import re

import clgpu_delegate
from clgpu_delegate.modelgen._layers import start
from clgpu_delegate.runtime import make_interpreter


def estimate_text(model: bytes) -> str:
    """The cost model's estimate for a one-partition model, in words: on a CPU device the
    decline's reason names the figures, on a GPU a kept partition's note."""
    delegate = clgpu_delegate.load(partitioning="cost")
    make_interpreter(model, [delegate], reference=True).allocate_tensors()
    texts = {d.reason + " " + d.note for d in delegate.decisions()}
    texts = {t for t in texts if "kernels)" in t}
    assert len(texts) == 1, texts
    return texts.pop()


def cpu_estimate_ms(model: bytes) -> tuple[float, float]:
    """(CPU ms, MFLOP) of the estimate."""
    m = re.search(r"vs ([0-9.]+) ms on the CPU .*?; ([0-9.]+) MFLOP", estimate_text(model))
    assert m
    return float(m.group(1)), float(m.group(2))


def one_layer(kind: str) -> bytes:
    if kind == "fc":  # 2 FLOP per 4-byte weight: the weights' traffic sets the CPU's time
        net, x = start((1, 1), 2048, seed=0, fp16_weights=False)
        return net.finish(net.fc(net.b.reshape(x, (1, 2048)), 2048, act=None), softmax=False)
    net, x = start(21, 32, seed=0, fp16_weights=False)  # ~600 FLOP per byte moved
    return net.finish(net.conv(x, 32, 3, act=None), softmax=False)


def cpu_estimate_at(model: bytes, threads: int | None, runtime: str) -> tuple[float, int]:
    """(CPU ms, threads) of the estimate for an interpreter given `threads` (None: unset)."""
    delegate = clgpu_delegate.load(partitioning="cost")
    make_interpreter(
        model, [delegate], runtime=runtime, num_threads=threads, reference=True
    ).allocate_tensors()
    texts = {d.reason + " " + d.note for d in delegate.decisions()}
    pattern = r"vs ([0-9.]+) ms on the CPU \(\d+ nodes, (\d+) threads;"
    found = {m.groups() for t in texts if (m := re.search(pattern, t))}
    assert len(found) == 1, texts
    ms, threads_seen = found.pop()
    return float(ms), int(threads_seen)


def small_layers(count: int, size: int = 4) -> bytes:
    """Layers so small that each node's hand-off between XNNPACK's threads is their CPU time:
    1x1 convolutions of 8 channels on a `size` x `size` map."""
    net, x = start(size, 8, seed=0, fp16_weights=False)
    for _ in range(count):
        x = net.conv(x, 8, 1, act=None)
    return net.finish(x, softmax=False)
