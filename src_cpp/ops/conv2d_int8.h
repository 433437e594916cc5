// The int8 branches of CONV_2D and DEPTHWISE_CONV_2D (conv2d_int8.cc, depthwise_conv2d_int8.cc):
// their ops' Check and Create hand a node over to these when its input is quantized.
#pragma once

#include <memory>
#include <string>

#include "ops/op.h"

namespace clgpu {

// What both check on int8 tensors: int8 input and output quantized per tensor, constant int8
// weights (zero points 0) per tensor or per output channel along `weight_axis` (`channels`
// scales), an optional constant int32 bias of `channels` values, and sums that stay in int32.
std::string CheckConvInt8Tensors(const GraphView& g, const NodeInfo& node, int weight_axis,
                                 int channels);

std::string CheckConv2dInt8(const GraphView& g, const NodeInfo& node);
std::unique_ptr<Op> CreateConv2dInt8(const GraphView& g, const NodeInfo& node);

std::string CheckDepthwiseConv2dInt8(const GraphView& g, const NodeInfo& node);
std::unique_ptr<Op> CreateDepthwiseConv2dInt8(const GraphView& g, const NodeInfo& node);

}  // namespace clgpu
