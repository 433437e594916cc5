// Epilogue folds: an element-wise op folded into the op producing its input, as an epilogue of
// that op's kernels (AttachEpilogue, kernels/common.cl): HARD_SWISH, LOGISTIC, TANH, GELU, ELU,
// LEAKY_RELU or a PRELU of one slope reading the producer's output alone (directly, or through
// RESHAPEs that only it reads), such a PRELU spelled as element-wise ops (fusion/prelu_form.h),
// or swish, x * LOGISTIC(x), a LOGISTIC and a MUL (no activation, no broadcast) that are its
// output's only readers; then up to two MAXIMUM / MINIMUM / MUL / ADD /
// SUB / DIV with a constant scalar or a NEG (a MUL by -1, exact), each its input's only reader
// (PostClamp: hard sigmoid's / 6 after a RELU6 as Keras and litert-torch convert it; also with no
// unary op before them:
// kIdentityEpilogue). The producer's handler clamps in its kernels (OpHandler::clamp_epilogue); no
// intermediate is a partition output. On int8 tensors the same (and the RELU family, and a PRELU
// of one slope or a slope per channel; no RESHAPEs between) as one table of the producer's output
// integers (one per channel for those slopes), the chain's CPU arithmetic tabulated
// (kTableEpilogue): exact, whatever the chain, and as long as each op of it is such a function
// of its input's integers (ADD / SUB / MUL of a constant scalar too: Keras's hard sigmoid). After
// the clamps; before the residuals, which leave an op with an epilogue alone (but move an ADD's own
// epilogue or table with it).
#include "ops/epilogue.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>

#include "fusion/pass.h"
#include "fusion/prelu_form.h"
#include "graph/quant.h"
#include "ops/int8_ops.h"
#include "ops/op_handler.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

struct EpilogueFusion {
  size_t producer = 0;
  std::vector<size_t> absorbed;    // the folded nodes; the last writes `output`
  std::vector<int> intermediates;  // tensors no longer written (the producer's own output first)
  int output = -1;
  int kind = 0;  // kernels/common.cl's CLGPU_EPILOGUE numbers, or kTableEpilogue
  float alpha = 0;
  std::vector<uint8_t> table;  // kTableEpilogue: the chain's results (AttachTable)
  bool copies = false;         // RESHAPEs between the producer and the unary op: same elements only
  std::vector<PostClamp> post;  // float only, at most kMaxPostClamps, after the unary op
};

// The epilogue number of a unary node, or 0.
int UnaryEpilogue(const NodeInfo& n, float* alpha) {
  *alpha = 0;
  switch (n.op) {
    case tfl::kHardSwish:
      return 2;
    case tfl::kLogistic:
      return 3;
    case tfl::kTanh:
      return 4;
    case tfl::kElu:
      return 7;
    case tfl::kGelu: {
      if (!n.builtin_data) return 0;
      bool approximate = false;
      std::memcpy(&approximate, n.builtin_data, sizeof approximate);
      return approximate ? 6 : 5;
    }
    case tfl::kLeakyRelu:
      if (!n.builtin_data) return 0;
      std::memcpy(alpha, n.builtin_data, sizeof *alpha);
      return 8;
    default:
      return 0;
  }
}

// A PRELU of `t` whose slope is one finite constant however it is shaped (PyTorch's
// nn.PReLU() default, one parameter): LEAKY_RELU's epilogue with that slope (x >= 0 ? x : a * x
// and x > 0 ? x : x * a differ only at x = 0, where both are 0). A slope per channel stays a
// PRELU of its own.
bool UniformPrelu(const GraphView& g, const NodeInfo& n, int t, float* alpha) {
  if (n.op != tfl::kPrelu || n.inputs.size() != 2 || n.outputs.size() != 1 || n.inputs[0] != t)
    return false;
  const int a = n.inputs[1];
  if (!g.valid_tensor(a) || !g.IsConstant(a) || g.type(a) != kTfLiteFloat32) return false;
  const std::vector<float> v = g.ConstantFloats(a);
  if (v.empty() || !std::isfinite(v[0])) return false;
  for (float x : v)
    if (x != v[0]) return false;
  *alpha = v[0];
  return true;
}

