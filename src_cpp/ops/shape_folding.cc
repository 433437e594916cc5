#include "ops/shape_folding.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <set>

#include "common/error.h"
#include "ops/cpu_kernel_rules.h"
#include "ops/op.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

// TfLiteStridedSliceParams, TfLitePackParams, TfLiteGatherParams, TfLiteConcatenationParams:
// the leading fields both runtimes share.
struct StridedSliceParams {
  int begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask;
};
struct PackParams {
  int values_count, axis;
};
struct AxisParams {
  int axis;
};

using Folded = GraphView::FoldedInts;

bool IsInt(TfLiteType t) { return t == kTfLiteInt32 || t == kTfLiteInt64; }

// The value of an integer tensor: a model constant or an already folded one.
std::optional<Folded> ValueOf(const GraphView& g, int t) {
  if (!g.valid_tensor(t) || !IsInt(g.type(t))) return std::nullopt;
  if (const Folded* f = g.FoldedIntsOf(t)) return *f;
  if (!g.IsConstant(t)) return std::nullopt;
  try {
    Folded f;
    f.values = g.ConstantInts(t);
    f.from.assign(f.values.size(), GraphView::DimSource{});
    return f;
  } catch (const Error&) {
    return std::nullopt;
  }
}

// One axis of a 1-D STRIDED_SLICE as the CPU kernel resolves it: masks, negative indices,
// clamping to the extent.
std::optional<Folded> StridedSlice1d(const Folded& in, int64_t begin, int64_t end, int64_t stride,
                                     const StridedSliceParams& p) {
  const int64_t n = static_cast<int64_t>(in.values.size());
  if (stride == 0 || p.ellipsis_mask || p.new_axis_mask) return std::nullopt;
  Folded out;
  if (p.shrink_axis_mask & 1) {
    const int64_t i = begin < 0 ? begin + n : begin;
    if (i < 0 || i >= n) return std::nullopt;
    out.values = {in.values[i]};
    out.from = {in.from[i]};
    return out;
  }
  auto resolve = [&](int64_t v, bool masked, bool is_begin) {
    if (masked) return stride > 0 ? (is_begin ? int64_t{0} : n) : (is_begin ? n - 1 : int64_t{-1});
    if (v < 0) v += n;
    return stride > 0 ? std::min(std::max(v, int64_t{0}), n)
                      : std::min(std::max(v, int64_t{-1}), n - 1);
  };
  const int64_t b = resolve(begin, p.begin_mask & 1, true), e = resolve(end, p.end_mask & 1, false);
  for (int64_t i = b; stride > 0 ? i < e : i > e; i += stride) {
    out.values.push_back(in.values[i]);
    out.from.push_back(in.from[i]);
  }
  return out;
}

// The source of a product of elements (REDUCE_PROD over shape elements, Keras' flatten of the
// leading axes): one extent stays that extent, constants fold into the coefficient, several
// extents make a product the RESHAPE reading it re-evaluates from the shapes of each plan.
GraphView::DimSource ProductSource(const Folded& f) {
  GraphView::DimSource out;
  for (size_t i = 0; i < f.values.size(); ++i) {
    const GraphView::DimSource& s = f.from[i];
    if (s.tensor >= 0) {
      out.product.emplace_back(s.tensor, s.axis);
    } else if (!s.product.empty()) {
      out.product.insert(out.product.end(), s.product.begin(), s.product.end());
      out.coef *= s.coef;
    } else {
      out.coef *= f.values[i];
    }
  }
  if (out.product.size() == 1 && out.coef == 1) {
    out.tensor = out.product[0].first, out.axis = out.product[0].second;
    out.product.clear();
  }
  if (out.product.empty()) out.coef = 1;
  return out;
}

