// CONV_2D's weights (ops/conv2d.cc): the host filter and bias and their device forms, kept
// apart from the op so that its file stays within the size the source rules allow.
#pragma once

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "graph/graph.h"
#include "ops/conv2d_selector.h"
#include "ops/conv_geometry.h"
#include "ops/op.h"
#include "ops/op_helpers.h"

namespace clgpu {

// The filter and bias on the host and their device copies per algorithm and range
// of output channels, shared by the op and its chunks (each range uploaded once).
struct ConvSource {
  Shape filter_shape;  // OHWI
  LazyConstant filter;
  std::vector<float> bias;
  std::map<std::tuple<ConvAlgorithm, int, int>, std::shared_ptr<ConvWeights>> weights;
  std::map<std::pair<int, int>, Buffer> biases;

  const ConvWeights& Weights(OpContext& ctx, ConvAlgorithm a, const ConvGeometry& g, int oc0) {
    std::shared_ptr<ConvWeights>& w = weights[{a, oc0, g.oc}];
    if (w) return *w;
    const std::vector<float>& f = filter.values();
    if (oc0 == 0 && g.oc == filter_shape[0]) {
      w = PrepareConvWeights(ctx, a, g, f);
    } else {
      const size_t per = size_t(g.kh) * g.kw * filter_shape[3];  // OHWI: a range of O is contiguous
      w = PrepareConvWeights(
          ctx, a, g, std::vector<float>(f.begin() + oc0 * per, f.begin() + (oc0 + g.oc) * per));
    }
    return *w;
  }
  cl_mem Bias(OpContext& ctx, int oc0, int count) {
    Buffer& b = biases[{oc0, count}];
    if (!b)
      b = UploadFloat32(ctx, std::vector<float>(bias.begin() + oc0, bias.begin() + oc0 + count));
    return b.get();
  }
  // Whether a weight is NaN or +-Inf (worked out once). TFLite's CPU convolution (im2col and a
  // GEMM) multiplies the zeros of the padded border by every weight, so such a weight makes
  // NaN in each output whose window reaches the border; the direct, blocked and Winograd
  // algorithms skip those taps.
  bool NonFinite() {
    if (nonfinite < 0) {
      const std::vector<float>& f = filter.values();
      nonfinite = std::any_of(f.begin(), f.end(), [](float v) { return !std::isfinite(v); });
    }
    return nonfinite > 0;
  }
  int nonfinite = -1;
  // Whether Winograd would spread an outlier weight (WinogradSpreadsOutlier), worked out once.
  bool Outlier() {
    if (outlier < 0) outlier = WinogradSpreadsOutlier(filter.values());
    return outlier > 0;
  }
  int outlier = -1;
  size_t Bytes() const {
    size_t n = 0;
    for (const auto& [k, w] : weights) n += w->filter.bytes() + w->plain.bytes();
    for (const auto& [k, b] : biases) n += b.bytes();
    return n;
  }
};

}  // namespace clgpu