// Swish after the output y of nodes[p]: its two readers `r` are s = LOGISTIC(y) and MUL(y, s)
// (either operand order), both after p, s read by the MUL alone and not a partition output.
// Sets the positions of the LOGISTIC and the MUL; false if `r` is not that pair.
bool SwishReaders(const std::vector<NodeInfo>& nodes, size_t p, const std::vector<size_t>& r,
                  const std::set<int>& outputs, std::map<int, std::vector<size_t>>& readers,
                  size_t* li, size_t* mi) {
  if (r.size() != 2) return false;
  *li = r[0], *mi = r[1];
  if (nodes[*li].op != tfl::kLogistic) std::swap(*li, *mi);
  const NodeInfo &l = nodes[*li], &m = nodes[*mi];
  if (*li <= p || *mi <= *li || l.op != tfl::kLogistic || m.op != tfl::kMul ||
      l.inputs.size() != 1 || l.outputs.size() != 1 || m.outputs.size() != 1 || !m.builtin_data)
    return false;
  const int y = nodes[p].outputs[0], s = l.outputs[0];
  return (m.inputs == std::vector<int>{y, s} || m.inputs == std::vector<int>{s, y}) &&
         readers[s].size() == 1 && !outputs.count(s);
}

// An int8 element-wise op `u` reading t as a function of t's integers alone: the table of that
// function (256 entries, or 256 per channel of t for a PRELU's slopes per channel).
bool Int8StepTable(const GraphView& g, const NodeInfo& u, int t, std::vector<uint8_t>* table) {
  if (u.outputs.size() != 1) return false;
  if (u.op == tfl::kPrelu) return Int8PreluTable(g, u, t, table).empty();
  if (u.inputs.size() == 1) return u.inputs[0] == t && Int8UnaryTable(g, u, table).empty();
  return Int8ScalarTable(g, u, t, table).empty();
}

// `first` then `second`, each one table of 256 or one per channel: one table per channel where
// either has them (the same channels in both).
bool ComposeTables(const std::vector<uint8_t>& first, const std::vector<uint8_t>& second,
                   std::vector<uint8_t>* out) {
  const size_t a = first.size() / 256, b = second.size() / 256, rows = std::max(a, b);
  if (a == 0 || b == 0 || (a > 1 && b > 1 && a != b)) return false;
  out->assign(256 * rows, 0);
  for (size_t c = 0; c < rows; ++c)
    for (size_t i = 0; i < 256; ++i)
      (*out)[256 * c + i] = second[256 * (b > 1 ? c : 0) + first[256 * (a > 1 ? c : 0) + i]];
  return true;
}

// The int8 form: after a quantized producer's output y, a table-able element-wise op that alone
// reads y (a PRELU of one slope or per channel, an ADD / SUB / MUL of a constant scalar among
// them), or swish (LOGISTIC(y) and MUL(y, s) its only readers), then any more table-able ops each
// reading the last one's output alone: one table of y's integers for the whole chain.
bool FindInt8Epilogue(const GraphView& g, const std::vector<NodeInfo>& nodes, size_t p,
                      const std::vector<size_t>& r, const std::set<int>& outputs,
                      std::map<int, std::vector<size_t>>& readers, EpilogueFusion* f) {
  const int y = nodes[p].outputs[0];
  f->kind = kTableEpilogue;
  f->intermediates = {y};
  if (r.size() == 1) {
    if (r[0] <= p || !Int8StepTable(g, nodes[r[0]], y, &f->table)) return false;
    f->absorbed = {r[0]};
    f->output = nodes[r[0]].outputs[0];
  } else {
    size_t li = 0, mi = 0;
    if (!SwishReaders(nodes, p, r, outputs, readers, &li, &mi)) return false;
    const NodeInfo &l = nodes[li], &m = nodes[mi];
    const int s = l.outputs[0];
    std::vector<uint8_t> logistic;
    if (!Int8UnaryTable(g, l, &logistic).empty() ||
        !Int8MulTable(g, m, y, logistic, &f->table).empty())
      return false;
    f->absorbed = {li, mi};
    f->intermediates.push_back(s);
    f->output = m.outputs[0];
  }
  for (int t = f->output;;) {
    const std::vector<size_t>& next = readers[t];
    std::vector<uint8_t> step, composed;
    if (outputs.count(t) || next.size() != 1 || next[0] <= f->absorbed.back() ||
        !Int8StepTable(g, nodes[next[0]], t, &step) || !ComposeTables(f->table, step, &composed))
      return true;
    f->table = std::move(composed);
    f->absorbed.push_back(next[0]);
    f->intermediates.push_back(t);
    t = f->output = nodes[next[0]].outputs[0];
  }
}

