"""Values past the fp16 range. Under precision="fp16" a finite value is stored as +-65504 (its
sign kept: conv, FC, depthwise and ADD gave -Inf whatever the sign, RESIZE_BILINEAR NaN, from an
Inf times zero), and said once in a warning naming the op; under precision="auto" (fp16 on a
GPU) each op whose values left the range runs in float32 from that invoke on, that invoke
included, the others stay fp16, and stats() names the ops in float32. check_precision() names
the nodes whose values leave the range on the inputs it is given."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import clgpu_delegate
from clgpu_delegate.modelgen import ModelBuilder
from clgpu_delegate.runtime import make_interpreter

F16_MAX = 65504.0
# Past the range both ways, and inside it.
X = np.array([1e5, -1e5, 7e4, -7e4, 1.0, -1.0, 6e4, -6e4], np.float32).reshape(1, 1, 2, 4)
EYE = np.eye(4, dtype=np.float32)

OPS: dict[str, Callable[[ModelBuilder, int], int]] = {
    "CONV_2D": lambda b, x: b.conv2d(x, EYE.reshape(4, 1, 1, 4), np.zeros(4, np.float32)),
    "CONV_2D_3x3": lambda b, x: b.conv2d(
        x, np.pad(EYE.reshape(4, 1, 1, 4), [(0, 0), (1, 1), (1, 1), (0, 0)])
    ),
    "DEPTHWISE_CONV_2D": lambda b, x: b.depthwise_conv2d(x, np.ones((1, 1, 1, 4), np.float32)),
    "FULLY_CONNECTED": lambda b, x: b.fully_connected(b.reshape(x, (2, 4)), EYE),
    "ADD": lambda b, x: b.add(x, np.ones(4, np.float32)),
    "RESIZE_BILINEAR": lambda b, x: b.resize_bilinear(x, (3, 5)),
    "AVERAGE_POOL_2D": lambda b, x: b.avg_pool2d(x, 1, 1),
    "SOFTMAX": lambda b, x: b.softmax(x),
    "CONCATENATION": lambda b, x: b.concat([x, x], 3),
}


@pytest.mark.parametrize("op", sorted(OPS))
def test_saturated_fp16_values_keep_their_sign(op: str, runtime: str) -> None:
    b = ModelBuilder(seed=1)
    b.output(OPS[op](b, b.input("x", X.shape)))
    model = b.build()
    outs = []
    delegate = clgpu_delegate.load(precision="fp16")
    for delegates in (None, [delegate]):
        it = make_interpreter(model, delegates, runtime=runtime, reference=True)
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], X)
        it.invoke()
        outs.append(it.get_tensor(it.get_output_details()[0]["index"]).ravel())
    assert all(d["delegated"] for d in delegate.decisions()), delegate.decisions()
    ref, got = outs
    assert not np.isnan(got).any(), got
    if op == "SOFTMAX":
        return  # its result is in range (and wrong: the inputs were saturated), but not NaN
    big = np.abs(ref) > F16_MAX
    assert big.any()
    np.testing.assert_array_equal(np.sign(got[big]), np.sign(ref[big]))
    small = np.abs(ref) <= 1.0
    np.testing.assert_allclose(got[small], ref[small], rtol=1e-2, atol=1e-2)


def _scaled_model() -> bytes:
    """conv -> MUL by 1e5 -> conv: the MUL and the second conv leave fp16's range on N(0, 1)
    inputs, the first conv does not."""
    b = ModelBuilder(seed=2)
    x = b.input("x", (1, 6, 6, 3))
    y = b.conv2d(x, b.rand((4, 3, 3, 3)), np.zeros(4, np.float32))
    y = b.mul(y, np.full(4, 1e5, np.float32))
    b.output(b.conv2d(y, b.rand((2, 1, 1, 4)), b.rand((2,))))
    return b.build()


def test_check_precision_names_the_nodes_past_the_fp16_range() -> None:
    report = clgpu_delegate.check_precision(_scaled_model())
    assert report.fp16_overflow == [1, 2], report.table()
    assert "past fp16's range" in report.table()
    # On inputs small enough, nothing leaves the range.
    quiet = clgpu_delegate.check_precision(
        _scaled_model(), inputs=[np.full((1, 6, 6, 3), 1e-4, np.float32)]
    )
    assert quiet.fp16_overflow == [], quiet.table()


def test_check_precision_refuses_inputs_that_do_not_fit() -> None:
    with pytest.raises(ValueError, match="1 inputs, 2 were given"):
        clgpu_delegate.check_precision(_scaled_model(), inputs=[X, X])


def _conv3x3() -> bytes:
    b = ModelBuilder(seed=3)
    x = b.input("x", (1, 8, 8, 8))
    b.output(b.conv2d(x, b.rand((8, 3, 3, 8)), b.rand((8,)), padding="SAME"))
    return b.build()


def _run(model: bytes, runtime: str, x: np.ndarray, delegate=None, times: int = 1) -> np.ndarray:
    it = make_interpreter(model, [delegate] if delegate else None, runtime=runtime, reference=True)
    it.allocate_tensors()
    for _ in range(times):
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"])


@pytest.fixture
def auto_is_fp16(monkeypatch: pytest.MonkeyPatch) -> None:
    """precision="auto" as on a GPU (fp16 storage): PoCL is a CPU device."""
    monkeypatch.setenv("CLGPU_AUTO_FP16", "1")


# Inputs x 1e5: past fp16's range before the conv (issue #45: 63 of 512 signs flipped).
BIG = np.random.default_rng(4).standard_normal((1, 8, 8, 8)).astype(np.float32) * 1e5


@pytest.mark.usefixtures("auto_is_fp16")
def test_auto_runs_a_partition_past_fp16s_range_in_float32(runtime: str) -> None:
    model = _conv3x3()
    ref = _run(model, runtime, BIG)
    saturated = _run(model, runtime, BIG, clgpu_delegate.load(precision="fp16"))
    assert (np.sign(saturated) != np.sign(ref)).sum() > 10  # what auto must not give
    delegate = clgpu_delegate.load(precision="auto")
    got = _run(model, runtime, BIG, delegate, times=2)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
    np.testing.assert_array_equal(np.sign(got), np.sign(ref))
    assert delegate.stats().fp32_fallback_ops == [0]
    assert delegate.stats().fp16_saturated_ops == []


@pytest.mark.usefixtures("auto_is_fp16")
def test_auto_falls_back_on_a_value_inside_the_partition(runtime: str) -> None:
    """conv -> MUL by 1e5 -> conv on N(0, 1) inputs: the MUL's output leaves the range, the conv
    after it reads it; the first conv stays fp16 (its rounding: fp16's tolerance)."""
    model = _scaled_model()
    x = np.random.default_rng(5).standard_normal((1, 6, 6, 3)).astype(np.float32)
    ref = _run(model, runtime, x)
    delegate = clgpu_delegate.load(precision="auto")
    got = _run(model, runtime, x, delegate)
    np.testing.assert_allclose(got, ref, rtol=5e-3, atol=5e-3 * np.abs(ref).max())
    assert delegate.stats().fp32_fallback_ops == [1, 2]


@pytest.mark.usefixtures("auto_is_fp16")
def test_auto_in_range_stays_fp16(runtime: str) -> None:
    """Nothing falls back, and the outputs are precision="fp16"'s to the bit."""
    model = _conv3x3()
    x = BIG * 1e-5
    fp16 = _run(model, runtime, x, clgpu_delegate.load(precision="fp16"))
    delegate = clgpu_delegate.load(precision="auto")
    np.testing.assert_array_equal(_run(model, runtime, x, delegate, times=2), fp16)
    assert delegate.stats().fp32_fallback_ops == []
    assert delegate.stats().plans == 1


def test_fp16_says_once_which_op_saturated(runtime: str, capfd: pytest.CaptureFixture) -> None:
    model = _conv3x3()
    capfd.readouterr()
    delegate = clgpu_delegate.load(precision="fp16")
    first = _run(model, runtime, BIG, delegate, times=3)
    err = capfd.readouterr().err
    lines = [line for line in err.splitlines() if "past fp16's range" in line]
    assert len(lines) == 1 and "CONV_2D node 0" in lines[0], err
    assert delegate.stats().fp16_saturated_ops == [0]
    assert delegate.stats().fp32_fallback_ops == []
    # The output stays fp16's (saturated inputs), every invoke.
    np.testing.assert_array_equal(
        _run(model, runtime, BIG, clgpu_delegate.load(precision="fp16")), first
    )


def test_fp32_never_falls_back(runtime: str, capfd: pytest.CaptureFixture) -> None:
    model = _conv3x3()
    ref = _run(model, runtime, BIG)
    delegate = clgpu_delegate.load(precision="fp32")
    np.testing.assert_allclose(
        _run(model, runtime, BIG, delegate), ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max()
    )
    assert delegate.stats().fp32_fallback_ops == delegate.stats().fp16_saturated_ops == []
    assert "past fp16's range" not in capfd.readouterr().err


@pytest.mark.usefixtures("auto_is_fp16")
def test_auto_falls_back_after_the_cpu_warmup(runtime: str) -> None:
    """The first invoke on TFLite's CPU kernels, the next on the device: it falls back there."""
    model = _conv3x3()
    ref = _run(model, runtime, BIG)
    delegate = clgpu_delegate.load(precision="auto", cpu_warmup=True)
    it = make_interpreter(model, [delegate], runtime=runtime, reference=True)
    it.allocate_tensors()
    for _ in range(2):
        it.set_tensor(it.get_input_details()[0]["index"], BIG)
        it.invoke()
        delegate.wait_ready()
    got = it.get_tensor(it.get_output_details()[0]["index"])
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
    assert delegate.stats().cpu_invokes == 1 and delegate.stats().invokes == 1
    assert delegate.stats().fp32_fallback_ops == [0]


# Per-op fallback: values exact in fp16 (small integers) wherever an op stays fp16, so the
# outputs match the CPU to float32's tolerance only when every op past the range ran in float32.
INTS = np.random.default_rng(6).integers(-3, 4, (1, 4, 4, 4)).astype(np.float32)


def _int_weights(seed: int, scale: float = 1.0) -> np.ndarray:
    w = np.random.default_rng(seed).integers(-2, 3, (4, 1, 1, 4)).astype(np.float32)
    return w * np.float32(scale)


def _run_all(model: bytes, runtime: str, xs: list[np.ndarray], delegate=None) -> list[np.ndarray]:
    it = make_interpreter(model, [delegate] if delegate else None, runtime=runtime, reference=True)
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), xs, strict=True):
        it.set_tensor(d["index"], x)
    it.invoke()
    return [it.get_tensor(d["index"]) for d in it.get_output_details()]


