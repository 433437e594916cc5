// TRANSPOSE_CONV (Keras' Conv2DTranspose) of float NHWC tensors: weights [OC, KH, KW, IC], an
// output shape input, optional bias, fused clamp activation. One work-item per output element
// gathers the input pixels whose strided taps land on it.
#include "ops/transpose_conv.h"

#include <algorithm>
#include <climits>
#include <cstring>

#include "common/error.h"
#include "ops/int8_ops.h"
#include "ops/op.h"
#include "tflite/builtin.h"

namespace clgpu {

std::string CheckTransposeConvGeometry(const Shape& x, const Shape& out, const Shape& filter,
                                       const TransposeConvParams& p) {
  for (int a : {1, 2}) {
    const int s = a == 1 ? p.stride_height : p.stride_width, k = filter[a];
    const int64_t want =
        p.padding == 1 ? (int64_t(out[a]) + s - 1) / s : (int64_t(out[a]) - k + s) / s;
    if (want != x[a])
      return "TRANSPOSE_CONV input " + ShapeString(x) + " is not what its output " +
             ShapeString(out) + " gives with this filter and stride (" + std::to_string(want) +
             " along axis " + std::to_string(a) + ")";
  }
  return "";
}

// The output shape input of the node.
static std::string ReadOutputShape(const GraphView& g, const NodeInfo& node,
                                   TransposeConvShape* s) {
  const int t = node.inputs[0];
  if (!g.valid_tensor(t) || NumElements(g.shape(t)) != 4)
    return "TRANSPOSE_CONV output shape must have 4 elements";
  s->dims.assign(4, 0);
  s->input_axis.assign(4, -1);
  if (const GraphView::FoldedInts* f = g.FoldedIntsOf(t)) {
    for (int a = 0; a < 4; ++a) {
      const GraphView::DimSource& src = f->from[a];
      if (src.tensor == node.inputs[2]) {
        s->input_axis[a] = src.axis;
      } else if (src.derived()) {
        return "TRANSPOSE_CONV output shape follows the extents of another tensor";
      } else if (f->values[a] < 1 || f->values[a] > INT_MAX) {
        return "TRANSPOSE_CONV output shape is out of range";
      } else {
        s->dims[a] = static_cast<int>(f->values[a]);
      }
    }
    return "";
  }
  std::vector<int64_t> v;
  if (auto why = g.ReadConstantInts(t, "TRANSPOSE_CONV output shape", &v); !why.empty()) return why;
  for (int a = 0; a < 4; ++a) {
    if (v[a] < 1 || v[a] > INT_MAX) return "TRANSPOSE_CONV output shape is out of range";
    s->dims[a] = static_cast<int>(v[a]);
  }
  return "";
}

std::string ReadTransposeConv(const GraphView& g, const NodeInfo& node, TransposeConvShape* shape,
                              TransposeConvParams* p) {
  if (node.inputs.size() < 3 || node.inputs.size() > 4 || node.outputs.size() != 1)
    return "unexpected input/output count";
  if (!node.builtin_data) return "missing TRANSPOSE_CONV params";
  std::memcpy(p, node.builtin_data, 3 * sizeof(int));
  // The activation field exists from op version 4 (and in both runtimes' params structs).
  p->activation = 0;
  if (node.version >= 4)
    std::memcpy(&p->activation, static_cast<const char*>(node.builtin_data) + 3 * sizeof(int),
                sizeof(int));
  float lo, hi;
  if (!ActivationRange(p->activation, &lo, &hi))
    return "fused activation " + std::to_string(p->activation) + " is not supported";
  if (p->padding != 1 && p->padding != 2) return "unknown padding";
  if (p->stride_width < 1 || p->stride_height < 1 || p->stride_width > 64 || p->stride_height > 64)
    return "invalid stride";
  // The data input may be -1 in a damaged model (CheckNodeCommon lets absent inputs through):
  // its shape would be read from before TFLite's tensor array.
  if (!g.valid_tensor(node.inputs[2])) return "TRANSPOSE_CONV input is absent";
  const int w = node.inputs[1];
  if (!g.valid_tensor(w) || !g.IsConstant(w)) return "TRANSPOSE_CONV weights are not constant";
  const Shape ws = g.shape(w), xs = g.shape(node.inputs[2]);
  if (ws.size() != 4 || xs.size() != 4 || ws[3] != xs[3])
    return "TRANSPOSE_CONV weights " + ShapeString(ws) + " do not fit input " + ShapeString(xs);
  if (NumElements(ws) <= 0) return "TRANSPOSE_CONV weights " + ShapeString(ws) + " are empty";
  if (node.inputs.size() == 4 && node.inputs[3] >= 0) {
    const int b = node.inputs[3];
    if (!g.valid_tensor(b) || !g.IsConstant(b) || NumElements(g.shape(b)) != ws[0])
      return "TRANSPOSE_CONV bias is not a constant of the output channels";
  }
  if (auto why = ReadOutputShape(g, node, shape); !why.empty()) return why;
  return "";
}

Shape TransposeConvOutput(const TransposeConvShape& s, const Shape& x) {
  Shape out(4);
  for (int a = 0; a < 4; ++a) out[a] = s.input_axis[a] >= 0 ? x[s.input_axis[a]] : s.dims[a];
  return out;
}

Shape InferTransposeConvShape(const TransposeConvShape& s, const TransposeConvParams& p,
                              const Shape& filter, const Shape& x) {
  if (x.size() != 4) throw Error("TRANSPOSE_CONV input " + ShapeString(x) + " is not 4-D");
  if (x[3] != filter[3])
    throw Error("TRANSPOSE_CONV input " + ShapeString(x) + " has not the filter's " +
                std::to_string(filter[3]) + " channels");
  const Shape out = TransposeConvOutput(s, x);
  if (out[0] != x[0] || out[3] != filter[0])
    throw Error("TRANSPOSE_CONV output shape " + ShapeString(out) + " does not fit input " +
                ShapeString(x) + " and filter " + ShapeString(filter));
  if (auto why = CheckTransposeConvGeometry(x, out, filter, p); !why.empty()) throw Error(why);
  return out;
}

int TransposeConvPad(const TransposeConvParams& p, int out_size, int stride, int k) {
  if (p.padding != 1) return 0;
  const int conv_out = (out_size + stride - 1) / stride;
  return std::max((conv_out - 1) * stride + k - out_size, 0) / 2;
}

namespace {

class TransposeConvOp : public Op, public FoldTarget {
 public:
  TransposeConvOp(const NodeInfo& node, TransposeConvShape shape, TransposeConvParams p,
                  std::vector<float> filter, Shape filter_shape, std::vector<float> bias)
      : Op(node, {node.inputs[2]}, {node.outputs[0]}),
        shape_(std::move(shape)),
        p_(p),
        filter_(std::move(filter)),
        filter_shape_(std::move(filter_shape)),
        bias_(std::move(bias)) {
    ActivationRange(p.activation, &act_min_, &act_max_);
  }
  const char* type_name() const override { return "TRANSPOSE_CONV"; }
  std::string algorithm() const override { return "gather"; }
  const FoldTarget* fold_target() const override { return this; }
  bool GetClamp(float* lo, float* hi) const override {
    *lo = act_min_, *hi = act_max_;
    return true;
  }

