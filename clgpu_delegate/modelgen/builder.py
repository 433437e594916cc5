"""Write float32 TFLite models (flatbuffers) from Python without TensorFlow.

`ModelBuilder` records tensors and builtin ops with their inferred static shapes and serialises them
with the generated `tflite` schema; tests and the benchmark zoo build their models with it. Each op
family lives in its own module (_conv, _elementwise, _shape, _window, _select, _sparse) on top
of _graph's tensors.
"""

from __future__ import annotations

import tflite

from clgpu_delegate.modelgen._attention import AttentionOps
from clgpu_delegate.modelgen._conv import ConvOps
from clgpu_delegate.modelgen._elementwise import ElementwiseOps
from clgpu_delegate.modelgen._quant import QuantOps
from clgpu_delegate.modelgen._select import SelectOps
from clgpu_delegate.modelgen._shape import ShapeOps
from clgpu_delegate.modelgen._sparse import SparseOps
from clgpu_delegate.modelgen._window import WindowOps

__all__ = ["ModelBuilder", "tflite"]


class ModelBuilder(
    AttentionOps, ConvOps, ElementwiseOps, ShapeOps, WindowOps, SelectOps, SparseOps, QuantOps
):
    """Builds a single-subgraph TFLite model; methods return tensor ids (ints).

    Shapes are static and inferred per op. Ops whose arguments do not fit raise ValueError.
    """
