// RESHAPE, SQUEEZE and EXPAND_DIMS of float, quantized or int32 tensors: the same elements in
// the same (row-major) order under another shape. No kernel: the partition copies the input's
// buffer into the output's (Op::IsFlatCopy), piece by piece where a tensor is larger than one
// buffer. The new shape must be known when the partition is planned, so a
// target or axis computed at run time (a dynamic output on the CPU) is declined.
#include <algorithm>
#include <climits>
#include <cstring>

#include "common/error.h"
#include "ops/op.h"
#include "ops/quant.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

enum class Kind { kReshape, kSqueeze, kExpandDims };

// How the output shape follows from the input's. Kept as the rule, not as one shape: an
// input resized by resize_tensor_input gets the shape the CPU kernel would give it.
struct Rule {
  Kind kind = Kind::kReshape;
  std::vector<int> dims;  // RESHAPE: the target (one -1 allowed); SQUEEZE: axes (none: all 1s)
  // RESHAPE with a target computed from shapes: per element, the extents (shape, axis) whose
  // product times dims[i] it is, shape 0 the input's, k > 0 that of foreign[k - 1] (empty:
  // dims[i] as it is). Empty: none.
  std::vector<std::vector<std::pair<int, int>>> factors;
  std::vector<int> foreign;  // the other tensors whose extents the target follows
  int axis = 0;              // EXPAND_DIMS: where the new axis goes (negative from the end)
};

const char* NameOf(Kind k) {
  return k == Kind::kReshape ? "RESHAPE" : k == Kind::kSqueeze ? "SQUEEZE" : "EXPAND_DIMS";
}

// The output shape for input shape shapes[0] (and the foreign tensors' shapes after it); "" or
// why there is none.
std::string Apply(const Rule& r, const std::vector<Shape>& shapes, Shape* out) {
  if (shapes.size() != 1 + r.foreign.size())
    return std::string(NameOf(r.kind)) + " needs " + std::to_string(1 + r.foreign.size()) +
           " shapes";
  const Shape& in = shapes[0];
  const int rank = static_cast<int>(in.size());
  const int64_t n = NumElements(in);
  // The copies address elements with int boxes (runtime/split.h).
  if (n > INT_MAX) return ShapeString(in) + " has more than 2^31 - 1 elements";
  out->clear();
  switch (r.kind) {
    case Kind::kReshape: {
      std::vector<int> dims = r.dims;
      for (size_t i = 0; i < r.factors.size(); ++i) {
        if (r.factors[i].empty()) continue;
        int64_t v = dims[i];
        for (const auto& [k, a] : r.factors[i]) {
          const Shape& s = shapes[k];
          if (a < 0 || a >= static_cast<int>(s.size()))
            return "RESHAPE target follows axis " + std::to_string(a) + " of " + ShapeString(s) +
                   ", which has no such axis";
          v *= s[a];
          if (v > INT_MAX || v < INT_MIN) return "RESHAPE target element is out of range";
        }
        dims[i] = static_cast<int>(v);
      }
      int stretch = -1;
      int64_t known = 1;
      for (size_t i = 0; i < dims.size(); ++i) {
        if (dims[i] == -1 && stretch < 0) {
          stretch = static_cast<int>(i);
        } else if (dims[i] < 0) {
          return "RESHAPE target " + ShapeString(dims) + " has more than one -1 or a negative";
        } else {
          known *= dims[i];
          if (known > INT_MAX) return "RESHAPE target " + ShapeString(dims) + " is too large";
        }
      }
      *out = dims;
      if (stretch >= 0) {
        // LiteRT's rule, zeros included: the extents' non-zero products give -1, except that
        // an empty input with no 0 in the target gives 0. (tflite_runtime 2.14 fails there.)
        int64_t nz_in = 1, nz_out = 1;
        for (int d : in) nz_in *= d ? d : 1;
        for (size_t i = 0; i < dims.size(); ++i)
          if (static_cast<int>(i) != stretch && dims[i]) nz_out *= dims[i];
        (*out)[stretch] = n == 0 && known != 0 ? 0 : static_cast<int>(nz_in / nz_out);
      }
      if (NumElements(*out) != n)
        return "RESHAPE of " + ShapeString(in) + " to " + ShapeString(dims) +
               " changes the element count";
      return "";
    }
    case Kind::kSqueeze: {
      if (rank > tfl::kMaxParamDims) return "SQUEEZE input rank is over 8";
      std::vector<bool> drop(rank, r.dims.empty());
      for (int d : r.dims) {
        const int a = d < 0 ? d + rank : d;
        if (a < 0 || a >= rank)
          return "SQUEEZE axis " + std::to_string(d) + " is out of range for " + ShapeString(in);
        if (in[a] != 1)
          return "SQUEEZE axis " + std::to_string(d) + " of " + ShapeString(in) + " is not 1";
        drop[a] = true;
      }
      for (int a = 0; a < rank; ++a)
        if (!(drop[a] && in[a] == 1)) out->push_back(in[a]);
      return "";
    }
    case Kind::kExpandDims: {
      const int a = r.axis < 0 ? r.axis + rank + 1 : r.axis;
      if (a < 0 || a > rank)
        return "EXPAND_DIMS axis " + std::to_string(r.axis) + " is out of range for " +
               ShapeString(in);
      *out = in;
      out->insert(out->begin() + a, 1);
      return "";
    }
  }
  return "unknown reshape kind";
}

