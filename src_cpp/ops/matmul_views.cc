#include "ops/matmul_views.h"

#include <cstring>
#include <map>

#include "tflite/builtin.h"

namespace clgpu {
namespace {

// The step a node makes of its data input, or false if it is none of ours.
bool StepOf(const GraphView& g, const NodeInfo& n, ViewStep* s) {
  if (n.outputs.size() != 1 || n.inputs.empty()) return false;
  s->in = n.inputs[0];
  s->out = n.outputs[0];
  if (n.op == tfl::kTranspose) {
    std::vector<int64_t> perm;
    if (n.inputs.size() != 2 || !g.ReadConstantInts(n.inputs[1], "perm", &perm).empty())
      return false;
    s->kind = ViewStep::kTranspose;
    s->perm.assign(perm.begin(), perm.end());
    return true;
  }
  const OpHandler* h = FindOpHandler(n.op);
  if (h && h->flat_copy) {
    s->kind = ViewStep::kReshape;
    return true;
  }
  if (n.op == tfl::kMul && n.inputs.size() == 2 && n.builtin_data) {
    int act = 0;
    std::memcpy(&act, n.builtin_data, sizeof act);
    // x * c with c one constant float (either operand), no activation.
    for (int k = 0; k < 2; ++k) {
      const int c = n.inputs[1 - k];
      if (act != 0 || !g.valid_tensor(c) || !g.IsConstant(c) || NumElements(g.shape(c)) != 1 ||
          g.type(n.inputs[k]) != kTfLiteFloat32)
        continue;
      // The product broadcasts only if c has more axes than x: then it is no scale.
      if (g.shape(c).size() > g.shape(n.inputs[k]).size()) continue;
      s->kind = ViewStep::kScale;
      s->in = n.inputs[k];
      s->scale = g.ConstantFloats(c)[0];
      return true;
    }
  }
  return false;
}

}  // namespace

std::vector<ViewFusion> FindViewFusions(const GraphView& g, const std::vector<NodeInfo>& nodes,
                                        const std::set<int>& outputs) {
  std::map<int, size_t> producer;
  std::map<int, std::vector<size_t>> readers;
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (int t : nodes[i].outputs) producer[t] = i;
    for (int t : nodes[i].inputs) readers[t].push_back(i);
  }
  // An intermediate of a chain: read by one node only, not a partition output.
  auto private_to = [&](int t, size_t reader) {
    const auto& r = readers[t];
    return !outputs.count(t) && r.size() == 1 && r[0] == reader;
  };
  std::vector<ViewFusion> out;
  for (size_t p = 0; p < nodes.size(); ++p) {
    const NodeInfo& mm = nodes[p];
    if (mm.op != tfl::kBatchMatMul || mm.inputs.size() != 2 || mm.outputs.size() != 1) continue;
    for (int j = 0; j < 2; ++j) {
      ViewFusion f;
      f.op = p, f.operand = j;
      int t = mm.inputs[j];
      size_t reader = p;
      for (;;) {
        const auto q = producer.find(t);
        ViewStep s;
        if (q == producer.end() || q->second >= reader || !private_to(t, reader) ||
            !StepOf(g, nodes[q->second], &s) || s.kind == ViewStep::kScale)
          break;
        f.steps.insert(f.steps.begin(), s);
        f.absorbed.push_back(q->second);
        f.intermediates.push_back(t);
        t = s.in, reader = q->second;
      }
      f.tensor = t;
      if (!f.steps.empty()) out.push_back(std::move(f));
    }
    ViewFusion f;
    f.op = p;
    int t = mm.outputs[0];
    size_t writer = p;
    for (;;) {
      const auto& r = readers[t];
      ViewStep s;
      if (outputs.count(t) || r.size() != 1 || r[0] <= writer || !StepOf(g, nodes[r[0]], &s) ||
          s.in != t)
        break;
      f.steps.push_back(s);
      f.absorbed.push_back(r[0]);
      f.intermediates.push_back(t);
      t = s.out, writer = r[0];
    }
    f.tensor = t;
    if (!f.steps.empty()) out.push_back(std::move(f));
  }
  return out;
}

bool ReshapeView(const StridedView& v, const Shape& shape, StridedView* out) {
  if (NumElements(v.shape) != NumElements(shape)) return false;
  // An empty tensor has no elements to address: any strides do.
  if (NumElements(shape) == 0) {
    *out = ContiguousView(shape);
    return true;
  }
  // Axes of extent 1 take no part in the layout.
  std::vector<int64_t> od, os;
  for (size_t a = 0; a < v.shape.size(); ++a)
    if (v.shape[a] != 1) od.push_back(v.shape[a]), os.push_back(v.strides[a]);
  out->shape = shape;
  out->strides.assign(shape.size(), 1);
  const size_t on = od.size(), nn = shape.size();
  size_t oi = 0, oj = 1, ni = 0, nj = 1;
  while (ni < nn && oi < on) {
    int64_t np = shape[ni], op = od[oi];
    while (np != op) {
      if (np < op) {
        if (nj >= nn) return false;
        np *= shape[nj++];
      } else {
        if (oj >= on) return false;
        op *= od[oj++];
      }
    }
    // The old axes oi..oj-1 must be one run in memory to be cut anew.
    for (size_t k = oi; k + 1 < oj; ++k)
      if (os[k] != od[k + 1] * os[k + 1]) return false;
    out->strides[nj - 1] = os[oj - 1];
    for (size_t k = nj - 1; k > ni; --k) out->strides[k - 1] = out->strides[k] * shape[k];
    ni = nj++;
    oi = oj++;
  }
  return true;
}

bool ChainView(const ViewFusion& f, const std::function<Shape(int)>& shape_of, StridedView* view,
               float* scale) {
  *scale = 1.0f;
  if (f.operand >= 0) {
    StridedView v = ContiguousView(shape_of(f.tensor));
    for (const ViewStep& s : f.steps) {
      if (s.kind == ViewStep::kTranspose) {
        if (s.perm.size() != v.shape.size()) return false;
        StridedView t = v;
        for (size_t k = 0; k < s.perm.size(); ++k) {
          const int a = s.perm[k] < 0 ? s.perm[k] + static_cast<int>(v.shape.size()) : s.perm[k];
          if (a < 0 || a >= static_cast<int>(v.shape.size())) return false;
          t.shape[k] = v.shape[a], t.strides[k] = v.strides[a];
        }
        v = std::move(t);
      } else if (!ReshapeView(v, shape_of(s.out), &v)) {
        return false;
      }
    }
    *view = std::move(v);
    return true;
  }
  // The output: from the tensor written (laid out as it is) back to the op's own output.
  StridedView v = ContiguousView(shape_of(f.tensor));
  for (auto it = f.steps.rbegin(); it != f.steps.rend(); ++it) {
    const ViewStep& s = *it;
    if (s.kind == ViewStep::kScale) {
      *scale *= s.scale;
    } else if (s.kind == ViewStep::kTranspose) {
      if (s.perm.size() != v.shape.size()) return false;
      StridedView t = v;
      for (size_t k = 0; k < s.perm.size(); ++k) {
        const int a = s.perm[k] < 0 ? s.perm[k] + static_cast<int>(v.shape.size()) : s.perm[k];
        if (a < 0 || a >= static_cast<int>(v.shape.size())) return false;
        t.shape[a] = v.shape[k], t.strides[a] = v.strides[k];
      }
      v = std::move(t);
    } else if (!ReshapeView(v, shape_of(s.in), &v)) {
      return false;
    }
  }
  *view = std::move(v);
  return true;
}

}  // namespace clgpu