def _close(got: list[np.ndarray], ref: list[np.ndarray]) -> None:
    for g, r in zip(got, ref, strict=True):
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5 * np.abs(r).max())


def _chain() -> bytes:
    """conv -> conv -> conv: only the middle conv's output leaves fp16's range (x 2^16)."""
    b = ModelBuilder(seed=7)
    x = b.input("x", INTS.shape)
    y = b.conv2d(x, _int_weights(1))
    y = b.conv2d(y, _int_weights(2, 2.0**16))
    b.output(b.conv2d(y, _int_weights(3, 2.0**-16)))
    return b.build()


@pytest.mark.usefixtures("auto_is_fp16")
def test_auto_falls_back_per_op(runtime: str) -> None:
    model = _chain()
    ref = _run_all(model, runtime, [INTS])
    delegate = clgpu_delegate.load(precision="auto")
    _close(_run_all(model, runtime, [INTS], delegate), ref)
    # The middle conv stored past the range, the last one read it; the first stays fp16.
    assert delegate.stats().fp32_fallback_ops == [1, 2]
    assert delegate.stats().fp16_saturated_ops == []


def _two_inputs() -> bytes:
    """conv(x) + conv(y): x alone is past fp16's range (its conv scales it back)."""
    b = ModelBuilder(seed=8)
    x = b.input("x", INTS.shape)
    y = b.input("y", INTS.shape)
    a = b.conv2d(x, _int_weights(4, 2.0**-16))
    b.output(b.add(a, b.conv2d(y, _int_weights(5))))
    return b.build()