class ReshapeOp : public Op {
 public:
  ReshapeOp(const NodeInfo& node, Rule rule)
      : Op(node, {node.inputs[0]}, {node.outputs[0]}), rule_(std::move(rule)) {
    flat_copy_ = true;
  }

  const char* type_name() const override { return NameOf(rule_.kind); }
  std::string algorithm() const override { return "buffer_copy"; }

  std::vector<Shape> InferShapes(const std::vector<Shape>& in) const override {
    Shape out;
    if (auto why = Apply(rule_, in, &out); !why.empty()) throw Error(why);
    return {out};
  }
  std::vector<int> ShapeInputs() const override { return rule_.foreign; }
  // The partition enqueues the copy itself: no launches.
  void Prepare(OpContext&, const std::vector<Shape>&, const std::vector<Shape>&,
               const std::vector<cl_mem>&, const std::vector<cl_mem>&) override {
    launches_.clear();
  }
  double Flops(const std::vector<Shape>&, const std::vector<Shape>&) const override { return 0; }

 private:
  Rule rule_;
};

// The one constant integer of an EXPAND_DIMS axis tensor; "" or why not.
std::string ReadAxis(const GraphView& g, int t, int* axis) {
  std::vector<int64_t> v;
  if (auto why = g.ReadConstantInts(t, "EXPAND_DIMS axis", &v); !why.empty()) return why;
  if (v.size() != 1) return "EXPAND_DIMS axis must be a single value";
  if (v[0] < INT_MIN || v[0] > INT_MAX) return "EXPAND_DIMS axis is out of range";
  *axis = static_cast<int>(v[0]);
  return "";
}

// A target computed from shapes at Prepare (ops/shape_folding.h), kept as a rule that holds for
// any resized input: each element that is an extent, or a product of extents, of the RESHAPE's
// input or of other tensors is recomputed from their shapes whenever the partition is planned.
std::string FoldedTarget(const GraphView::FoldedInts& f, int input, Rule* r) {
  r->dims.clear();
  r->factors.assign(f.values.size(), {});
  r->foreign.clear();
  auto shape_index = [&](int t) {
    if (t == input) return 0;
    const auto it = std::find(r->foreign.begin(), r->foreign.end(), t);
    if (it != r->foreign.end()) return static_cast<int>(it - r->foreign.begin()) + 1;
    r->foreign.push_back(t);
    return static_cast<int>(r->foreign.size());
  };
  for (size_t i = 0; i < f.values.size(); ++i) {
    const GraphView::DimSource& s = f.from[i];
    int64_t v = f.values[i];
    if (s.tensor >= 0) {
      r->factors[i].emplace_back(shape_index(s.tensor), s.axis);
      v = 1;
    } else if (!s.product.empty()) {
      for (const auto& [t, a] : s.product) r->factors[i].emplace_back(shape_index(t), a);
      v = s.coef;
    }
    if (v < INT_MIN || v > INT_MAX) return "RESHAPE shape is out of range";
    r->dims.push_back(static_cast<int>(v));
  }
  return "";
}

// RESHAPE's target as the CPU kernel picks it: a 1-D int32 shape tensor when there is
// one, else ReshapeOptions (where a lone 0 is a legacy spelling of a scalar).
std::string ReadTarget(const GraphView& g, const NodeInfo& node, Rule* r) {
  std::vector<int>* dims = &r->dims;
  if (node.inputs.size() == 2) {
    const int t = node.inputs[1];
    if (!g.valid_tensor(t)) return "RESHAPE shape input is missing";
    // On the CPU a non-constant shape makes the output dynamic, whichever source is read;
    // only a 1-D int32 one is read (others leave ReshapeOptions in charge).
    if (const GraphView::FoldedInts* f = g.FoldedIntsOf(t))
      return FoldedTarget(*f, node.inputs[0], r);
    if (!g.IsConstant(t)) return "RESHAPE shape is computed at run time (a dynamic output)";
    if (g.shape(t).size() == 1 && g.type(t) == kTfLiteInt32) {
      std::vector<int64_t> v;
      if (auto why = g.ReadConstantInts(t, "RESHAPE shape", &v); !why.empty()) return why;
      dims->assign(v.begin(), v.end());
      return "";
    }
  }
  if (!node.builtin_data) return "missing RESHAPE params";
  tfl::ReshapeParams p;
  std::memcpy(&p, node.builtin_data, sizeof p);
  if (p.num_dimensions < 0 || p.num_dimensions > tfl::kMaxParamDims)
    return "RESHAPE params have " + std::to_string(p.num_dimensions) + " dimensions";
  dims->assign(p.shape, p.shape + p.num_dimensions);
  if (dims->size() == 1 && (*dims)[0] == 0) dims->clear();
  return "";
}

