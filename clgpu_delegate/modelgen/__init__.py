"""Pure-Python TFLite model generation: `ModelBuilder` and the benchmark model zoo (`zoo`)."""

from clgpu_delegate.modelgen.builder import ModelBuilder

__all__ = ["ModelBuilder"]
