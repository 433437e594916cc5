// Output size and padding arithmetic of TFLite's SAME/VALID convolutions, shared
// by CONV_2D and DEPTHWISE_CONV_2D.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "common/error.h"
#include "graph/graph.h"
#include "ops/op.h"

namespace clgpu {

// LiteRT's CONV_2D and DEPTHWISE_CONV_2D refuse an input without rows or columns (a pool before
// them left none); tflite_runtime 2.14's give an empty output. Throws as the CPU refuses.
inline void CheckConvInputRows(const char* op, const Shape& in, bool litert) {
  if (litert && in.size() == 4 && (in[1] == 0 || in[2] == 0))
    throw Error(std::string(op) + " input " + ShapeString(in) +
                " has no rows or columns (LiteRT's kernel refuses it)");
}

struct ConvGeometry {
  int n = 0, h = 0, w = 0, c = 0;  // input NHWC
  int kh = 0, kw = 0;              // filter spatial size
  int sh = 1, sw = 1, dh = 1, dw = 1;
  int oh = 0, ow = 0, oc = 0;
  int pad_top = 0, pad_left = 0;
  // A grouped convolution (CONV_2D whose filter reads c / groups channels): output channel o
  // reads the input channels of group o / (oc / groups). Only the direct algorithm runs it.
  int groups = 1;

  // padding: 1 SAME, 2 VALID. TFLite's arithmetic (C++ division): an input a little smaller
  // than the window gives an empty output (0 rows or columns), a smaller one a negative size,
  // which its convolutions refuse and so do we (runtime/partition_plan.cc, graph/validate.h).
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
  }
  // The same over an input that a folded PAD (`pad`, null: none) makes larger: its rows and
  // columns are padding, which every algorithm reads as zeros past the input's edges.
  void Compute(int padding, const InputPad* pad) {
    if (!pad) return Compute(padding);
    h += pad->top + pad->bottom, w += pad->left + pad->right;
    Compute(padding);
    h -= pad->top + pad->bottom, w -= pad->left + pad->right;
    pad_top += pad->top, pad_left += pad->left;
  }
  double Macs() const { return double(n) * oh * ow * oc * kh * kw * (c / groups); }
  // A 1x1 filter of stride 1 without padding: a plain GEMM of [N*H*W, C] by the filter.
  bool Pointwise() const {
    return kh == 1 && kw == 1 && sh == 1 && sw == 1 && pad_top == 0 && pad_left == 0 && oh == h &&
           ow == w;
  }

  // The convolution computing output box `out` (NHWC) alone, from a buffer holding
  // just the input box it reads (*in): explicit sizes, and the padding that box
  // sees (the window's offset from the first tap of its first output). Channels:
  // all input channels, out.size[3] outputs (depthwise narrows both).
  ConvGeometry Chunk(const Box& out, Box* in) const {
    ConvGeometry g = *this;
    int rows[2], cols[2];
    g.pad_top = Window(out.begin[1], out.size[1], sh, dh, kh, pad_top, h, rows);
    g.pad_left = Window(out.begin[2], out.size[2], sw, dw, kw, pad_left, w, cols);
    g.n = out.size[0], g.oh = out.size[1], g.ow = out.size[2], g.oc = out.size[3];
    g.h = rows[1] - rows[0], g.w = cols[1] - cols[0];
    in->begin = {out.begin[0], rows[0], cols[0], 0};
    in->size = {out.size[0], g.h, g.w, c};
    return g;
  }

 private:
  // Along one axis: the inputs [r[0], r[1]) that outputs [o0, o0 + count) read, and
  // the padding before r[0] as the chunk sees it.
  static int Window(int o0, int count, int stride, int dilation, int k, int pad, int size, int* r) {
    const int first_tap = o0 * stride - pad;
    const int end_tap = (o0 + count - 1) * stride - pad + (k - 1) * dilation + 1;
    r[0] = std::clamp(first_tap, 0, size);
    r[1] = std::clamp(end_tap, r[0], size);
    return r[0] - first_tap;
  }
};

// The clamp of a CONV_2D / DEPTHWISE_CONV_2D fused activation as TFLite's float kernels apply it:
// they take the activation's range (CalculateActivationRange), which is the whole float range
// for TANH, SIGN_BIT and SIGMOID, so those apply nothing (both runtimes, measured); false for a
// code that is no activation at all.
inline bool ConvActivationRange(int activation, float* lo, float* hi) {
  if (activation >= 4 && activation <= 6) return ActivationRange(0, lo, hi);
  return ActivationRange(activation, lo, hi);
}

// What CONV_2D and DEPTHWISE_CONV_2D check alike, float or int8: activation, padding, strides
// and dilations. "" if fine. The float kernels take TANH / SIGN_BIT as no activation
// (ConvActivationRange); the int8 kernels only clamps.
inline std::string CheckConvParams(int padding, int stride_w, int stride_h, int dilation_w,
                                   int dilation_h, int activation, bool float_kernel = false) {
  float lo, hi;
  if (!(float_kernel ? ConvActivationRange(activation, &lo, &hi)
                     : ActivationRange(activation, &lo, &hi)))
    return "fused activation " + std::to_string(activation) + " is not supported";
  if (padding != 1 && padding != 2) return "unknown padding";
  if (stride_w < 1 || stride_h < 1 || dilation_w < 1 || dilation_h < 1)
    return "invalid stride or dilation";
  // The runtimes store these as 16-bit in places (LiteRT refuses larger ones), and
  // our index arithmetic is 32-bit: leave such nodes to the CPU.
  constexpr int kMaxStep = 32767;
  if (std::max({stride_w, stride_h, dilation_w, dilation_h}) > kMaxStep)
    return "stride or dilation above " + std::to_string(kMaxStep);
  return "";
}

// The same, and float tensors with a constant filter (and bias). "" if fine.
inline std::string CheckConvCommon(const GraphView& g, const NodeInfo& node, int padding,
                                   int stride_w, int stride_h, int dilation_w, int dilation_h,
                                   int activation) {
  if (auto why =
          CheckConvParams(padding, stride_w, stride_h, dilation_w, dilation_h, activation, true);
      !why.empty())
    return why;
  std::vector<int> tensors = {node.inputs[0], node.inputs[1], node.outputs[0]};
  const bool has_bias = node.inputs.size() > 2 && node.inputs[2] >= 0;
  if (has_bias) tensors.push_back(node.inputs[2]);
  if (auto why = CheckFloatTensors(g, tensors); !why.empty()) return why;
  if (!g.IsConstant(node.inputs[1])) return "filter is not constant";
  if (has_bias && !g.IsConstant(node.inputs[2])) return "bias is not constant";
  return "";
}

}  // namespace clgpu
