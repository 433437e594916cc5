// Output size and padding arithmetic of TFLite's SAME/VALID convolutions, shared
// by CONV_2D and DEPTHWISE_CONV_2D.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "ops/op.h"

namespace clgpu {

struct ConvGeometry {
  int n = 0, h = 0, w = 0, c = 0;  // input NHWC
  int kh = 0, kw = 0;              // filter spatial size
  int sh = 1, sw = 1, dh = 1, dw = 1;
  int oh = 0, ow = 0, oc = 0;
  int pad_top = 0, pad_left = 0;

  // padding: 1 SAME, 2 VALID. An input smaller than the filter gives an empty
  // output (0 rows or columns), as on the CPU.
  void Compute(int padding) {
    const int ekh = (kh - 1) * dh + 1, ekw = (kw - 1) * dw + 1;
    if (padding == 1) {
      oh = (h + sh - 1) / sh;
      ow = (w + sw - 1) / sw;
      pad_top = std::max((oh - 1) * sh + ekh - h, 0) / 2;
      pad_left = std::max((ow - 1) * sw + ekw - w, 0) / 2;
    } else {
      oh = (h - ekh + sh) / sh;
      ow = (w - ekw + sw) / sw;
      pad_top = pad_left = 0;
    }
    oh = std::max(oh, 0);
    ow = std::max(ow, 0);
  }
  double Macs() const { return double(n) * oh * ow * oc * kh * kw * c; }
};

// What CONV_2D and DEPTHWISE_CONV_2D check alike: activation, padding, strides
// and dilations, and float tensors with a constant filter (and bias). "" if fine.
inline std::string CheckConvCommon(const GraphView& g, const NodeInfo& node, int padding,
                                   int stride_w, int stride_h, int dilation_w, int dilation_h,
                                   int activation) {
  float lo, hi;
  if (!ActivationRange(activation, &lo, &hi))
    return "fused activation " + std::to_string(activation) + " is not supported";
  if (padding != 1 && padding != 2) return "unknown padding";
  if (stride_w < 1 || stride_h < 1 || dilation_w < 1 || dilation_h < 1)
    return "invalid stride or dilation";
  // The runtimes store these as 16-bit in places (LiteRT refuses larger ones), and
  // our index arithmetic is 32-bit: leave such nodes to the CPU.
  constexpr int kMaxStep = 32767;
  if (std::max({stride_w, stride_h, dilation_w, dilation_h}) > kMaxStep)
    return "stride or dilation above " + std::to_string(kMaxStep);
  std::vector<int> tensors = {node.inputs[0], node.inputs[1], node.outputs[0]};
  const bool has_bias = node.inputs.size() > 2 && node.inputs[2] >= 0;
  if (has_bias) tensors.push_back(node.inputs[2]);
  if (auto why = CheckFloatTensors(g, tensors); !why.empty()) return why;
  if (!g.IsConstant(node.inputs[1])) return "filter is not constant";
  if (has_bias && !g.IsConstant(node.inputs[2])) return "bias is not constant";
  return "";
}

}  // namespace clgpu
