// Sparse constants (TfLiteTensor::sparsity, the format of TFLite's schema): a tensor stored as
// its non-zero values plus per-level metadata, which a DENSIFY node expands. The delegate expands
// such constants itself at Prepare, so the weights behind a DENSIFY are constants of a partition.
#pragma once

#include <string>
#include <vector>

#include "tflite/abi.h"

namespace clgpu {

// The dense float values of sparse constant `t` (FLOAT32 or FLOAT16 data, dense shape t.dims),
// or why not: "" on success. Every array is checked, so a malformed tensor is refused, never
// read out of bounds.
std::string DensifyConstant(const TfLiteTensor& t, std::vector<float>* dense);

}  // namespace clgpu