// nodes[i] as a post op of tensor t with a constant float32 scalar, its output float32 of t's
// shape: a MAXIMUM or MINIMUM (either operand order), a MUL, ADD, SUB or DIV with no activation
// (SUB and DIV of t first), or a NEG of t.
bool AsPostClamp(const GraphView& g, const NodeInfo& n, int t, PostClamp* c) {
  if (n.op == tfl::kNeg) {  // -x is x * -1 bit for bit, NaN and signed zeros included
    const bool ok = n.inputs.size() == 1 && n.inputs[0] == t && n.outputs.size() == 1 &&
                    g.valid_tensor(n.outputs[0]) && g.type(n.outputs[0]) == kTfLiteFloat32 &&
                    g.shape(n.outputs[0]) == g.shape(t);
    if (ok) *c = PostClamp{PostClamp::kMul, -1.0f, true};
    return ok;
  }
  static const std::map<int32_t, PostClamp::Op> kOps = {
      {tfl::kMaximum, PostClamp::kMaximum}, {tfl::kMinimum, PostClamp::kMinimum},
      {tfl::kMul, PostClamp::kMul},         {tfl::kAdd, PostClamp::kAdd},
      {tfl::kSub, PostClamp::kSub},         {tfl::kDiv, PostClamp::kDiv}};
  const auto found = kOps.find(n.op);
  if (found == kOps.end()) return false;
  const PostClamp::Op op = found->second;
  if (n.inputs.size() != 2 || n.outputs.size() != 1) return false;
  const bool first = n.inputs[0] == t;
  const int k = first ? n.inputs[1] : n.inputs[0];
  if ((!first && n.inputs[1] != t) || k == t || !g.valid_tensor(k) || !g.IsConstant(k) ||
      g.type(k) != kTfLiteFloat32 || NumElements(g.shape(k)) != 1)
    return false;
  if (op >= PostClamp::kMul) {
    // Arithmetic: its fused activation none (the options' first field), the chain first where
    // the order matters.
    int act = -1;
    if (n.builtin_data) std::memcpy(&act, n.builtin_data, sizeof act);
    if (act != 0 || (!first && (op == PostClamp::kSub || op == PostClamp::kDiv))) return false;
  }
  const int y = n.outputs[0];
  if (!g.valid_tensor(y) || g.type(y) != kTfLiteFloat32 || g.shape(y) != g.shape(t)) return false;
  const std::vector<float> v = g.ConstantFloats(k);
  if (v.size() != 1) return false;
  *c = PostClamp{op, v[0], first};
  return true;
}

// Extends `f` (its chain ending at f.output, or at `t` before any unary op when f.kind is 0)
// with the nodes of a constant scalar that follow (AsPostClamp), each its input's only reader.
void AddPostClamps(const GraphView& g, const std::vector<NodeInfo>& nodes, size_t last, int t,
                   const std::set<int>& outputs, std::map<int, std::vector<size_t>>& readers,
                   EpilogueFusion* f) {
  while (f->post.size() < kMaxPostClamps && !outputs.count(t)) {
    const std::vector<size_t>& r = readers[t];
    PostClamp c;
    if (r.size() != 1 || r[0] <= last || !AsPostClamp(g, nodes[r[0]], t, &c)) return;
    if (f->kind == 0) f->kind = kIdentityEpilogue;
    // The value the clamp reads is no longer written (the producer's own output is listed).
    if (f->intermediates.empty() || f->intermediates.back() != t) f->intermediates.push_back(t);
    f->post.push_back(c);
    f->absorbed.push_back(r[0]);
    last = r[0];
    t = f->output = nodes[last].outputs[0];
  }
}

