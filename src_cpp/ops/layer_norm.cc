// Layer normalization as converters write it, recognized into one kernel (kernels/layer_norm.cl):
//   mean = MEAN(x, last axis, keep_dims); var = MEAN(SQUARED_DIFFERENCE(x, mean), same axis);
//   g = RSQRT(ADD(var, eps)) [* gamma]; then TF's batch_normalization, x * g + (-mean) * g
//   (NEG, MUL, MUL, ADD; with a beta: x * g + (beta - mean * g)), or (x - mean) * g [+ beta];
// with the residual ADD that produces x when only the norm reads it. Ten nodes, ten launches
// (eleven with the ADD) become one.
#include <algorithm>
#include <cstring>
#include <map>
#include <optional>

#include "common/error.h"
#include "ops/group_rewrite.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

constexpr int kMaxGroup = 256;  // LN_LOCAL in kernels/layer_norm.cl

struct Norm {
  std::vector<size_t> nodes;
  std::vector<int> inputs;  // x, or the residual ADD's two operands
  std::vector<float> gamma = {1.0f}, beta = {0.0f};
  float eps = 0;
  int form = 0;   // LN_FORM
  int axis = -1;  // as the MEANs write it: -1 or rank - 1
  int out = -1;
};

class LayerNormOp : public Op, public RowChunker<LayerNormOp> {
 public:
  LayerNormOp(const NodeInfo& info, std::shared_ptr<const Norm> n)
      : Op(info, n->inputs, {n->out}), n_(std::move(n)) {}
  // A chunk: whole rows.
  explicit LayerNormOp(const LayerNormOp& whole)
      : Op(whole.node_index()), n_(whole.n_), weights_(whole.weights_) {}

  const char* type_name() const override { return "LAYER_NORM"; }
  std::string algorithm() const override {
    return n_->inputs.size() == 2 ? "row_per_group+ADD" : "row_per_group";
  }
  const Chunker* chunker() const override { return this; }

  std::vector<Shape> InferShapes(const std::vector<Shape>& in) const override {
    const Shape& x = in.at(0);
    if (in.size() == 2 && in[1] != x)
      throw Error("LAYER_NORM: the folded ADD's operands " + ShapeString(x) + " and " +
                  ShapeString(in[1]) + " differ");
    const int rank = static_cast<int>(x.size());
    if (rank == 0 || (n_->axis != -1 && n_->axis != rank - 1))
      throw Error("LAYER_NORM: axis " + std::to_string(n_->axis) + " is not the last of " +
                  ShapeString(x));
    for (const auto* v : {&n_->gamma, &n_->beta})
      if (v->size() != 1 && static_cast<int>(v->size()) != x.back())
        throw Error("LAYER_NORM: " + std::to_string(v->size()) + " scales for " + ShapeString(x));
    return {x};
  }
  double Flops(const std::vector<Shape>& in, const std::vector<Shape>&) const override {
    return 10.0 * static_cast<double>(NumElements(in.at(0)));
  }
  double WeightBytes() const override {
    return weights_->gamma ? double(weights_->gamma.bytes() + weights_->beta.bytes()) : 0.0;
  }

  void Prepare(OpContext& ctx, const std::vector<Shape>& in_shapes, const std::vector<Shape>&,
               const std::vector<cl_mem>& in, const std::vector<cl_mem>& out) override {
    launches_.clear();
    if (!weights_->gamma) {
      weights_->gamma = UploadFloat32(ctx, n_->gamma);
      weights_->beta = UploadFloat32(ctx, n_->beta);
    }
    const Shape& x = in_shapes.at(0);
    const int c = x.empty() ? 0 : x.back();
    const int64_t rows = c ? NumElements(x) / c : 0;
    if (rows == 0) return;
    auto prog = ctx.GetProgram("layer_norm", "-DLN_FORM=" + std::to_string(n_->form) +
                                                 (in.size() == 2 ? " -DHAS_ADD" : ""));
    Launch l;
    l.name = "layer_norm";
    l.kernel = CreateKernel(*prog, l.name);
    const size_t group = RowGroup(ctx, l.kernel, kMaxGroup, c);
    l.local[0] = group;
    l.global[0] = static_cast<size_t>(rows) * group;
    cl_mem b = in.size() == 2 ? in[1] : in[0];
    SetArgs(l.kernel, in[0], b, weights_->gamma.get(), weights_->beta.get(), out.at(0),
            static_cast<int>(rows), c, n_->eps, static_cast<int>(n_->gamma.size()),
            static_cast<int>(n_->beta.size()));
    launches_.push_back(std::move(l));
  }

