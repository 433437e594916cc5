"""The one table of convolution algorithm names (ops/conv2d_selector.cc) that the option
parser and the parity tests read."""

from __future__ import annotations

import pytest

import clgpu_delegate
from clgpu_delegate import _core


def test_conv_algorithm_names() -> None:
    assert _core.conv_algorithms() == [
        "direct",
        "implicit_gemm",
        "gemm",
        "winograd",
        "winograd4",
        "direct_blocked",
        "winograd4_fused",
    ]


@pytest.mark.parametrize("name", ["auto", *_core.conv_algorithms()])
def test_every_name_is_an_accepted_option_value(name: str) -> None:
    # load() raises ValueError for a value the parser does not know.
    with clgpu_delegate.load(conv_algorithm=name) as delegate:
        assert delegate.options["conv_algorithm"] == name


def test_unknown_name_lists_the_table() -> None:
    with pytest.raises(ValueError) as err:
        clgpu_delegate.load(conv_algorithm="fft")
    assert ", ".join(["auto", *_core.conv_algorithms()]) in str(err.value)