@pytest.mark.usefixtures("auto_is_fp16")
def test_auto_falls_back_on_the_reader_of_an_input_past_the_range(runtime: str) -> None:
    model = _two_inputs()
    big = [INTS * np.float32(2.0**16), INTS[:, ::-1].copy()]
    delegate = clgpu_delegate.load(precision="auto")
    it = make_interpreter(model, [delegate], runtime=runtime, reference=True)
    it.allocate_tensors()
    # Past the range, then inside it: the fallback stays, and stays right.
    for xs in (big, [INTS * np.float32(2.0**10), INTS], big):
        for d, x in zip(it.get_input_details(), xs, strict=True):
            it.set_tensor(d["index"], x)
        it.invoke()
        got = [it.get_tensor(d["index"]) for d in it.get_output_details()]
        _close(got, _run_all(model, runtime, xs))
        assert delegate.stats().fp32_fallback_ops == [0]


def _shared_constant() -> bytes:
    """x + c, and (x * 2^16) + c: the MUL and its ADD leave fp16's range, the first ADD does not."""
    b = ModelBuilder(seed=9)
    x = b.input("x", INTS.shape)
    c = b.const(np.arange(-2, 2, dtype=np.float32))
    b.output(b.add(x, c))
    b.output(b.add(b.mul(x, np.full(4, 2.0**16, np.float32)), c))
    return b.build()