 private:
  struct Weights {
    Buffer gamma, beta;
  };
  std::shared_ptr<const Norm> n_;
  std::shared_ptr<Weights> weights_ = std::make_shared<Weights>();
};

// The pattern, from each MEAN.
class Matcher {
 public:
  Matcher(const GraphView& g, const std::vector<NodeInfo>& nodes, const std::set<int>& outputs)
      : g_(g), nodes_(nodes), outputs_(outputs) {
    for (size_t i = 0; i < nodes.size(); ++i) {
      for (int t : nodes[i].outputs) producer_[t] = i;
      for (int t : nodes[i].inputs) readers_[t].push_back(i);
    }
  }

  std::optional<Norm> At(size_t m1) const {
    Norm n;
    const NodeInfo& mean = nodes_[m1];
    const int x = mean.inputs.empty() ? -1 : mean.inputs[0];
    if (mean.op != tfl::kMean || !g_.valid_tensor(x) || !IsFloat(x) || !MeanLast(mean, x, &n.axis))
      return std::nullopt;
    const int mu = mean.outputs[0];
    const std::vector<size_t>& mu_readers = Readers(mu);
    if (mu_readers.size() != 2) return std::nullopt;
    const size_t sd =
        nodes_[mu_readers[0]].op == tfl::kSquaredDifference ? mu_readers[0] : mu_readers[1];
    const size_t other = sd == mu_readers[0] ? mu_readers[1] : mu_readers[0];
    if (nodes_[sd].op != tfl::kSquaredDifference || Other(nodes_[sd], mu) != x) return std::nullopt;
    int axis2 = 0;
    const long var = Only(nodes_[sd].outputs[0], tfl::kMean);
    if (var < 0 || !MeanLast(nodes_[var], nodes_[sd].outputs[0], &axis2) || axis2 != n.axis)
      return std::nullopt;
    const long ve = Only(nodes_[var].outputs[0], tfl::kAdd);
    if (ve < 0 || !NoActivation(nodes_[ve])) return std::nullopt;
    const int eps = Other(nodes_[ve], nodes_[var].outputs[0]);
    if (eps < 0 || !g_.IsConstant(eps) || NumElements(g_.shape(eps)) != 1 || !IsFloat(eps) ||
        g_.shape(eps).size() > g_.shape(x).size())
      return std::nullopt;
    n.eps = g_.ConstantFloats(eps)[0];
    const long rs = Only(nodes_[ve].outputs[0], tfl::kRsqrt);
    if (rs < 0) return std::nullopt;
    n.nodes = {m1, sd, static_cast<size_t>(var), static_cast<size_t>(ve), static_cast<size_t>(rs)};
    int gt = nodes_[rs].outputs[0];
    if (const long gm = Only(gt, tfl::kMul); gm >= 0 && NoActivation(nodes_[gm])) {
      const int gamma = Other(nodes_[gm], gt);
      if (!Scales(gamma, x, &n.gamma)) return std::nullopt;
      n.nodes.push_back(gm);
      gt = nodes_[gm].outputs[0];
    }
    if (!Tail(x, mu, other, gt, &n) || !IsFloat(n.out)) return std::nullopt;
    ResidualAdd(x, &n);
    std::sort(n.nodes.begin(), n.nodes.end());
    // Nothing the group computes but its output may be needed outside it.
    for (size_t k : n.nodes)
      for (int t : nodes_[k].outputs) {
        if (t == n.out) continue;
        if (outputs_.count(t)) return std::nullopt;
        for (size_t r : Readers(t))
          if (!std::binary_search(n.nodes.begin(), n.nodes.end(), r)) return std::nullopt;
      }
    return n;
  }