std::string ReadRule(const GraphView& g, const NodeInfo& node, Kind kind, Rule* r) {
  r->kind = kind;
  const size_t want_min = kind == Kind::kExpandDims ? 2 : 1;
  const size_t want_max = kind == Kind::kSqueeze ? 1 : 2;
  if (node.inputs.size() < want_min || node.inputs.size() > want_max || node.outputs.size() != 1)
    return "unexpected input/output count";
  // Quantized tensors of one type: a flat copy of the integers. TFLite copies them as they are
  // even where the output is quantized differently (measured on both runtimes), so does this.
  const ValueType t =
      g.valid_tensor(node.inputs[0]) ? g.value_type(node.inputs[0]) : ValueType::kFloat;
  if (IsQuantized(t)) {
    for (int x : {node.inputs[0], node.outputs[0]})
      if (auto why = CheckQuantActivation(g, x, t); !why.empty()) return why;
  } else if (t == ValueType::kInt32 || t == ValueType::kComplex64) {
    // Run-time int32 values (an attention mask on its way to a CAST) or complex ones (an RFFT2D's
    // bins on their way to a CAST or COMPLEX_ABS): a flat copy of the elements. A constant one is
    // a shape computation's or the constant fold's, not a copy's.
    for (int x : {node.inputs[0], node.outputs[0]})
      if (!g.valid_tensor(x) || g.value_type(x) != t || !g.tensor(x).dims)
        return std::string(NameOf(kind)) + " of " + ValueTypeName(t) + " values to another type";
    if (g.IsConstant(node.inputs[0]))
      return std::string("a constant ") + ValueTypeName(t) + " input";
  } else if (auto why = CheckFloatTensors(g, {node.inputs[0], node.outputs[0]}); !why.empty()) {
    return why;
  }
  std::string why;
  if (kind == Kind::kReshape) {
    why = ReadTarget(g, node, r);
  } else if (kind == Kind::kExpandDims) {
    why = ReadAxis(g, node.inputs[1], &r->axis);
  } else if (!node.builtin_data) {
    why = "missing SQUEEZE params";
  } else {
    tfl::SqueezeParams p;
    std::memcpy(&p, node.builtin_data, sizeof p);
    if (p.num_squeeze_dims < 0 || p.num_squeeze_dims > tfl::kMaxParamDims)
      return "SQUEEZE params have " + std::to_string(p.num_squeeze_dims) + " axes";
    r->dims.assign(p.squeeze_dims, p.squeeze_dims + p.num_squeeze_dims);
  }
  if (!why.empty()) return why;
  std::vector<Shape> shapes = {g.shape(node.inputs[0])};
  for (int t : r->foreign) {
    if (!g.valid_tensor(t)) return "RESHAPE target follows an invalid tensor";
    shapes.push_back(g.shape(t));
  }
  Shape out;
  return Apply(*r, shapes, &out);
}

template <Kind K>
std::string Check(const GraphView& g, const NodeInfo& node) {
  Rule r;
  return ReadRule(g, node, K, &r);
}

template <Kind K>
std::unique_ptr<Op> Create(const GraphView& g, const NodeInfo& node) {
  Rule r;
  if (auto why = ReadRule(g, node, K, &r); !why.empty()) throw Error(why);
  return std::make_unique<ReshapeOp>(node, std::move(r));
}

std::string DescribeReshape(const NodeInfo& n) {
  tfl::ReshapeParams p;
  std::memcpy(&p, n.builtin_data, sizeof p);
  return "new_shape=" + JoinParamInts(p.shape, p.num_dimensions) +
         " num_dimensions=" + std::to_string(p.num_dimensions);
}

std::string DescribeSqueeze(const NodeInfo& n) {
  tfl::SqueezeParams p;
  std::memcpy(&p, n.builtin_data, sizeof p);
  return "squeeze_dims=" + JoinParamInts(p.squeeze_dims, p.num_squeeze_dims) +
         " num_squeeze_dims=" + std::to_string(p.num_squeeze_dims);
}

}  // namespace

extern const OpHandler kReshapeHandler = {
    tfl::kReshape, "RESHAPE", Check<Kind::kReshape>, Create<Kind::kReshape>, DescribeReshape,
    nullptr,       true};
extern const OpHandler kSqueezeHandler = {
    tfl::kSqueeze, "SQUEEZE", Check<Kind::kSqueeze>, Create<Kind::kSqueeze>, DescribeSqueeze,
    nullptr,       true};
extern const OpHandler kExpandDimsHandler = {
    tfl::kExpandDims, "EXPAND_DIMS", Check<Kind::kExpandDims>, Create<Kind::kExpandDims>, nullptr,
    nullptr,          true};

}  // namespace clgpu
