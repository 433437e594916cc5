"""Pure-Python TFLite model generation: `ModelBuilder` and the benchmark model zoo (`zoo`)."""

from clgpu_delegate._errors import require_extra

# Before the submodules import them: one clear line instead of a bare ModuleNotFoundError.
require_extra("models", "the model builder (clgpu_delegate.modelgen)", "tflite", "flatbuffers")

from clgpu_delegate.modelgen._dynamic_range import dynamic_range_model  # noqa: E402
from clgpu_delegate.modelgen._ptq import quantize_model  # noqa: E402
from clgpu_delegate.modelgen.builder import ModelBuilder  # noqa: E402

__all__ = ["ModelBuilder", "dynamic_range_model", "quantize_model"]
