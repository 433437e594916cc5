// What TRANSPOSE_CONV's float op (transpose_conv.cc) and int8 op (transpose_conv_int8.cc) share:
// the node's params, its output shape (constants, or a folded SHAPE -> PACK chain) and TFLite's
// padding. Defined in transpose_conv.cc.
#pragma once

#include <string>
#include <vector>

#include "graph/graph.h"

namespace clgpu {

// TfLiteTransposeConvParams: padding (1 SAME, 2 VALID), strides, then (newer runtimes) the fused
// activation, which older ones leave out: read only when the node's version has it.
struct TransposeConvParams {
  int padding, stride_width, stride_height, activation;
};

// The output shape: constants, or (from a folded SHAPE -> PACK chain) extents of the op's own
// input, kept as its axes so a resized input gets the CPU's shape.
struct TransposeConvShape {
  std::vector<int> dims;        // per output axis (when input_axis is -1)
  std::vector<int> input_axis;  // per output axis: the input axis it follows, or -1
};

// Reads the node: "" or why it cannot run (counts, params, constant weights [OC, KH, KW, IC]
// fitting the input, a constant bias of OC values, the output shape). Not the tensor types.
std::string ReadTransposeConv(const GraphView& g, const NodeInfo& node, TransposeConvShape* shape,
                              TransposeConvParams* p);
// The output shape for input `x`.
Shape TransposeConvOutput(const TransposeConvShape& s, const Shape& x);
// TFLite's padding before the first output (top or left) along one axis: that of the
// convolution this one transposes, from the output's size to the input's.
// LiteRT's check (tflite_runtime 2.14 has none and then reads past its input): the input must be
// what a convolution of the output with this filter, stride and padding gives. "" or why not.
std::string CheckTransposeConvGeometry(const Shape& x, const Shape& out, const Shape& filter,
                                       const TransposeConvParams& p);

// The output shape of an input x, or an Error saying why x does not fit this filter and output
// shape (both the float and the int8 op: TFLite's checks).
Shape InferTransposeConvShape(const TransposeConvShape& s, const TransposeConvParams& p,
                              const Shape& filter, const Shape& x);

int TransposeConvPad(const TransposeConvParams& p, int out_size, int stride, int k);

}  // namespace clgpu