std::optional<Folded> Evaluate(const GraphView& g, const NodeInfo& n) {
  if (n.outputs.size() != 1 || !g.valid_tensor(n.outputs[0]) || !IsInt(g.type(n.outputs[0])))
    return std::nullopt;
  switch (n.op) {
    case tfl::kShape: {
      if (n.inputs.size() != 1 || !g.valid_tensor(n.inputs[0])) return std::nullopt;
      Folded f;
      const Shape s = g.shape(n.inputs[0]);
      // Every dim may follow an input resized at run time: remember whose it is.
      for (size_t a = 0; a < s.size(); ++a) {
        f.values.push_back(s[a]);
        f.from.push_back({n.inputs[0], static_cast<int>(a)});
      }
      return f;
    }
    case tfl::kStridedSlice: {
      if (n.inputs.size() != 4 || !n.builtin_data) return std::nullopt;
      const auto in = ValueOf(g, n.inputs[0]);
      if (!in || g.shape(n.inputs[0]).size() != 1) return std::nullopt;
      int64_t bes[3];
      for (int k = 0; k < 3; ++k) {
        const auto v = ValueOf(g, n.inputs[1 + k]);
        if (!v || v->values.size() != 1 || v->from[0].derived()) return std::nullopt;
        bes[k] = v->values[0];
      }
      StridedSliceParams p;
      std::memcpy(&p, n.builtin_data, sizeof p);
      return StridedSlice1d(*in, bes[0], bes[1], bes[2], p);
    }
    case tfl::kPack: {
      if (!n.builtin_data) return std::nullopt;
      PackParams p;
      std::memcpy(&p, n.builtin_data, sizeof p);
      if (p.axis != 0 || p.values_count != static_cast<int>(n.inputs.size())) return std::nullopt;
      Folded f;
      for (int t : n.inputs) {
        const auto v = ValueOf(g, t);
        if (!v || !g.shape(t).empty() || v->values.size() != 1) return std::nullopt;
        f.values.push_back(v->values[0]);
        f.from.push_back(v->from[0]);
      }
      return f;
    }
    case tfl::kConcatenation: {
      if (!n.builtin_data) return std::nullopt;
      AxisParams p;
      std::memcpy(&p, n.builtin_data, sizeof p);
      if (p.axis != 0 && p.axis != -1) return std::nullopt;
      Folded f;
      for (int t : n.inputs) {
        const auto v = ValueOf(g, t);
        if (!v || g.shape(t).size() != 1) return std::nullopt;
        f.values.insert(f.values.end(), v->values.begin(), v->values.end());
        f.from.insert(f.from.end(), v->from.begin(), v->from.end());
      }
      return f;
    }
    case tfl::kGather: {
      if (n.inputs.size() != 2 || !n.builtin_data) return std::nullopt;
      AxisParams p;
      std::memcpy(&p, n.builtin_data, sizeof p);
      const auto params = ValueOf(g, n.inputs[0]), idx = ValueOf(g, n.inputs[1]);
      if (p.axis != 0 || !params || !idx || g.shape(n.inputs[0]).size() != 1) return std::nullopt;
      Folded f;
      const int64_t size = static_cast<int64_t>(params->values.size());
      for (size_t i = 0; i < idx->values.size(); ++i) {
        const int64_t k = idx->values[i];
        if (idx->from[i].derived() || k < 0 || k >= size) return std::nullopt;
        f.values.push_back(params->values[k]);
        f.from.push_back(params->from[k]);
      }
      return f;
    }
    case tfl::kCast: {
      if (n.inputs.size() != 1) return std::nullopt;
      return ValueOf(g, n.inputs[0]);
    }
    case tfl::kReduceProd: {
      // A 1-D vector reduced along its only axis (keep_dims or not): the product.
      if (n.inputs.size() != 2) return std::nullopt;
      const auto in = ValueOf(g, n.inputs[0]), axes = ValueOf(g, n.inputs[1]);
      if (!in || !axes || g.shape(n.inputs[0]).size() != 1) return std::nullopt;
      for (size_t i = 0; i < axes->values.size(); ++i)
        if (axes->from[i].derived() || (axes->values[i] != 0 && axes->values[i] != -1))
          return std::nullopt;
      if (axes->values.empty()) return in;  // no axis: nothing reduced
      int64_t v = 1;
      for (int64_t x : in->values) {
        v *= x;
        if (v > INT32_MAX || v < INT32_MIN) return std::nullopt;
      }
      Folded f;
      f.values = {v};
      f.from = {ProductSource(*in)};
      return f;
    }
    default:
      return std::nullopt;
  }
}

}  // namespace

const char* ShapeNodeName(int32_t op) {
  switch (op) {
    case tfl::kShape:
      return "SHAPE";
    case tfl::kStridedSlice:
      return "STRIDED_SLICE";
    case tfl::kPack:
      return "PACK";
    case tfl::kGather:
      return "GATHER";
    case tfl::kCast:
      return "CAST";
    case tfl::kConcatenation:
      return "CONCATENATION";
    case tfl::kReduceProd:
      return "REDUCE_PROD";
    default:
      return "";
  }
}

namespace {

// The model declares the output of a RESHAPE whose target is computed with the converter's -1s
// as 1s ([-1, -1] -> [1, 1]), and so the shapes of what follows it: infer them from the folded
// target, as the CPU would at allocate_tensors, through the op handlers of the nodes downstream
// that we could claim. A node we could not claim keeps its declared shapes (its readers are
// then checked against those and refused where they do not fit).
void InferStaleShapes(GraphView& g, const std::vector<NodeInfo>& nodes) {
  std::set<int> stale;
  for (const NodeInfo& n : nodes) {
    if (n.outputs.size() == 1 && g.FoldedIntsOf(n.outputs[0])) continue;
    const bool touched = std::any_of(n.inputs.begin(), n.inputs.end(), [&](int t) {
      return stale.count(t) || (g.valid_tensor(t) && g.FoldedIntsOf(t));
    });
    const OpHandler* h = FindOpHandler(n.op);
    if (!touched || !h) continue;
    try {
      if (!h->check(g, n).empty()) continue;
      const std::unique_ptr<Op> op = h->create(g, n);
      std::vector<Shape> in;
      for (int t : op->inputs()) in.push_back(g.shape(t));
      for (int t : op->ShapeInputs()) in.push_back(g.shape(t));
      const std::vector<Shape> out = op->InferShapes(in);
      for (size_t j = 0; j < out.size() && j < op->outputs().size(); ++j) {
        const int t = op->outputs()[j];
        if (out[j] == g.shape(t)) continue;
        g.SetInferredShape(t, out[j]);
        stale.insert(t);
      }
    } catch (const std::exception&) {
      // Not ours after all: its claim check says why.
    }
  }
}

}  // namespace

std::vector<const NodeInfo*> FoldShapeComputations(GraphView& g,
                                                   const std::vector<NodeInfo>& nodes) {
  std::vector<const NodeInfo*> folded;
  for (const NodeInfo& n : nodes) {
    // Nothing the CPU's kernel refuses at prepare (a STRIDED_SLICE begin of rank 0, a SHAPE of
    // FLOAT16).
    if (!*ShapeNodeName(n.op) || !CheckCpuPrepare(g, n).empty()) continue;
    std::optional<Folded> v = Evaluate(g, n);
    // The value must fill the output the model declares.
    if (!v || static_cast<int64_t>(v->values.size()) != NumElements(g.shape(n.outputs[0])))
      continue;
    g.AddFoldedInts(n.outputs[0], std::move(*v));
    folded.push_back(&n);
  }
  if (!folded.empty()) InferStaleShapes(g, nodes);
  return folded;
}

}  // namespace clgpu
