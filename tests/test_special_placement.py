"""Special values placed where the order of TFLite's CPU arithmetic shows (issue #45, point 5),
fp32, against stock TFLite CPU, NaN for NaN, +-Inf for +-Inf and the sign of every saturated
value:

- a NaN or +-Inf weight of DEPTHWISE_CONV_2D next to a padded border: the CPU kernel skips padded
  taps, so the outputs whose window reaches the border stay finite;
- the same weight in CONV_2D, every algorithm: the CPU's im2col multiplies the padded zeros by
  it, so those outputs are NaN (0 * NaN, 0 * Inf);
- +-3e38 through RESIZE_BILINEAR (half-pixel weights reach 1.5625 and -0.3125): each corner's
  weights multiply first and every product rounds before it is added, as the CPU's;
- +-3e38 through FULLY_CONNECTED (with and without RELU): sums saturate where the CPU's do.
"""

from __future__ import annotations

import numpy as np
import pytest
from parity import CONV_ALGORITHMS

import clgpu_delegate
from clgpu_delegate.modelgen import ModelBuilder
from clgpu_delegate.runtime import make_interpreter


def _outputs(model: bytes, runtime: str, x: np.ndarray, **options: str) -> list[np.ndarray]:
    out = []
    for delegate in (None, clgpu_delegate.load(partitioning="all", **options)):
        it = make_interpreter(
            model, [delegate] if delegate else None, runtime=runtime, reference=True
        )
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        out.append(np.array(it.get_tensor(it.get_output_details()[0]["index"])))
        if delegate is not None:
            assert all(d["delegated"] for d in delegate.decisions()), delegate.decisions()
    return out


def _same_specials(got: np.ndarray, ref: np.ndarray) -> None:
    """NaN where the CPU has NaN, equal infinities, saturated values of the same sign, and the
    finite rest within fp32 tolerance."""
    assert np.array_equal(np.isnan(got), np.isnan(ref)), (
        f"NaN: delegate {int(np.isnan(got).sum())}, cpu {int(np.isnan(ref).sum())}"
    )
    big = np.finfo(np.float32).max / 16
    with np.errstate(invalid="ignore"):
        extreme = ~np.isnan(ref) & (np.abs(ref.astype(np.float64)) >= big)
        assert np.array_equal(np.isinf(got), np.isinf(ref)), "+-Inf placed differently"
        assert np.array_equal(np.sign(got[extreme]), np.sign(ref[extreme])), "saturated signs"
        rest = ~np.isnan(ref) & ~extreme
        np.testing.assert_allclose(got[rest], ref[rest], rtol=1e-4, atol=1e-3)