 private:
  const std::vector<size_t>& Readers(int t) const {
    static const std::vector<size_t> kNone;
    const auto it = readers_.find(t);
    return it == readers_.end() ? kNone : it->second;
  }
  bool IsFloat(int t) const {
    return g_.valid_tensor(t) && (g_.type(t) == kTfLiteFloat32 || g_.IsFoldedDequantizeOutput(t));
  }
  // The one node reading intermediate t, if it is an `op`; else -1.
  long Only(int t, int32_t op) const {
    const std::vector<size_t>& r = Readers(t);
    if (outputs_.count(t) || r.size() != 1 || nodes_[r[0]].op != op) return -1;
    return static_cast<long>(r[0]);
  }
  // The other operand of a binary node one of whose operands is t; -1 if none.
  static int Other(const NodeInfo& n, int t) {
    if (n.inputs.size() != 2 || n.outputs.size() != 1) return -1;
    return n.inputs[0] == t ? n.inputs[1] : n.inputs[1] == t ? n.inputs[0] : -1;
  }
  static bool NoActivation(const NodeInfo& n) {
    int act = 0;
    if (n.builtin_data) std::memcpy(&act, n.builtin_data, sizeof act);
    return act == 0;
  }
  // MEAN of x over its last axis, keep_dims.
  bool MeanLast(const NodeInfo& m, int x, int* axis) const {
    if (m.op != tfl::kMean || m.inputs.size() != 2 || m.inputs[0] != x || m.outputs.size() != 1 ||
        !m.builtin_data || !IsFloat(m.outputs[0]))
      return false;
    bool keep = false;
    std::memcpy(&keep, m.builtin_data, sizeof keep);
    std::vector<int64_t> axes;
    if (!keep || !g_.ReadConstantInts(m.inputs[1], "axes", &axes).empty() || axes.size() != 1)
      return false;
    const int rank = static_cast<int>(g_.shape(x).size());
    if (axes[0] != -1 && axes[0] != rank - 1) return false;
    *axis = static_cast<int>(axes[0]);
    return true;
  }
  // A constant scale or offset broadcast along x's last axis: 1 or C values, every other axis 1.
  bool Scales(int t, int x, std::vector<float>* out) const {
    if (t < 0 || !IsFloat(t) || !g_.IsConstant(t)) return false;
    const Shape s = g_.shape(t), xs = g_.shape(x);
    if (s.size() > xs.size() || xs.empty()) return false;
    for (size_t a = 0; a + 1 < s.size(); ++a)
      if (s[a] != 1) return false;
    const int64_t count = NumElements(s);
    if (count != 1 && count != xs.back()) return false;
    *out = g_.ConstantFloats(t);
    return true;
  }
  bool Binary(size_t i, int32_t op, int a, int b) const {
    const NodeInfo& n = nodes_[i];
    return n.op == op && NoActivation(n) && n.inputs.size() == 2 && n.outputs.size() == 1 &&
           ((n.inputs[0] == a && n.inputs[1] == b) ||
            (op != tfl::kSub && n.inputs[0] == b && n.inputs[1] == a));
  }
  // After g: the forms of kernels/layer_norm.cl's LN_FORM; `other` is the second reader of mu.
  bool Tail(int x, int mu, size_t other, int gt, Norm* n) const {
    const std::vector<size_t>& gr = Readers(gt);
    if (outputs_.count(gt)) return false;
    if (nodes_[other].op == tfl::kSub) {  // (x - mean) * g [+ beta]
      const int d = nodes_[other].outputs[0];
      const long mm = Only(d, tfl::kMul);
      if (!Binary(other, tfl::kSub, x, mu) || mm < 0 || gr.size() != 1 ||
          gr[0] != static_cast<size_t>(mm) || !Binary(mm, tfl::kMul, d, gt))
        return false;
      n->nodes.insert(n->nodes.end(), {other, static_cast<size_t>(mm)});
      n->out = nodes_[mm].outputs[0];
      n->form = 2;
      if (const long ab = Only(n->out, tfl::kAdd);
          ab >= 0 && NoActivation(nodes_[ab]) && Scales(Other(nodes_[ab], n->out), x, &n->beta)) {
        n->nodes.push_back(ab);
        n->out = nodes_[ab].outputs[0];
        n->form = 3;
      }
      return true;
    }
    // x * g + t, t = (-mean) * g or beta - mean * g.
    if (gr.size() != 2) return false;
    const size_t mx = Binary(gr[0], tfl::kMul, x, gt) ? gr[0] : gr[1];
    const size_t mm = mx == gr[0] ? gr[1] : gr[0];
    if (!Binary(mx, tfl::kMul, x, gt)) return false;
    const int xg = nodes_[mx].outputs[0];
    int t = -1;
    if (nodes_[other].op == tfl::kNeg) {
      const int neg = nodes_[other].outputs[0];
      if (Only(neg, tfl::kMul) != static_cast<long>(mm) || !Binary(mm, tfl::kMul, neg, gt))
        return false;
      n->nodes.insert(n->nodes.end(), {other, mx, mm});
      t = nodes_[mm].outputs[0];
      n->form = 0;
    } else {
      if (other != mm || !Binary(mm, tfl::kMul, mu, gt)) return false;
      const int mg = nodes_[mm].outputs[0];
      const long sb = Only(mg, tfl::kSub);
      if (sb < 0 || !NoActivation(nodes_[sb]) || nodes_[sb].inputs.size() != 2 ||
          nodes_[sb].inputs[1] != mg || !Scales(nodes_[sb].inputs[0], x, &n->beta))
        return false;
      n->nodes.insert(n->nodes.end(), {mx, mm, static_cast<size_t>(sb)});
      t = nodes_[sb].outputs[0];
      n->form = 1;
    }
    const long fin = Only(xg, tfl::kAdd);
    if (fin < 0 || Only(t, tfl::kAdd) != fin || !Binary(fin, tfl::kAdd, xg, t)) return false;
    n->nodes.push_back(fin);
    n->out = nodes_[fin].outputs[0];
    return IsFloat(n->out);
  }
  // x = ADD(a, b) of one shape, read by the norm alone: folded in too.
  void ResidualAdd(int x, Norm* n) const {
    n->inputs = {x};
    const auto p = producer_.find(x);
    if (p == producer_.end() || outputs_.count(x)) return;
    const NodeInfo& add = nodes_[p->second];
    if (add.op != tfl::kAdd || !NoActivation(add) || add.inputs.size() != 2 ||
        add.outputs.size() != 1)
      return;
    const Shape s = g_.shape(x);
    for (int t : add.inputs)
      if (!IsFloat(t) || g_.shape(t) != s) return;
    for (size_t r : Readers(x))
      if (std::find(n->nodes.begin(), n->nodes.end(), r) == n->nodes.end()) return;
    n->nodes.push_back(p->second);
    n->inputs = add.inputs;
  }

