"""A short-time Fourier transform's ops on the device (ops/spectral.cc, ops/reverse.cc): RFFT2D
with fft_length [1, n], its complex64 bins through SQUEEZE / RESHAPE, CAST to float (the real
parts), REAL, IMAG, COMPLEX_ABS, and REVERSE_V2. Checked against TFLite's CPU kernels and numpy's
FFT; an STFT front end and the network after it run as one partition."""

from __future__ import annotations

import numpy as np
import pytest
from parity import check_parity

from clgpu_delegate.modelgen import ModelBuilder


def spectrum_model(shape: tuple[int, ...], n: int) -> bytes:
    b = ModelBuilder(seed=1)
    x = b.input("frames", shape)
    z = b.rfft2d(x, (1, n))
    b.output(b.real(z))
    b.output(b.imag(z))
    b.output(b.complex_abs(z))
    b.output(b.cast(z, "float32"))
    return b.build()


@pytest.mark.parametrize(
    "shape,n",
    [((2, 7, 1, 64), 64), ((3, 1, 100), 64), ((5, 1, 40), 64), ((2, 3, 16), 16), ((1, 1, 8), 2)],
    ids=["frames", "cropped", "zero_padded", "rows_beyond_the_first", "two_points"],
)
def test_rfft2d_matches_tflite_and_numpy(shape: tuple[int, ...], n: int, runtime: str) -> None:
    r = check_parity(spectrum_model(shape, n), runtime, expect_delegated="all")
    x = r.inputs[0][..., :1, :n]  # fft_length [1, n]: the first row of each block, n points
    want = np.fft.rfft(x.astype(np.float64), n=n, axis=-1)
    re, im, mag, cast = r.outputs
    tol = 1e-5 * max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(re, want.real, atol=tol)
    np.testing.assert_allclose(im, want.imag, atol=tol)
    np.testing.assert_allclose(mag, np.abs(want), atol=tol)
    np.testing.assert_array_equal(cast, re)  # CAST keeps the real part, as TFLite's does


def stft_network(frames: int, n: int, mels: int = 12) -> bytes:
    """BirdNET's front end in small: frames windowed, transformed, the real parts through a mel
    matrix, flipped along the bins, then a conv network."""
    b = ModelBuilder(seed=2)
    x = b.input("frames", (1, frames, n))
    win = np.hanning(n).astype(np.float32)
    z = b.rfft2d(b.expand_dims(b.mul(x, win), 2), (1, n))  # (1, frames, 1, n // 2 + 1)
    spec = b.cast(b.squeeze(z, (2,)), "float32")
    mel = b.fully_connected(b.reshape(spec, (frames, n // 2 + 1)), b.rand((mels, n // 2 + 1)))
    mel = b.reverse_v2(b.reshape(b.mul(mel, mel), (1, frames, mels)), (2,))
    img = b.reshape(b.transpose(mel, (0, 2, 1)), (1, mels, frames, 1))
    y = b.conv2d(img, b.rand((8, 3, 3, 1)), activation="RELU")
    b.output(b.mean(y, (1, 2)))
    return b.build()


def test_an_stft_front_end_and_its_network_are_one_partition(runtime: str) -> None:
    check_parity(stft_network(9, 32), runtime, expect_delegated="all", expect_partitions=1)


def test_an_stft_front_end_in_half_storage(runtime: str) -> None:
    check_parity(
        stft_network(9, 32),
        runtime,
        expect_delegated="all",
        precision="fp16",
        rtol=2e-2,
        atol=2e-2,
    )


def test_a_two_dimensional_transform_stays_on_the_cpu(runtime: str) -> None:
    b = ModelBuilder(seed=3)
    x = b.input("x", (1, 4, 8))
    b.output(b.complex_abs(b.rfft2d(x, (4, 8))))
    r = check_parity(b.build(), runtime, expect_cpu={"RFFT2D"})
    rfft = next(d for d in r.decisions if d["op_name"] == "RFFT2D")
    assert "only [1, n] is claimed" in rfft["reason"], rfft


@pytest.mark.parametrize("axis", [0, -1, 2])
def test_reverse_v2(axis: int, runtime: str) -> None:
    b = ModelBuilder(seed=4)
    x = b.input("x", (2, 3, 4, 5))
    b.output(b.reverse_v2(b.add(x, np.array(1, np.float32)), (axis,)))
    r = check_parity(b.build(), runtime, expect_delegated="all")
    np.testing.assert_array_equal(r.outputs[0], np.flip(r.inputs[0] + 1, axis))


def test_reverse_v2_over_two_axes_stays_on_the_cpu(runtime: str) -> None:
    # The runtimes disagree on it (tflite_runtime 2.14 reverses the first axis alone).
    b = ModelBuilder(seed=5)
    x = b.input("x", (2, 3, 4, 5))
    b.output(b.reverse_v2(b.add(x, np.array(1, np.float32)), (1, 2)))
    check_parity(b.build(), runtime, expect_cpu={"REVERSE_V2"})


def test_reverse_v2_in_chunks_within_a_tiny_allocation(runtime: str) -> None:
    # An index map like the slices (ops/strided_copy.h): it runs in chunks where a buffer is large.
    b = ModelBuilder(seed=6)
    x = b.input("x", (4, 16, 24))
    b.output(b.reverse_v2(b.add(x, np.array(1, np.float32)), (1,)))
    r = check_parity(b.build(), runtime, expect_delegated="all", max_alloc_bytes=2048)
    np.testing.assert_array_equal(r.outputs[0], np.flip(r.inputs[0] + 1, 1))
    assert r.delegate.memory()["chunked_ops"] >= 1