def _weighted(kind: str, bad: float, k: int = 3, stride: int = 1) -> bytes:
    b = ModelBuilder(seed=3)
    x = b.input("x", (1, 9, 10, 4))
    if kind == "depthwise":
        w = b.rand((1, k, k, 4), 0.5)
        w[0, 0, 0, 1] = bad
        w[0, k - 1, k - 1, 3] = bad
        b.output(b.depthwise_conv2d(x, w, b.rand((4,)), stride=stride))
    else:
        w = b.rand((8, k, k, 4))
        w[2, 0, 0, 1] = bad
        w[5, k - 1, k // 2, 3] = bad
        b.output(b.conv2d(x, w, b.rand((8,)), stride=stride))
    return b.build()


X = np.random.default_rng(5).standard_normal((1, 9, 10, 4)).astype(np.float32)


@pytest.mark.parametrize("bad", [np.nan, np.inf], ids=["nan", "inf"])
@pytest.mark.parametrize(("k", "stride"), [(3, 1), (3, 2), (5, 1)])
def test_depthwise_weight_skips_the_padded_border(
    k: int, stride: int, bad: float, runtime: str
) -> None:
    got, ref = _outputs(_weighted("depthwise", bad, k, stride), runtime, X)
    if runtime == "tflite_runtime" and np.isnan(bad):
        # tflite_runtime 2.14's depthwise kernel turns NaN into a bound (docs/numerics.md): the
        # outputs that are NaN here must be those the CPU bounded, the border still finite.
        assert np.array_equal(np.isnan(got), np.abs(ref) == np.finfo(np.float32).max)
        return
    _same_specials(got, ref)


CONV_CASES = [(3, 1, a) for a in CONV_ALGORITHMS if a != "gemm"] + [
    (5, 1, "winograd4"),
    (5, 1, "direct"),
    (3, 2, "direct_blocked"),
]


@pytest.mark.parametrize("bad", [np.nan, np.inf], ids=["nan", "inf"])
@pytest.mark.parametrize(("k", "stride", "algorithm"), CONV_CASES)
def test_conv_weight_meets_the_padded_zeros(
    k: int, stride: int, algorithm: str, bad: float, runtime: str
) -> None:
    got, ref = _outputs(_weighted("conv", bad, k, stride), runtime, X, conv_algorithm=algorithm)
    _same_specials(got, ref)


def _resize(half_pixel: bool) -> bytes:
    b = ModelBuilder(seed=5)
    x = b.input("x", (1, 5, 6, 4))
    b.output(b.resize_bilinear(x, (9, 13), half_pixel_centers=half_pixel))
    return b.build()


@pytest.mark.parametrize("pattern", ["positive", "alternating", "random"])
@pytest.mark.parametrize("half_pixel", [False, True])
def test_resize_bilinear_near_flt_max(half_pixel: bool, pattern: str, runtime: str) -> None:
    x = np.full((1, 5, 6, 4), 3e38, np.float32)
    if pattern == "alternating":
        x[:, :, 1::2] = -3e38
    elif pattern == "random":
        signs = np.random.default_rng(2).random(x.shape) < 0.5
        x = np.where(signs, np.float32(3e38), np.float32(-3e38))
    got, ref = _outputs(_resize(half_pixel), runtime, x)
    _same_specials(got, ref)


@pytest.mark.parametrize("activation", [None, "RELU"])
@pytest.mark.parametrize(("m", "k"), [(1, 40), (1, 37), (3, 40), (5, 37), (16, 40)])
def test_fully_connected_near_flt_max(m: int, k: int, activation: str | None, runtime: str) -> None:
    """+-3e38 inputs: the small-batch kernel splits each sum over 128 work-items, whose partial
    sums overflowed to +Inf and -Inf (NaN) or to the other sign where TFLite's sum saturates at
    +-FLT_MAX; such outputs are summed again in the CPU's order (index order, or Eigen's 4 lanes
    for one row)."""
    b = ModelBuilder(seed=m + k)
    x = b.input("x", (m, k))
    b.output(b.fully_connected(x, b.rand((24, k)), b.rand((24,)), activation=activation))
    rng = np.random.default_rng(k)
    xs = np.where(rng.random((m, k)) < 0.5, np.float32(3e38), np.float32(-3e38))
    xs[:, ::3] = rng.standard_normal(xs[:, ::3].shape).astype(np.float32)
    got, ref = _outputs(b.build(), runtime, xs)
    _same_specials(got, ref)


@pytest.mark.parametrize("m", [1, 3])
def test_fully_connected_with_run_time_weights_near_flt_max(m: int, runtime: str) -> None:
    """Weights computed at run time: the kernel finds their largest |value| itself."""
    b = ModelBuilder(seed=9)
    x = b.input("x", (m, 40))
    w = b.add(b.input("w", (24, 40)), b.rand((40,)))
    b.output(b.fully_connected(x, w, b.rand((24,))))
    rng = np.random.default_rng(m)
    xs = np.where(rng.random((m, 40)) < 0.5, np.float32(3e38), np.float32(-3e38))
    ws = rng.standard_normal((24, 40)).astype(np.float32)
    outs = []
    for delegate in (None, clgpu_delegate.load(partitioning="all")):
        it = make_interpreter(
            b.build(), [delegate] if delegate else None, runtime=runtime, reference=True
        )
        it.allocate_tensors()
        for d, v in zip(it.get_input_details(), (xs, ws), strict=True):
            it.set_tensor(d["index"], v)
        it.invoke()
        outs.append(np.array(it.get_tensor(it.get_output_details()[0]["index"])))
    _same_specials(outs[1], outs[0])