  std::vector<Shape> InferShapes(const std::vector<Shape>& in) const override {
    return {InferTransposeConvShape(shape_, p_, filter_shape_, in.at(0))};
  }
  double Flops(const std::vector<Shape>& in, const std::vector<Shape>&) const override {
    return 2.0 * static_cast<double>(NumElements(in[0])) * filter_shape_[0] * filter_shape_[1] *
           filter_shape_[2];
  }
  double WeightBytes() const override { return 4.0 * static_cast<double>(filter_.size()); }

  void Prepare(OpContext& ctx, const std::vector<Shape>& in_shapes,
               const std::vector<Shape>& out_shapes, const std::vector<cl_mem>& in,
               const std::vector<cl_mem>& out) override {
    if (!weights_) {
      weights_ = UploadWeights(ctx, filter_);
      bias_buf_ = UploadFloat32(ctx, bias_);
    }
    const Shape &x = in_shapes[0], &o = out_shapes[0];
    const int kh = filter_shape_[1], kw = filter_shape_[2];
    const int pad_top = TransposeConvPad(p_, o[1], p_.stride_height, kh),
              pad_left = TransposeConvPad(p_, o[2], p_.stride_width, kw);
    const auto [lo, hi] = ClampBounds(act_min_, act_max_);
    Launch l;
    l.name = "transpose_conv";
    l.kernel = CreateKernel(*ctx.GetProgram("transpose_conv"), l.name);
    SetArgs(l.kernel, in[0], weights_.get(), bias_buf_.get(), out[0], x[0], x[1], x[2], x[3], o[1],
            o[2], o[3], kh, kw, p_.stride_height, p_.stride_width, pad_top, pad_left, lo, hi);
    l.global[0] = static_cast<size_t>(NumElements(o));
    launches_.clear();
    launches_.push_back(std::move(l));
  }