std::vector<EpilogueFusion> FindEpilogueFusions(const GraphView& g,
                                                const std::vector<NodeInfo>& nodes,
                                                const std::set<int>& outputs) {
  std::map<int, std::vector<size_t>> readers;
  for (size_t i = 0; i < nodes.size(); ++i)
    for (int t : nodes[i].inputs) readers[t].push_back(i);
  auto float_same = [&](int a, int b) {
    return g.valid_tensor(a) && g.valid_tensor(b) && g.type(a) == kTfLiteFloat32 &&
           g.type(b) == kTfLiteFloat32 && g.shape(a) == g.shape(b);
  };
  std::vector<EpilogueFusion> out;
  for (size_t p = 0; p < nodes.size(); ++p) {
    const NodeInfo& prod = nodes[p];
    const OpHandler* h = FindOpHandler(prod.op);
    if (!h || !(h->clamp_epilogue || h->table_epilogue) || prod.outputs.size() != 1) continue;
    // A table's taker that clamps nothing (a QUANTIZE): of floats only, the table alone.
    if (!h->clamp_epilogue && (prod.inputs.empty() || !g.valid_tensor(prod.inputs[0]) ||
                               g.type(prod.inputs[0]) != kTfLiteFloat32))
      continue;
    const int y = prod.outputs[0];
    if (outputs.count(y)) continue;
    const std::vector<size_t>& r = readers[y];
    EpilogueFusion f;
    f.producer = p;
    if (g.valid_tensor(y) && IsQuantized(g.value_type(y))) {
      if (FindInt8Epilogue(g, nodes, p, r, outputs, readers, &f)) out.push_back(std::move(f));
      continue;
    }
    if (!h->clamp_epilogue) continue;
    if (r.size() == 1) {
      // Through RESHAPEs and their kin (the same elements in the same order): the producer
      // writes its elements, activated, where the unary op's output is.
      size_t at = r[0];
      int t = y;
      f.intermediates = {y};
      bool ok = at > p;
      while (ok && FindOpHandler(nodes[at].op) && FindOpHandler(nodes[at].op)->flat_copy &&
             nodes[at].outputs.size() == 1) {
        t = nodes[at].outputs[0];
        const std::vector<size_t>& next = readers[t];
        ok = !outputs.count(t) && next.size() == 1 && next[0] > at;
        if (!ok) break;
        f.absorbed.push_back(at);
        f.intermediates.push_back(t);
        at = next[0];
      }
      if (!ok) continue;
      const NodeInfo& u = nodes[at];
      const bool unary = u.inputs.size() == 1 && u.outputs.size() == 1 && u.inputs[0] == t;
      f.kind = unary ? UnaryEpilogue(u, &f.alpha) : UniformPrelu(g, u, t, &f.alpha) ? 8 : 0;
      if (f.kind) {
        if (!g.valid_tensor(t) || !float_same(t, u.outputs[0])) continue;
        f.copies = !f.absorbed.empty();
        f.absorbed.push_back(at);
        f.output = u.outputs[0];
        AddPostClamps(g, nodes, at, f.output, outputs, readers, &f);
      } else {
        // No unary op: post ops alone, straight after the producer.
        if (!f.absorbed.empty() || !g.valid_tensor(y) || g.type(y) != kTfLiteFloat32) continue;
        AddPostClamps(g, nodes, p, y, outputs, readers, &f);
        if (f.post.empty()) continue;
      }
    } else if (const std::optional<PreluForm> pf = FindPreluForm(g, nodes, p, readers, outputs);
               pf && pf->slopes.size() == 1) {
      // A PRELU of one slope spelled as element-wise ops: LEAKY_RELU's epilogue, as above.
      f.kind = 8;
      f.alpha = pf->slopes[0];
      f.absorbed = pf->nodes;
      f.intermediates = pf->intermediates;
      f.output = pf->output;
      AddPostClamps(g, nodes, pf->nodes.back(), f.output, outputs, readers, &f);
    } else if (r.size() == 2) {
      // swish: s = LOGISTIC(y), z = MUL(y, s) with no activation.
      size_t li = 0, mi = 0;
      if (!SwishReaders(nodes, p, r, outputs, readers, &li, &mi)) continue;
      const NodeInfo& m = nodes[mi];
      const int s = nodes[li].outputs[0];
      int act = 0;
      std::memcpy(&act, m.builtin_data, sizeof act);
      if (act != 0 || !float_same(y, s) || !float_same(y, m.outputs[0])) continue;
      f.kind = 1;
      f.absorbed = {li, mi};
      f.intermediates = {y, s};
      f.output = m.outputs[0];
      AddPostClamps(g, nodes, mi, f.output, outputs, readers, &f);
    } else {
      continue;
    }
    out.push_back(std::move(f));
  }
  return out;
}

class EpiloguePass : public FusionPass {
 public:
  const char* name() const override { return "epilogue"; }
  void Find(const FoldGraph& g, Folds* folds) override {
    found_ = FindEpilogueFusions(g.g, g.nodes, g.outputs);
    for (const EpilogueFusion& f : found_) {
      folds->folded.insert(f.absorbed.begin(), f.absorbed.end());
      if (!f.intermediates.empty() && f.output >= 0)
        folds->written_instead[f.intermediates.front()] = f.output;
    }
  }
  void Apply(FoldPlan& plan) override {
    for (const EpilogueFusion& f : found_) {
      Op& producer = plan.op(f.producer);
      if (plan.absorbed(f.producer)) continue;
      bool free = true;
      for (size_t a : f.absorbed) free = free && !plan.absorbed(a);
      const Shape& s = plan.shape(producer.outputs()[0]);
      const Shape& z = plan.shape(f.output);
      Attachments& a = plan.attachments(f.producer);
      if (!free || !plan.SamePrecision(f.producer, f.absorbed) ||
          (f.copies ? NumElements(z) != NumElements(s) : z != s) ||
          !(f.kind == kTableEpilogue
                ? AttachTable(a, producer, f.output, f.table, s.empty() ? 0 : int(s.back()))
                : AttachEpilogue(a, producer, f.output, f.kind, f.alpha, f.post)))
        continue;
      for (size_t a : f.absorbed) plan.Absorb(a, f.producer);
      for (int t : f.intermediates) plan.Elide(t);
    }
  }

 private:
  std::vector<EpilogueFusion> found_;
};

}  // namespace

std::unique_ptr<FusionPass> MakeEpiloguePass() { return std::make_unique<EpiloguePass>(); }

}  // namespace clgpu
