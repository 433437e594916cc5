// What CONV_2D's float and int8 ops (conv2d.cc, conv2d_int8.cc) share: the node's parameters
// and filter shape, the geometry an input shape gives (a chunk's fixed one; a folded
// depthwise's output and a folded PAD counted), the output shape with its checks, the work, and
// the boxes of chunks. Each op keeps its weights, its algorithms and its launches.
#pragma once

#include <string>
#include <vector>

#include "common/error.h"
#include "ops/conv_geometry.h"
#include "ops/op.h"
#include "tflite/builtin.h"

namespace clgpu {

class ConvOpBase : public Op, public Chunker, public FoldTarget, public FoldSource {
 public:
  const char* type_name() const override { return "CONV_2D"; }
  const Chunker* chunker() const override { return this; }
  const FoldTarget* fold_target() const override { return this; }
  FoldSource* fold_source() override { return this; }

  std::vector<Shape> InferShapes(const std::vector<Shape>& in) const override {
    const Shape& x = Own(in[0]);
    const Shape& f = filter_shape_;
    const bool channels_fit =
        x.size() == 4 && f.size() == 4 && f[3] > 0 &&
        (grouped_ ? x[3] >= f[3] && x[3] % f[3] == 0 && f[0] % (x[3] / f[3]) == 0 : x[3] == f[3]);
    if (!channels_fit)
      throw Error("CONV_2D input " + ShapeString(x) + " does not match filter " + ShapeString(f));
    CheckConvInputRows("CONV_2D", x, litert_);
    const ConvGeometry g = Geometry(in[0]);
    const Shape out = {g.n, g.oh, g.ow, g.oc};
    // A residual is input 1; folded PRELU slopes come last.
    if (has_residual() && (in.size() < 2 || in[1] != out))
      throw Error("CONV_2D output " + ShapeString(out) + " and the residual of its fused ADD " +
                  (in.size() >= 2 ? ShapeString(in[1]) : std::string("(none)")) + " differ");
    if (has_gate() && (in.size() <= gate_input() || NumElements(in[gate_input()]) != g.c))
      throw Error("CONV_2D input " + ShapeString(x) + " and the gate of its folded MUL differ");
    if (has_slopes() && (in.size() < 2 || NumElements(in.back()) != out[3]))
      throw Error("CONV_2D output " + ShapeString(out) + " and the slopes of its folded PRELU " +
                  (in.size() >= 2 ? ShapeString(in.back()) : std::string("(none)")) + " differ");
    return {out};
  }

  double Flops(const std::vector<Shape>& in, const std::vector<Shape>&) const override {
    return 2.0 * Geometry(in[0]).Macs() +
           (has_residual() ? double(NumElements(InferShapes(in)[0])) : 0.0) +
           (folded_depthwise() ? folded_depthwise()->Flops({DepthwiseInput(in[0])}, {}) : 0.0) +
           (folded_expand() ? folded_expand()->Flops({in[0]}, {}) : 0.0);
  }

  // Chunks: boxes of the output, output channels first while a chunk's weights do not fit.
  bool GetChunkSpec(const std::vector<Shape>& in, ChunkSpec* spec) const override {
    // Folded only where neither op runs in chunks.
    if (folded_depthwise() || input_affine() || has_gate()) return false;
    const Shape out = InferShapes(in)[0];
    // A residual is read exactly where the output is written: its view and boxes are the output's.
    spec->views =
        has_residual() ? std::vector<Shape>{in[0], out, out} : std::vector<Shape>{in[0], out};
    spec->weight_axes = {3};
    // A grouped convolution's chunks keep every channel (a range of outputs reads its groups).
    if (filter_shape_[3] != in[0][3])
      spec->axes = {0, 1, 2};
    else
      spec->axes = {0, 1, 2, 3};
    return true;
  }
  std::vector<Box> ChunkInputs(const std::vector<Shape>& in, const Box& out) const override {
    Box box;
    Geometry(in[0]).Chunk(out, &box);
    if (has_residual()) return {box, out};
    return {box};
  }

 protected:
  // The whole op. grouped: input channels may be a multiple of the filter's (float only).
  ConvOpBase(const GraphView& g, const NodeInfo& node, const tfl::ConvParams& p, bool grouped)
      : Op(node, {node.inputs[0]}, {node.outputs[0]}),
        params_(p),
        filter_shape_(g.shape(node.inputs[1])),
        litert_(g.cpu_kernels().litert),
        grouped_(grouped) {}
  // A chunk: this geometry exactly, output channels from oc0 on.
  ConvOpBase(const ConvOpBase& whole, const ConvGeometry& g, int oc0)
      : Op(whole.node_index()),
        params_(whole.params_),
        filter_shape_(whole.filter_shape_),
        litert_(whole.litert_),
        grouped_(whole.grouped_),
        chunk_(true),
        fixed_(g),
        oc0_(oc0) {}

  // Input 0's shape as this op sees it: a folded depthwise's output, not its input; with a
  // depthwise-separable chain, its own block's depthwise output (that depthwise's input shape).
  const Shape& Own(const Shape& in) const {
    if (folded_depthwise()) return depthwise_shape();
    return ds_chain().empty() ? in : ds_chain().back().shape;
  }

  ConvGeometry Geometry(const Shape& in_as_read) const {
    const Shape& in = Own(in_as_read);
    if (chunk_) {
      if (in != Shape{fixed_.n, fixed_.h, fixed_.w, fixed_.c})
        throw Error("CONV_2D chunk input " + ShapeString(in) + " does not match its geometry");
      return fixed_;
    }
    const Shape& f = filter_shape_;
    ConvGeometry g;
    g.n = in[0], g.h = in[1], g.w = in[2], g.c = in[3];
    g.oc = f[0], g.kh = f[1], g.kw = f[2];
    g.groups = g.c / f[3];
    g.sh = params_.stride_height, g.sw = params_.stride_width;
    g.dh = params_.dilation_height, g.dw = params_.dilation_width;
    g.Compute(params_.padding, folded_pad());
    return g;
  }

  tfl::ConvParams params_;
  Shape filter_shape_;   // OHWI
  bool litert_ = false;  // the CPU kernels are LiteRT's (CheckConvInputRows)
  bool grouped_ = false;
  bool chunk_ = false;
  ConvGeometry fixed_;  // a chunk's geometry
  int oc0_ = 0;         // a chunk's first output channel
};

}  // namespace clgpu