  const GraphView& g_;
  const std::vector<NodeInfo>& nodes_;
  const std::set<int>& outputs_;
  std::map<int, size_t> producer_;
  std::map<int, std::vector<size_t>> readers_;
};

}  // namespace

std::vector<GroupRewrite> FindLayerNorms(const GraphView& g, const std::vector<NodeInfo>& nodes,
                                         const std::set<int>& outputs) {
  const Matcher m(g, nodes, outputs);
  std::vector<GroupRewrite> out;
  std::set<size_t> taken;
  for (size_t i = 0; i < nodes.size(); ++i) {
    std::optional<Norm> n = m.At(i);
    if (!n ||
        std::any_of(n->nodes.begin(), n->nodes.end(), [&](size_t k) { return taken.count(k); }))
      continue;
    taken.insert(n->nodes.begin(), n->nodes.end());
    GroupRewrite r;
    r.nodes = n->nodes;
    r.info.index = nodes[n->nodes.back()].index;
    r.info.op = -1;
    r.info.inputs = n->inputs;
    r.info.outputs = {n->out};
    auto shared = std::make_shared<const Norm>(std::move(*n));
    const NodeInfo info = r.info;
    r.make = [shared, info](const GraphView&) {
      return std::unique_ptr<Op>(std::make_unique<LayerNormOp>(info, shared));
    };
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace clgpu