@pytest.mark.usefixtures("auto_is_fp16")
def test_auto_a_constant_read_by_fp16_and_fp32_ops(runtime: str) -> None:
    model = _shared_constant()
    ref = _run_all(model, runtime, [INTS])
    delegate = clgpu_delegate.load(precision="auto")
    _close(_run_all(model, runtime, [INTS], delegate), ref)
    assert 0 not in delegate.stats().fp32_fallback_ops
    assert set(delegate.stats().fp32_fallback_ops) == {1, 2}


def _residual() -> bytes:
    """conv -> conv (x 2^16) + the first conv's output -> conv: the ADD may fold into the conv
    before it (a residual); either way the two run in float32 together, with the conv after."""
    b = ModelBuilder(seed=10)
    x = b.input("x", INTS.shape)
    c1 = b.conv2d(x, _int_weights(1))
    s = b.add(b.conv2d(c1, _int_weights(2, 2.0**16)), c1)
    b.output(b.conv2d(s, _int_weights(3, 2.0**-16)))
    return b.build()


@pytest.mark.usefixtures("auto_is_fp16")
@pytest.mark.parametrize("fuse_add", [True, False])
def test_auto_falls_back_a_folded_group(runtime: str, fuse_add: bool) -> None:
    model = _residual()
    ref = _run_all(model, runtime, [INTS])
    delegate = clgpu_delegate.load(precision="auto", fuse_add=fuse_add)
    _close(_run_all(model, runtime, [INTS], delegate), ref)
    assert delegate.stats().fp32_fallback_ops == [1, 2, 3]


SCALE_UP, SCALE_DOWN = np.float32(2.0**16), np.float32(2.0**-16)
# Readers of a value past fp16's range (x + 1, times 2^16), scaled back into it after.
READERS: dict[str, Callable[[ModelBuilder, int, int], int]] = {
    "RESHAPE": lambda b, m, a: b.reshape(m, (1, 16, 4)),
    "TRANSPOSE": lambda b, m, a: b.transpose(m, (0, 2, 1, 3)),
    "CONCATENATION": lambda b, m, a: b.concat([m, a], 3),
    "FULLY_CONNECTED": lambda b, m, a: b.fully_connected(b.reshape(m, (16, 4)), EYE),
    "MAX_POOL_2D": lambda b, m, a: b.max_pool2d(m, 2, 2),
    "SPLIT": lambda b, m, a: b.split(m, 3, 2)[1],
    "MEAN": lambda b, m, a: b.mean(m, (1, 2), keep_dims=True),
}


@pytest.mark.usefixtures("auto_is_fp16")
@pytest.mark.parametrize("reader", sorted(READERS))
def test_auto_readers_of_a_float32_value(runtime: str, reader: str) -> None:
    b = ModelBuilder(seed=11)
    x = b.input("x", INTS.shape)
    a = b.add(x, np.ones(4, np.float32))
    b.output(b.relu(a))  # the fp16 side, read on
    y = READERS[reader](b, b.mul(a, np.full(4, SCALE_UP)), a)
    b.output(b.mul(y, float(SCALE_DOWN)))
    model = b.build()
    ref = _run_all(model, runtime, [INTS])
    delegate = clgpu_delegate.load(precision="auto")
    _close(_run_all(model, runtime, [INTS], delegate), ref)
    fallback = delegate.stats().fp32_fallback_ops
    assert 0 not in fallback and 1 not in fallback and 2 in fallback, fallback