 private:
  TransposeConvShape shape_;
  TransposeConvParams p_;
  std::vector<float> filter_;
  Shape filter_shape_;
  std::vector<float> bias_;
  float act_min_ = 0, act_max_ = 0;
  Buffer weights_, bias_buf_;
};

std::string Check(const GraphView& g, const NodeInfo& node) {
  TransposeConvShape shape;
  TransposeConvParams p;
  if (auto why = ReadTransposeConv(g, node, &shape, &p); !why.empty()) return why;
  // Quantized tensors: transpose_conv_int8.cc.
  const bool quantized = IsQuantized(g.value_type(node.inputs[2]));
  if (auto why = quantized ? CheckTransposeConvInt8(g, node)
                           : CheckFloatTensors(g, {node.inputs[2], node.outputs[0]});
      !why.empty())
    return why;
  const Shape x = g.shape(node.inputs[2]);
  const Shape out = TransposeConvOutput(shape, x);
  if (out[0] != x[0] || out[3] != g.shape(node.inputs[1])[0])
    return "TRANSPOSE_CONV output shape " + ShapeString(out) + " does not fit its input and filter";
  return CheckTransposeConvGeometry(x, out, g.shape(node.inputs[1]), p);
}

std::unique_ptr<Op> Create(const GraphView& g, const NodeInfo& node) {
  TransposeConvShape shape;
  TransposeConvParams p;
  if (auto why = ReadTransposeConv(g, node, &shape, &p); !why.empty()) throw Error(why);
  if (IsQuantized(g.value_type(node.inputs[2]))) return CreateTransposeConvInt8(g, node);
  const Shape ws = g.shape(node.inputs[1]);
  std::vector<float> bias(ws[0], 0.0f);
  if (node.inputs.size() == 4 && node.inputs[3] >= 0) bias = g.ConstantFloats(node.inputs[3]);
  return std::make_unique<TransposeConvOp>(node, std::move(shape), p,
                                           g.ConstantFloats(node.inputs[1]), ws, std::move(bias));
}

std::string Describe(const NodeInfo& n) {
  int v[3];
  std::memcpy(v, n.builtin_data, sizeof v);
  return "padding=" + std::to_string(v[0]) + " stride=" + std::to_string(v[1]) + "," +
         std::to_string(v[2]);
}

double Work(const GraphView& g, const NodeInfo& n) {
  // Every input element meets every weight of its channel once: 2 x input x OC x KH x KW.
  const Shape w = g.shape(n.inputs[1]);
  return 2.0 * static_cast<double>(NumElements(g.shape(n.inputs[2]))) * NumElements(w) /
         std::max(1, w.empty() ? 1 : w.back());
}

}  // namespace

// The handler's fields in order (ops/op_handler.h), a few lines rather than one a field.
// clang-format off
extern const OpHandler kTransposeConvHandler = {
    tfl::kTransposeConv, "TRANSPOSE_CONV", Check, Create, Describe, Work, false, true, nullptr,
    false, 0, true};
// clang-format on

}  // namespace clgpu
